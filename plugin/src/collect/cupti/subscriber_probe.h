#pragma once
// Who holds CUPTI's one callback subscription, asked without keeping it: subscribe, and on
// success unsubscribe at once. cuptiSubscribe_v2 (CUDA 13) names the holder when it refuses:
// Nsight Systems and Nsight Compute own CUPTI for the whole run; torch 2.11's Kineto subscribes
// unnamed at its first profile and never lets go, which says nothing about whether it profiles
// now. fathom itself never holds the subscription: its collection needs only the activity API.
#include <string>

#include "collect/cupti/cupti_api.h"

namespace fathom::cupti {

struct SubscriberProbe {
  bool held = false;   // another client holds the subscription
  std::string holder;  // its name where CUPTI gives one ("" for an unnamed subscriber)
  CUptiResult result = CUPTI_SUCCESS;  // the subscribe call's answer
};

// Never throws. The subscription, when it was free, is released before returning.
SubscriberProbe probe_subscriber(const Api& api) noexcept;

}  // namespace fathom::cupti
