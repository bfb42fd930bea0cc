#include "collect/cupti/subscriber_probe.h"

#include "base/warning_sink.h"

namespace fathom::cupti {
namespace {

void CUPTIAPI ignore_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

}  // namespace

SubscriberProbe probe_subscriber(const Api& api) noexcept {
  SubscriberProbe p;
  try {
    CUpti_SubscriberHandle handle = nullptr;
    char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 64] = {};
    if (api.subscribe_v2) {
      CUpti_SubscriberParams params{};
      params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
      params.subscriberName = "fathom";
      params.oldSubscriberName = holder;
      params.oldSubscriberSize = sizeof(holder);
      p.result = api.subscribe_v2(&handle, ignore_callback, nullptr, &params);
    } else if (api.subscribe) {
      p.result = api.subscribe(&handle, ignore_callback, nullptr);
    } else {
      p.result = CUPTI_ERROR_API_NOT_IMPLEMENTED;
      return p;
    }
    if (p.result == CUPTI_SUCCESS) {
      if (api.unsubscribe) api.unsubscribe(handle);
      return p;
    }
    p.held = p.result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    holder[sizeof(holder) - 1] = '\0';
    p.holder = holder;
  } catch (...) {
    detail::swallowed("collect/cupti/subscriber_probe.cpp");
  }
  return p;
}

}  // namespace fathom::cupti
