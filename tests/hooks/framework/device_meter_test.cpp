// The device meter's memory peaks against a stand-in for the caching allocator (CPU): peaks per
// phase and between steps, and the allocator's own statistics exactly as without fathom.
#include "framework/device_meter.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>

#include "base/file_system.h"
#include "collect/clock.h"
#include "framework/allocator_access.h"
#include "framework/session_state.h"
#include "session_fixture.h"

namespace fathom::detail {
namespace {

constexpr std::int64_t MiB = 1 << 20;

// A device's caching allocator in miniature. It keeps the user's statistics the way c10's does
// (current and peak; only a reset of theirs could lower a peak) and reports to its follower the
// way c10's trace tracker does: an allocation is read before it counts, a free after, a new
// segment once counted.
class FakeAllocator {
 public:
  struct UserStats {
    std::int64_t allocated = 0, allocated_peak = 0, reserved = 0, reserved_peak = 0;
    bool operator==(const UserStats&) const = default;
  };

  void alloc(std::int64_t bytes) {
    if (r_.allocated + bytes > r_.reserved) {
      r_.reserved = r_.allocated + bytes;
      user_.reserved_peak = std::max(user_.reserved_peak, r_.reserved);
      notify();
    }
    notify();
    r_.allocated += bytes;
    r_.allocated_total += bytes;
    user_.allocated_peak = std::max(user_.allocated_peak, r_.allocated);
  }
  void free(std::int64_t bytes) {
    r_.allocated -= bytes;
    r_.freed_total += bytes;
    notify();
  }

  UserStats user_stats() const {
    UserStats s = user_;
    s.allocated = r_.allocated;
    s.reserved = r_.reserved;
    return s;
  }
  AllocatorReading reading() const { return r_; }

  MemoryPeakTracker* follower = nullptr;
  std::string refuse_follow;  // non-empty: follow() fails with this reason

 private:
  void notify() {
    if (follower) follower->observe(r_);
  }
  AllocatorReading r_;
  UserStats user_;
};

class FakeAccess final : public AllocatorAccess {
 public:
  explicit FakeAccess(FakeAllocator& a) : a_(a) {}
  int device() const noexcept override { return 0; }
  std::optional<AllocatorReading> read() noexcept override { return a_.reading(); }
  FollowResult follow(MemoryPeakTracker& tracker) noexcept override {
    if (!a_.refuse_follow.empty()) return {nullptr, a_.refuse_follow};
    a_.follower = &tracker;
    return {std::make_unique<Unfollow>(a_), ""};
  }

 private:
  struct Unfollow final : AllocatorFollow {
    explicit Unfollow(FakeAllocator& a) : a(a) {}
    ~Unfollow() override { a.follower = nullptr; }
    FakeAllocator& a;
  };
  FakeAllocator& a_;
};

// The allocations of one training step, phase by phase: `in` opens and closes phases (or does
// nothing, for the run without fathom).
template <typename Phases>
void one_step(FakeAllocator& a, Phases&& in) {
  in(Phase::Forward, [&] {
    a.alloc(32 * MiB);
    a.alloc(32 * MiB);
    a.alloc(32 * MiB);
    a.free(32 * MiB);
    a.free(32 * MiB);
  });
  in(Phase::Backward, [&] {
    a.alloc(16 * MiB);
    a.free(16 * MiB);
    a.free(32 * MiB);
  });
  in(Phase::Optimizer, [&] {
    a.alloc(8 * MiB);
    a.free(8 * MiB);
  });
}

void between_steps(FakeAllocator& a) {  // the loader's batch, pinned and dropped
  a.alloc(128 * MiB);
  a.free(128 * MiB);
}

TEST(DeviceMeter, PhasePeaksLeaveTheAllocatorsStatisticsAsTheyWere) {
  FakeAllocator without, with;
  without.alloc(64 * MiB);
  with.alloc(64 * MiB);
  auto no_phases = [](Phase, auto&& body) { body(); };
  one_step(without, no_phases);

  std::vector<PhaseRecord> records;
  {
    DeviceMeter meter(std::nullopt, std::make_unique<FakeAccess>(with));
    ASSERT_TRUE(meter.enabled());
    EXPECT_TRUE(meter.memory_not_measured().empty());
    one_step(with, [&](Phase p, auto&& body) {
      const int slot = meter.begin();
      ASSERT_GE(slot, 0);
      body();
      PhaseRecord r;
      r.phase = p;
      meter.end(slot, r);
    });
    meter.drain(/*wait=*/true, [&](const PhaseRecord& r) { records.push_back(r); });
  }
  EXPECT_EQ(with.follower, nullptr);  // the meter let go of the allocator when it went

  EXPECT_EQ(with.user_stats(), without.user_stats());
  EXPECT_EQ(with.user_stats().allocated_peak, 160 * MiB);
  ASSERT_EQ(records.size(), 3u);
  for (const PhaseRecord& r : records) ASSERT_TRUE(r.device_memory) << phase_name(r.phase);
  EXPECT_EQ(records[0].device_memory->peak_allocated_bytes, 160 * MiB);  // 64 + 3 x 32
  EXPECT_EQ(records[1].device_memory->peak_allocated_bytes, 112 * MiB);  // 64 + 32 + 16
  EXPECT_EQ(records[2].device_memory->peak_allocated_bytes, 72 * MiB);   // 64 + 8
  for (const PhaseRecord& r : records) {
    EXPECT_EQ(r.device_memory->peak_reserved_bytes, 160 * MiB);  // cached since forward
    EXPECT_FALSE(r.device_ms);                                   // no device to time on
  }
}

// A device with events and nothing else, so the timed path runs on a CPU: each event completes
// when recorded, half a millisecond after its partner.
struct EventOnlyDevice final : c10::impl::DeviceGuardImplInterface {
  static constexpr auto kType = c10::DeviceType::PrivateUse1;
  c10::DeviceType type() const override { return kType; }
  c10::Device exchangeDevice(c10::Device d) const override { return d; }
  c10::Device getDevice() const override { return c10::Device(kType, 0); }
  void setDevice(c10::Device) const override {}
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream exchangeStream(c10::Stream s) const override { return s; }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  void record(void** event, const c10::Stream&, const c10::DeviceIndex,
              const c10::EventFlag) const override {
    static char recorded;
    *event = &recorded;
  }
  bool queryEvent(void*) const override { return true; }
  void synchronizeEvent(void*) const override {}
  double elapsedTime(void*, void*, const c10::DeviceIndex) const override { return 0.5; }
};
C10_REGISTER_GUARD_IMPL(PrivateUse1, EventOnlyDevice);

TEST(DeviceMeter, TimedPhasesCarryTheirMemoryPeaksToo) {
  FakeAllocator a;
  DeviceMeter meter(c10::Device(EventOnlyDevice::kType, 0), std::make_unique<FakeAccess>(a));
  for (std::int64_t mib : {10, 30}) {
    const int slot = meter.begin();
    ASSERT_GE(slot, 0);
    a.alloc(mib * MiB);
    a.free(mib * MiB);
    meter.end(slot, PhaseRecord{});
  }
  std::vector<PhaseRecord> records;
  meter.drain(/*wait=*/false, [&](const PhaseRecord& r) { records.push_back(r); });
  ASSERT_EQ(records.size(), 2u);
  for (const PhaseRecord& r : records) {
    ASSERT_TRUE(r.device_ms);
    EXPECT_DOUBLE_EQ(*r.device_ms, 0.5);
    ASSERT_TRUE(r.device_memory);
  }
  EXPECT_EQ(records[0].device_memory->peak_allocated_bytes, 10 * MiB);
  EXPECT_EQ(records[1].device_memory->peak_allocated_bytes, 30 * MiB);
}

TEST(DeviceMeter, NestedPhasesKeepTheOuterPeak) {
  FakeAllocator a;
  DeviceMeter meter(std::nullopt, std::make_unique<FakeAccess>(a));
  const int outer = meter.begin();
  a.alloc(50 * MiB);
  a.free(50 * MiB);
  const int inner = meter.begin();  // a copy inside the data phase, say
  a.alloc(5 * MiB);
  a.free(5 * MiB);
  meter.end(inner, PhaseRecord{});
  meter.end(outer, PhaseRecord{});
  std::vector<PhaseRecord> records;
  meter.drain(/*wait=*/true, [&](const PhaseRecord& r) { records.push_back(r); });
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].device_memory->peak_allocated_bytes, 5 * MiB);
  EXPECT_EQ(records[1].device_memory->peak_allocated_bytes, 50 * MiB);
}

TEST(DeviceMeter, AnAllocatorThatCannotBeFollowedMeasuresNothingAndSaysWhy) {
  FakeAllocator a;
  a.refuse_follow = "no trace callbacks in this backend";
  DeviceMeter meter(std::nullopt, std::make_unique<FakeAccess>(a));
  EXPECT_EQ(meter.memory_not_measured(), "no trace callbacks in this backend");
  EXPECT_FALSE(meter.enabled());
  EXPECT_EQ(meter.begin(), -1);
  EXPECT_EQ(meter.begin_memory(), -1);
}

// --- the session around it ----------------------------------------------------------------------

using test::SessionTest;

// The state a Session holds, on the fake allocator, driven the way the scopes drive it.
struct FakeSession {
  explicit FakeSession(const std::string& dir, FakeAllocator& a)
      : state(Options().report_dir(dir).print_report(false).mode(Mode::Observe), std::nullopt,
              std::make_unique<FakeAccess>(a)) {
    fs::make_directories(dir);
  }
  template <typename Body>
  void phase(Phase p, Body&& body) {
    const int slot = state.begin_phase(p);
    const std::int64_t begin = now_ns();
    body();
    state.end_phase(p, begin, slot, /*aborted=*/false);
  }
  SessionState state;
};

TEST_F(SessionTest, APeakBetweenStepsIsTheDataPhasesAndTheEpochs) {
  FakeAllocator without, with;
  without.alloc(64 * MiB);
  with.alloc(64 * MiB);
  auto no_phases = [](Phase, auto&& body) { body(); };
  for (int i = 0; i < 3; ++i) {
    between_steps(without);
    one_step(without, no_phases);
  }

  FakeSession s(dir(), with);
  s.state.begin_epoch();
  for (int i = 0; i < 3; ++i) {
    between_steps(with);  // before step 0 too: the gap starts with the epoch
    s.state.begin_step();
    const std::int64_t step_begin = now_ns();
    one_step(with, [&](Phase p, auto&& body) { s.phase(p, body); });
    s.state.end_step(step_begin, 1, /*failed=*/false);
  }
  s.state.end_epoch(/*by_exception=*/false);

  EXPECT_EQ(with.user_stats(), without.user_stats());
  const EpochSummary& e = s.state.report().epochs.at(0);
  const PhaseSummary& data = e.phase(Phase::Data);
  EXPECT_TRUE(data.inferred);
  ASSERT_TRUE(data.device_memory);
  EXPECT_EQ(data.device_memory->peak_allocated_bytes, 192 * MiB);  // 64 + the 128 MiB batch
  ASSERT_TRUE(e.phase(Phase::Forward).device_memory);
  EXPECT_EQ(e.phase(Phase::Forward).device_memory->peak_allocated_bytes, 160 * MiB);
  EXPECT_EQ(e.phase(Phase::Optimizer).device_memory->peak_allocated_bytes, 72 * MiB);
  ASSERT_TRUE(e.device_memory);
  EXPECT_EQ(e.device_memory->peak_allocated_bytes, 192 * MiB);
  EXPECT_EQ(e.device_memory->peak_reserved_bytes, 192 * MiB);
  EXPECT_EQ(e.device_memory->peak_allocated_bytes, with.user_stats().allocated_peak);
}

TEST_F(SessionTest, APeakOutsideEveryPhaseStillCountsForTheEpoch) {
  FakeAllocator a;
  FakeSession s(dir(), a);
  s.state.begin_epoch();
  s.state.begin_step();
  const std::int64_t step_begin = now_ns();
  s.phase(Phase::Forward, [&] {
    a.alloc(10 * MiB);
    a.free(10 * MiB);
  });
  a.alloc(40 * MiB);  // inside the step, between two phases
  a.free(40 * MiB);
  s.phase(Phase::Backward, [&] {});
  s.state.end_step(step_begin, 1, /*failed=*/false);
  s.state.end_epoch(/*by_exception=*/false);
  const EpochSummary& e = s.state.report().epochs.at(0);
  ASSERT_TRUE(e.device_memory);
  EXPECT_EQ(e.device_memory->peak_allocated_bytes, 40 * MiB);
  EXPECT_EQ(e.phase(Phase::Forward).device_memory->peak_allocated_bytes, 10 * MiB);
}

TEST_F(SessionTest, AnAllocatorThatCannotBeFollowedIsReportedAsNotMeasured) {
  FakeAllocator a;
  a.refuse_follow = "no trace callbacks in this backend";
  FakeSession s(dir(), a);
  const auto& missing = s.state.report().environment.not_measured;
  auto it = std::find_if(missing.begin(), missing.end(), [](const Unmeasured& u) {
    return u.what == "device memory per phase (caching allocator)";
  });
  ASSERT_NE(it, missing.end());
  EXPECT_EQ(it->why, "no trace callbacks in this backend");
}

}  // namespace
}  // namespace fathom::detail
