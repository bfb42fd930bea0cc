// Sharing CUPTI: asking the clients fathom knows (torch.profiler), standing aside when one takes
// CUPTI or fathom's buffers stop coming back, and resuming when CUPTI is fathom's again. fathom
// never takes CUPTI from a client it cannot ask (docs/cupti.md, "Sharing CUPTI with other tools").
#include "base/warning_sink.h"
#include "collect/cupti/collector_impl.h"
#include "collect/cupti/external_ids.h"
#include "collect/cupti/subscriber_probe.h"

namespace fathom {

using collector::Kind;
using collector::kKinds;

const KnownClient* CuptiCollector::Impl::active_client() const noexcept {
  for (const KnownClient& k : config.known_clients) {
    try {
      if (k.active && k.active()) return &k;
    } catch (...) {
      detail::swallowed("collect/cupti/collector_ownership.cpp");
    }
  }
  return nullptr;
}

bool CuptiCollector::Impl::records_gpu(const KnownClient& k) const noexcept {
  try {
    return !k.records_gpu || k.records_gpu();
  } catch (...) {
    detail::swallowed("collect/cupti/collector_ownership.cpp");
    return true;
  }
}

bool CuptiCollector::Impl::known_holder(const std::string& holder) const {
  if (config.known_clients.empty()) return false;
  if (holder.empty()) return true;  // torch 2.11's Kineto subscribes without a name
  for (const KnownClient& k : config.known_clients)
    for (const std::string& n : k.subscriber_names)
      if (!n.empty() && holder.find(n) != std::string::npos) return true;
  return false;
}

void CuptiCollector::Impl::stand_aside(Aside reason, std::string who) {
  if (state.load() != CuptiState::Collecting) return;
  // fathom's ids must not reach the other client's records.
  collector::set_external_api(nullptr);
  state.store(CuptiState::StandingAside);
  aside = reason;
  aside_who = std::move(who);
  aside_from = where();
  // Empty fathom's buffers out of CUPTI: with the device idle a forced flush cuts no record, and
  // every queue starts on the other client's buffers. Without a way to wait, only what is
  // complete goes (the rest reaches the other client, which drops a buffer it did not allocate).
  bool waited = false;
  if (reason == Aside::KnownClient && config.synchronize_device) {
    try {
      config.synchronize_device();
      waited = true;
    } catch (...) {
      detail::swallowed("collect/cupti/collector_ownership.cpp");
    }
  }
  cupti::BufferRegistry& registry = cupti::BufferRegistry::get();
  const std::uint64_t cut = registry.cut();
  const CUptiResult flushed = FATHOM_CUPTI(
      api, activity_flush_all, waited ? std::uint32_t{CUPTI_ACTIVITY_FLAG_FLUSH_FORCED} : 0u);
  collect_completed();
  deliver(waited);
  // After a forced flush CUPTI holds no buffer fathom handed out before it: those that did not
  // come back went to the client's callbacks, which keep a buffer they did not allocate and never
  // free it (issue 23, 4c: 1 MiB a queue at every profile of a schedule).
  if (waited && flushed == CUPTI_SUCCESS && owner) {
    if (const std::size_t n = registry.release_unreturned(owner.get(), cut)) {
      note(kCuptiMeasurements,
           std::to_string(n) + " of fathom's activity buffers went to " + aside_who +
               " when it took CUPTI (it drops a buffer it did not allocate): fathom freed them, "
               "and the records in them are lost");
    }
  }
  // The kinds only fathom uses would reach the other client as records it never asked for; the
  // shared ones (kernels, copies, the runtime and driver calls) it enabled itself: left alone,
  // unless its profile records no GPU work (activities=[CPU]): then kernels, copies and memsets
  // are nobody's, and off until fathom resumes (issue 23, 4b).
  bool gpu_unused = false;
  if (reason == Aside::KnownClient)
    if (const KnownClient* client = active_client()) gpu_unused = !records_gpu(*client);
  for (auto it = enabled.begin(); it != enabled.end();) {
    const Kind* k = nullptr;
    for (const Kind& c : kKinds)
      if (c.kind == *it) k = &c;
    if (k && (k->fathom_only || (gpu_unused && k->gpu_work))) {
      FATHOM_CUPTI(api, activity_disable, *it);
      it = enabled.erase(it);
    } else {
      ++it;
    }
  }
  const std::string from = aside_from.empty() ? std::string() : " at " + aside_from;
  if (reason == Aside::Displaced) {
    note(kCuptiMeasurements,
         "fathom's CUPTI buffers stopped coming back" + from +
             " although the loop made CUDA calls: another CUPTI client took CUPTI's activity "
             "callbacks; fathom stands aside, and GPU activity from there is not measured");
  } else {
    note(kCuptiMeasurements, aside_who + " took CUPTI" + from +
                                 ": fathom stands aside so its trace keeps every GPU event; GPU "
                                 "activity from there is not measured until it is done");
  }
}

void CuptiCollector::Impl::resume(const std::string& why, bool taken_over) {
  const std::string from = aside_from;
  if (!arm(taken_over)) return;  // arm() said why
  const std::string to = where();
  std::string span;
  if (!from.empty() && !to.empty()) span = " from " + from + " to " + to;
  note(kCuptiMeasurements, "fathom resumed CUPTI collection" + (to.empty() ? "" : " at " + to) +
                               " (" + why + "): GPU activity" + span + " is not measured");
}

void CuptiCollector::Impl::check_ownership(bool forced) {
  const CuptiState s = state.load();
  const std::uint64_t heartbeat = owner ? owner->heartbeat() : 0;
  const std::size_t calls = traced_calls.exchange(0);
  if (s == CuptiState::Collecting) {
    const KnownClient* seen = seen_client.exchange(nullptr);
    if (const KnownClient* k = active_client()) {
      stand_aside(Aside::KnownClient, k->name);
      return;
    }
    if (seen) {
      // An op saw a profile that is over by now (started and stopped inside a phase): its
      // callbacks took fathom's place. fathom empties its buffers out of CUPTI as at any
      // takeover, and collects again from here rather than from the epoch's end (issue 23, 4d).
      stand_aside(Aside::KnownClient, seen->name);
      if (state.load() == CuptiState::StandingAside) resume(seen->name + " is done", true);
      return;
    }
    if (calls > 0) silent_flushes = heartbeat == last_heartbeat ? silent_flushes + 1 : 0;
    last_heartbeat = heartbeat;
    if (silent_flushes >= std::max(config.displacement_flushes, 1))
      stand_aside(Aside::Displaced, "another CUPTI client");
    return;
  }
  if (s != CuptiState::StandingAside) return;
  switch (aside) {
    case Aside::KnownClient:
    case Aside::Yielded:
      if (!config.known_clients.empty() && !active_client())
        resume(aside_who + " is done", /*taken_over=*/true);
      break;
    case Aside::Displaced:
      if (heartbeat != last_heartbeat) {
        // fathom's callbacks still get buffers: nobody took them after all.
        resume("its buffers came back: no other client had taken CUPTI", /*taken_over=*/false);
      } else if (forced && !config.known_clients.empty() && !active_client()) {
        // The device is idle and the forced flush brought nothing: the taker registered its
        // callbacks and went. A known client that is done now is the likely one; any other
        // subscriber that names itself keeps CUPTI.
        const cupti::SubscriberProbe probe = cupti::probe_subscriber(api);
        if (!probe.held || known_holder(probe.holder))
          resume("the client that took CUPTI is gone", /*taken_over=*/true);
      }
      last_heartbeat = heartbeat;
      break;
    case Aside::None:
      break;
  }
}

}  // namespace fathom
