#include <fathom/amp_policy.h>
#include <gtest/gtest.h>

#include <limits>

namespace fathom {
namespace {

AutoAmpOptions small() {
  AutoAmpOptions o;
  o.warmup_steps = 10;
  o.watch_steps = 8;
  o.tolerance = 0.1;
  return o;
}

double loss_at(std::int64_t step) {
  return 2.0 - 0.01 * static_cast<double>(step) + (step % 2 ? 0.02 : -0.02);
}

// One step run the way the policy said: amp_ms under mixed precision, fp32_ms otherwise.
struct Feed {
  std::optional<double> loss;
  double amp_ms = 8.0;
  double fp32_ms = 10.0;
  bool nonfinite = false;
  bool scaling = false;
};

std::optional<AmpEvent> step(AutoAmpPolicy& p, std::int64_t s, const Feed& f) {
  const bool low = p.amp_on();
  return p.observe({s, f.loss, f.nonfinite, f.scaling, low ? f.amp_ms : f.fp32_ms, low});
}

// Runs the warm-up: steps 0..9 in fp32 with a falling loss and 10 ms steps.
void warm_up(AutoAmpPolicy& p) {
  for (std::int64_t s = 0; s < 10; ++s) {
    EXPECT_FALSE(p.amp_on()) << s;
    auto ev = step(p, s, {loss_at(s)});
    if (s < 9) {
      EXPECT_FALSE(ev) << s;
    } else {
      ASSERT_TRUE(ev);
      EXPECT_EQ(ev->kind, AmpEventKind::Enabled);
      EXPECT_EQ(ev->step, 9);
    }
  }
}

TEST(AutoAmpPolicy, EnablesAfterWarmupAndAcceptsWhenLossKeepsTheTrend) {
  AutoAmpPolicy p(small());
  EXPECT_EQ(amp_stage_name(p.stage()), "warming_up");
  warm_up(p);
  EXPECT_EQ(p.stage(), AmpStage::Watching);
  // Watch of 8 steps, every 4th an fp32 probe: mixed, mixed, mixed, fp32, mixed, mixed, mixed,
  // fp32.
  std::vector<bool> pattern;
  std::optional<AmpEvent> ev;
  for (std::int64_t s = 10; s < 18; ++s) {
    pattern.push_back(p.amp_on());
    ev = step(p, s, {loss_at(s)});
    if (s < 17) EXPECT_FALSE(ev) << s;
  }
  EXPECT_EQ(pattern, (std::vector<bool>{true, true, true, false, true, true, true, false}));
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, AmpEventKind::Accepted);
  EXPECT_EQ(p.stage(), AmpStage::Enabled);
  EXPECT_TRUE(p.amp_on());
  EXPECT_DOUBLE_EQ(*p.fp32_step_ms(), 10.0);
  EXPECT_DOUBLE_EQ(*p.amp_step_ms(), 8.0);
  EXPECT_NEAR(*p.fp32_loss_reference(), 1.934, 1e-9);  // mean of steps 5-9, above the line's 1.91
}

TEST(AutoAmpPolicy, NonFiniteLossRollsBackAtOnce) {
  AutoAmpPolicy p(small());
  warm_up(p);
  auto ev = step(p, 10, {std::numeric_limits<double>::quiet_NaN()});
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, AmpEventKind::RolledBack);
  EXPECT_NE(ev->detail.find("nan"), std::string::npos) << ev->detail;
  EXPECT_FALSE(p.amp_on());
  EXPECT_EQ(amp_stage_name(p.stage()), "rolled_back");
  // Rolled back is for good.
  EXPECT_FALSE(step(p, 11, {1.0}));
  EXPECT_FALSE(p.amp_on());
}

TEST(AutoAmpPolicy, DriftBeyondToleranceRollsBack) {
  AutoAmpOptions o = small();
  o.watch_steps = 30;
  AutoAmpPolicy p(o);
  warm_up(p);
  // Mixed precision lifts every loss to 3.0; the fp32 probes keep to the trend.
  std::optional<AmpEvent> ev;
  std::int64_t s = 10;
  for (; s < 40 && !ev; ++s) ev = step(p, s, {p.amp_on() ? 3.0 : loss_at(s)});
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, AmpEventKind::RolledBack);
  // Early, once a median of 3 mixed-precision losses shows it (the 3rd step of the watch).
  EXPECT_EQ(ev->step, 12);
  EXPECT_NE(ev->detail.find("drifted"), std::string::npos) << ev->detail;
  EXPECT_NE(ev->detail.find("Mann-Whitney"), std::string::npos) << ev->detail;
  EXPECT_EQ(p.stage(), AmpStage::RolledBack);
}

// Issue 16: the example rolled back at the first watched step, "mean 1.751 over the last 1
// steps": one noisy batch decided for good. A single spike, at the start or in the middle of the
// window, must not flip the decision.
TEST(AutoAmpPolicy, OneLossSpikeInTheWatchKeepsMixedPrecision) {
  for (std::int64_t spike_at : {10, 15}) {
    AutoAmpOptions o = small();
    o.watch_steps = 12;
    AutoAmpPolicy p(o);
    warm_up(p);
    std::optional<AmpEvent> ev;
    for (std::int64_t s = 10; s < 22; ++s) {
      const bool low = p.amp_on();
      const double loss = low && s == spike_at ? 3.0 * loss_at(s) : loss_at(s);
      ev = step(p, s, {loss});
      if (s < 21)
        EXPECT_FALSE(ev) << "spike at " << spike_at << ", step " << s << ": "
                         << (ev ? ev->detail : "");
    }
    ASSERT_TRUE(ev) << spike_at;
    EXPECT_EQ(ev->kind, AmpEventKind::Accepted) << ev->detail;
    // The evidence states the test and its margins.
    EXPECT_NE(ev->detail.find("trend + 10 %"), std::string::npos) << ev->detail;
    EXPECT_NE(ev->detail.find("p < 0.01"), std::string::npos) << ev->detail;
    EXPECT_NE(ev->detail.find("fp32 - 5 %"), std::string::npos) << ev->detail;
  }
}

// A sustained drift over the window still rolls back at its end, though each loss is within the
// early check's limit (tolerance + 3 noise) taken alone.
TEST(AutoAmpPolicy, SustainedSmallDriftRollsBackAtTheWindowsEnd) {
  AutoAmpPolicy p(small());
  warm_up(p);
  std::optional<AmpEvent> ev;
  // 0.04 above the trend + 10 %: within the 3 noise (0.06) one loss may show.
  for (std::int64_t s = 10; s < 18 && !ev; ++s) {
    const double ref = *p.fp32_loss_reference();
    ev = step(p, s, {p.amp_on() ? ref * 1.1 + 0.04 : loss_at(s)});
  }
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, AmpEventKind::RolledBack) << ev->detail;
  EXPECT_EQ(ev->step, 17);
  EXPECT_NE(ev->detail.find("drifted"), std::string::npos) << ev->detail;
}

// Issue 16: a rollback on a shared machine was decided by timing noise: the median of noisy
// mixed-precision steps landed 6 % above fp32's, over a 5 % margin, though the samples overlap.
// Issue 24: such steps show no gain either, and a change is kept only for a gain: the window
// rolls back at its end, saying the steps were not shown faster (not that they were slower).
TEST(AutoAmpPolicy, NoisyStepTimesThatOverlapAreNotShownFaster) {
  AutoAmpOptions o = small();
  o.watch_steps = 12;  // three fp32 probes
  AutoAmpPolicy p(o);
  warm_up(p);
  const std::vector<double> amp_ms{9.5, 10.6, 11.8, 9.2, 10.6, 12.5, 8.9, 10.7, 11.0};
  const std::vector<double> fp32_ms{9.0, 10.0, 12.0};
  std::size_t a = 0, f = 0;
  std::optional<AmpEvent> ev;
  for (std::int64_t s = 10; s < 22; ++s) {
    const bool low = p.amp_on();
    const double ms = low ? amp_ms.at(a++) : fp32_ms.at(f++);
    ev = p.observe({s, loss_at(s), false, false, ms, low});
    if (s < 21) ASSERT_FALSE(ev) << s << ": " << ev->detail;
  }
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, AmpEventKind::RolledBack) << ev->detail;
  EXPECT_NE(ev->detail.find("not shown faster"), std::string::npos) << ev->detail;
  EXPECT_NE(ev->detail.find("ratio 1.06"), std::string::npos) << ev->detail;
}

// Issue 24: on a linear regression bf16 steps took 37.09 ms against 0.16 ms in fp32, and the
// watch kept them ("p = 0.01, a rollback needs p < 0.01"); on other loops it ran 49 steps 3-12x
// slower before rolling back. A change that slow rolls back at once, no test to wait for: at the
// first mixed-precision step after the watch's first fp32 probe (steps 10-12 bf16, 13 fp32, 14),
// which measures fp32 under the same load; the first bf16 step, filling cast caches, is left out.
TEST(AutoAmpPolicy, FarSlowerStepsRollBackAtOnce) {
  AutoAmpOptions o = small();
  o.watch_steps = 30;
  AutoAmpPolicy p(o);
  for (std::int64_t s = 0; s < 10; ++s) p.observe({s, loss_at(s), false, false, 0.16, false});
  ASSERT_EQ(p.stage(), AmpStage::Watching);
  std::optional<AmpEvent> ev;
  std::int64_t s = 10;
  for (; s < 40 && !ev; ++s) ev = step(p, s, {loss_at(s), 37.09, 0.16});
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, AmpEventKind::RolledBack) << ev->detail;
  EXPECT_EQ(ev->step, 14) << ev->detail;
  EXPECT_NE(ev->detail.find("37.09 ms against 0.16 ms"), std::string::npos) << ev->detail;
  EXPECT_NE(ev->detail.find("at once"), std::string::npos) << ev->detail;
  EXPECT_FALSE(p.amp_on());
}

// Just under the at-once factor: the cost is not shown by two steps alone, and the window's end
// rolls it back as not faster. One fast step among them keeps the watch going.
TEST(AutoAmpPolicy, SlowerStepsBelowTheAbortRatioWaitForTheWindow) {
  AutoAmpPolicy p(small());
  warm_up(p);  // 10 ms fp32 steps
  const std::vector<double> amp_ms{40.0, 30.0, 9.0, 14.0, 14.0, 14.0};
  std::size_t a = 0;
  std::optional<AmpEvent> ev;
  for (std::int64_t s = 10; s < 18; ++s) {
    const bool low = p.amp_on();
    ev = p.observe({s, loss_at(s), false, false, low ? amp_ms.at(a++) : 10.0, low});
    if (s < 17) ASSERT_FALSE(ev) << s << ": " << ev->detail;
  }
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, AmpEventKind::RolledBack) << ev->detail;
  EXPECT_NE(ev->detail.find("not shown faster"), std::string::npos) << ev->detail;
}

// Issue 24: keep a change only for a clear gain. Steps as fast as fp32's (no gain, and bf16's
// risk to the loss) roll back at the window's end; 5 % faster is the least that is kept.
TEST(AutoAmpPolicy, StepsNoFasterThanFp32RollBackAndClearlyFasterOnesAreKept) {
  for (const auto& [amp_ms, kept] : std::vector<std::pair<double, bool>>{
           {10.0, false}, {9.8, false}, {9.4, true}, {5.0, true}}) {
    AutoAmpPolicy p(small());
    warm_up(p);
    std::optional<AmpEvent> ev;
    for (std::int64_t s = 10; s < 18; ++s) ev = step(p, s, {loss_at(s), amp_ms, 10.0});
    ASSERT_TRUE(ev) << amp_ms;
    EXPECT_EQ(ev->kind, kept ? AmpEventKind::Accepted : AmpEventKind::RolledBack)
        << amp_ms << ": " << ev->detail;
  }
}

TEST(AutoAmpPolicy, AFailedStepTurnsItOffForGood) {
  AutoAmpPolicy p(small());
  warm_up(p);
  step(p, 10, {loss_at(10)});
  const AmpEvent ev = p.fail(11, "the step threw under mixed precision");
  EXPECT_EQ(ev.kind, AmpEventKind::RolledBack);
  EXPECT_EQ(p.stage(), AmpStage::RolledBack);
  for (std::int64_t s = 12; s < 30; ++s) EXPECT_FALSE(step(p, s, {loss_at(s)}));
  EXPECT_FALSE(p.amp_on());
}

TEST(AutoAmpPolicy, InfGradientsRollBackWithoutAScalerButNotWithOne) {
  AutoAmpPolicy scaled(small());
  warm_up(scaled);
  EXPECT_FALSE(step(scaled, 10, {loss_at(10), 8, 10, /*nonfinite=*/true, /*scaling=*/true}));
  EXPECT_TRUE(scaled.amp_on());
  AutoAmpPolicy bf16(small());
  warm_up(bf16);
  auto ev = step(bf16, 10, {loss_at(10), 8, 10, true, false});
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, AmpEventKind::RolledBack);
}

TEST(AutoAmpPolicy, SlowerStepsRollBackUnlessAllowed) {
  AutoAmpPolicy p(small());
  warm_up(p);
  std::optional<AmpEvent> ev;
  for (std::int64_t s = 10; s < 18; ++s) ev = step(p, s, {loss_at(s), 12.0, 10.0});
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, AmpEventKind::RolledBack);
  EXPECT_NE(ev->detail.find("not shown faster"), std::string::npos) << ev->detail;

  AutoAmpOptions o = small();
  o.rollback_if_slower = false;
  AutoAmpPolicy q(o);
  warm_up(q);
  for (std::int64_t s = 10; s < 18; ++s) ev = step(q, s, {loss_at(s), 12.0, 10.0});
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, AmpEventKind::Accepted);
}

TEST(AutoAmpPolicy, InterleavedFp32StepsKeepALoadChangeFromLookingLikeSlowerSteps) {
  AutoAmpOptions o = small();
  o.watch_steps = 12;  // three fp32 probes
  AutoAmpPolicy p(o);
  warm_up(p);  // 10 ms fp32 steps
  // The machine got busy: everything is twice as slow now, mixed precision still 20 % faster.
  std::optional<AmpEvent> ev;
  for (std::int64_t s = 10; s < 22; ++s) ev = step(p, s, {loss_at(s), 16.0, 20.0});
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, AmpEventKind::Accepted) << ev->detail;
  EXPECT_DOUBLE_EQ(*p.fp32_step_ms(), 20.0);
  EXPECT_NE(ev->detail.find("3 steps interleaved"), std::string::npos) << ev->detail;

  // Without probes the same run compares against the warm-up's 10 ms: 1.6x, rolled back at once.
  o.fp32_probe_every = 0;
  AutoAmpPolicy q(o);
  warm_up(q);
  ev.reset();
  for (std::int64_t s = 10; s < 22 && !ev; ++s) {
    EXPECT_TRUE(q.amp_on());
    ev = step(q, s, {loss_at(s), 16.0, 20.0});
  }
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, AmpEventKind::RolledBack);
  EXPECT_EQ(ev->step, 12);
}

TEST(AutoAmpPolicy, NonFiniteLossAfterAcceptanceStillRollsBack) {
  AutoAmpPolicy p(small());
  warm_up(p);
  for (std::int64_t s = 10; s < 18; ++s) step(p, s, {loss_at(s)});
  ASSERT_EQ(p.stage(), AmpStage::Enabled);
  auto ev = step(p, 40, {std::numeric_limits<double>::infinity()});
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, AmpEventKind::RolledBack);
}

TEST(AutoAmpPolicy, NoLossFromTheLoopMeansNotEnabled) {
  AutoAmpPolicy p(small());
  std::optional<AmpEvent> ev;
  for (std::int64_t s = 0; s < 10; ++s) ev = step(p, s, {std::nullopt});
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, AmpEventKind::NotEnabled);
  EXPECT_NE(ev->detail.find("step.loss(loss)"), std::string::npos);
  EXPECT_EQ(amp_stage_name(p.stage()), "fp32");
  EXPECT_FALSE(p.amp_on());
}

TEST(AutoAmpPolicy, NonFiniteFp32LossRestartsTheWarmup) {
  AutoAmpPolicy p(small());
  for (std::int64_t s = 0; s < 5; ++s) step(p, s, {loss_at(s)});
  auto ev = step(p, 5, {std::numeric_limits<double>::infinity()});
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, AmpEventKind::WarmupRestarted);
  for (std::int64_t s = 6; s < 15; ++s) EXPECT_FALSE(step(p, s, {loss_at(s)})) << s;
  EXPECT_EQ(step(p, 15, {loss_at(15)})->kind, AmpEventKind::Enabled);
}

TEST(AutoAmpPolicy, RefuseKeepsItOff) {
  AutoAmpPolicy p(small());
  const AmpEvent ev = p.refuse(0, "fp16 needs a GradScaler");
  EXPECT_EQ(ev.kind, AmpEventKind::NotEnabled);
  for (std::int64_t s = 0; s < 20; ++s) EXPECT_FALSE(step(p, s, {loss_at(s)}));
  EXPECT_FALSE(p.amp_on());
}

}  // namespace
}  // namespace fathom
