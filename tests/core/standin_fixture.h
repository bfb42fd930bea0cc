#pragma once
// A collector test against the CUPTI stand-in: the stand-in reset, a collector started on it,
// and the training loop's moves (an op launching a kernel under fathom's ids, a step of them).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "collect/clock.h"
#include "collect/cupti/cupti_collector.h"
#include "standin.h"

namespace fathom::testing {

inline bool mentions(const std::vector<Unmeasured>& notes, const std::string& text) {
  for (const Unmeasured& u : notes)
    if (u.why.find(text) != std::string::npos || u.what.find(text) != std::string::npos)
      return true;
  return false;
}

inline std::string all_notes(const std::vector<Unmeasured>& notes) {
  std::string s;
  for (const Unmeasured& u : notes) s += u.what + ": " + u.why + "\n";
  return s;
}

class StandinTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cupti = &standin::load();
    config.getenv = [this](const char* name) -> const char* {
      auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    };
    config.where = [this] { return "step " + std::to_string(step_no); };
    config.synchronize_device = [this] { cupti->wait_gpu(); };
  }
  std::unique_ptr<CuptiCollector> start() {
    return CuptiCollector::start(
        cupti->api, [this](GpuActivity&& a) { batches.push_back(std::move(a)); }, config);
  }
  // One op of the training loop: fathom's id pushed around what it launches, the op handed over.
  template <typename Launch>
  std::uint64_t in_op(CuptiCollector& c, Launch&& launch) {
    OpRecord r;
    r.name = "aten::mm";
    r.external_id = next_op++;
    r.thread = cupti_thread_id();
    r.start_ns = now_ns();
    c.notice_clients();  // as the op hooks do before pushing the op's id
    push_external_id(ExternalIdKind::Op, r.external_id);
    launch();
    pop_external_id(ExternalIdKind::Op);
    r.end_ns = now_ns();
    const std::uint64_t id = r.external_id;
    c.add_op(std::move(r));
    return id;
  }
  std::uint64_t op(CuptiCollector& c, const char* kernel, std::int64_t duration_ns = 20'000) {
    return in_op(c, [&] { cupti->launch_kernel(kernel, 7, duration_ns, false); });
  }
  // A step: the forward phase (fathom's phase id, a check for other clients, n ops), then the
  // step end's flush.
  void step(CuptiCollector& c, int n, const char* kernel = "ampere_sgemm_128x64_nn") {
    ++step_no;
    c.check_clients();
    push_external_id(ExternalIdKind::Phase, phase_external_id(Phase::Forward));
    for (int i = 0; i < n; ++i) op(c, kernel);
    pop_external_id(ExternalIdKind::Phase);
    c.flush(false);
  }
  // A loop that waits for its step (loss.item()): the step's buffers are complete at its end.
  void synced_step(CuptiCollector& c, int n) {
    step(c, n);
    cupti->wait_gpu();
    c.flush(false);
  }
  std::size_t kernels() const {
    std::size_t n = 0;
    for (const GpuActivity& a : batches) n += a.kernels.size();
    return n;
  }
  std::size_t kernels_named(const std::string& name) const {
    std::size_t n = 0;
    for (const GpuActivity& a : batches)
      for (const KernelRecord& k : a.kernels) n += k.name == name;
    return n;
  }
  std::int64_t dropped_in_batches() const {
    std::int64_t n = 0;
    for (const GpuActivity& a : batches) n += a.dropped_records;
    return n;
  }

  standin::Control* cupti = nullptr;
  CuptiConfig config;
  std::map<std::string, std::string> env;
  std::vector<GpuActivity> batches;
  std::uint64_t next_op = 1;
  int step_no = 0;
};

}  // namespace fathom::testing
