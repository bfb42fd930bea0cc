#pragma once
// Units shared by the planner's tests and the report's: an MLP block whose optimum at each budget
// activation_plan_test works out by hand.
#include <fathom/activation_plan.h>

#include <string>

namespace fathom::test {

// A unit like an MLP block: a matmul that saves its input (100 B) and its output (200 B, 4 ms),
// a GELU that saves its output (200 B, 1 ms) and a second matmul whose output is the unit's
// (100 B, 4 ms).
inline ActivationUnit mlp_unit(const std::string& name) {
  ActivationUnit u;
  u.name = name;
  u.input_bytes = 100;
  u.input_saved_bytes = 100;
  u.output_bytes = 100;
  u.groups = {{"mm", 200, 4.0, 4000, true, {kUnitInput}},
              {"gelu", 200, 1.0, 200, false, {0}},
              {"mm2", 100, 4.0, 4000, true, {1}}};
  return u;
}

}  // namespace fathom::test
