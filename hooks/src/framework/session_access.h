#pragma once
// How fathom's own code (its features' public functions, guarded_step) and white-box tests reach
// the state behind the public Session and scopes. The public classes name it a friend and expose
// nothing else of their insides. Null when fathom is off.
#include <fathom/session.h>

#include "framework/session_state.h"

namespace fathom::detail {

class SessionAccess {
 public:
  static SessionState* state(const Session& session) noexcept { return session.state_.get(); }
  static SessionState* state(const EpochScope& epoch) noexcept { return epoch.state_; }
  static SessionState* state(const StepScope& step) noexcept { return step.state_; }
};

}  // namespace fathom::detail
