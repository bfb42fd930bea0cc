#include <fathom/amp_policy.h>
#include <gtest/gtest.h>

#include <limits>

namespace fathom {
namespace {

AutoAmpOptions small() {
  AutoAmpOptions o;
  o.warmup_steps = 10;
  o.watch_steps = 5;
  o.tolerance = 0.1;
  return o;
}

double loss_at(std::int64_t step) {
  return 2.0 - 0.01 * static_cast<double>(step) + (step % 2 ? 0.02 : -0.02);
}

// Runs the warm-up: steps 0..9 in fp32 with a falling loss and 10 ms steps.
void warm_up(AutoAmpPolicy& p) {
  for (std::int64_t s = 0; s < 10; ++s) {
    EXPECT_FALSE(p.amp_on()) << s;
    auto ev = p.observe({s, loss_at(s), false, false, 10.0});
    if (s < 9)
      EXPECT_FALSE(ev) << s;
    else {
      ASSERT_TRUE(ev);
      EXPECT_EQ(ev->kind, "enabled");
      EXPECT_EQ(ev->step, 9);
    }
  }
}

TEST(AutoAmpPolicy, EnablesAfterWarmupAndAcceptsWhenLossKeepsTheTrend) {
  AutoAmpPolicy p(small());
  EXPECT_EQ(amp_stage_name(p.stage()), "warming_up");
  warm_up(p);
  EXPECT_TRUE(p.amp_on());
  EXPECT_EQ(p.stage(), AmpStage::Watching);
  for (std::int64_t s = 10; s < 14; ++s)
    EXPECT_FALSE(p.observe({s, loss_at(s), false, false, 8.0}));
  auto ev = p.observe({14, loss_at(14), false, false, 8.0});
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, "accepted");
  EXPECT_EQ(p.stage(), AmpStage::Enabled);
  EXPECT_TRUE(p.amp_on());
  EXPECT_DOUBLE_EQ(*p.fp32_step_ms(), 10.0);
  EXPECT_DOUBLE_EQ(*p.amp_step_ms(), 8.0);
  EXPECT_NEAR(*p.fp32_loss_reference(), 1.934, 1e-9);  // mean of steps 5-9, above the line's 1.91
}

TEST(AutoAmpPolicy, NonFiniteLossRollsBackAtOnce) {
  AutoAmpPolicy p(small());
  warm_up(p);
  auto ev = p.observe({10, std::numeric_limits<double>::quiet_NaN(), false, false, 8.0});
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, "rolled_back");
  EXPECT_NE(ev->detail.find("nan"), std::string::npos) << ev->detail;
  EXPECT_FALSE(p.amp_on());
  EXPECT_EQ(amp_stage_name(p.stage()), "rolled_back");
  // Rolled back is for good.
  EXPECT_FALSE(p.observe({11, 1.0, false, false, 8.0}));
  EXPECT_FALSE(p.amp_on());
}

TEST(AutoAmpPolicy, DriftBeyondToleranceRollsBack) {
  AutoAmpPolicy p(small());
  warm_up(p);
  EXPECT_FALSE(p.observe({10, 1.9, false, false, 8.0}));
  std::optional<AmpEvent> ev;
  std::int64_t s = 11;
  for (; s < 15 && !ev; ++s) ev = p.observe({s, 3.0, false, false, 8.0});
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, "rolled_back");
  EXPECT_NE(ev->detail.find("drifted"), std::string::npos) << ev->detail;
  EXPECT_EQ(p.stage(), AmpStage::RolledBack);
}

TEST(AutoAmpPolicy, InfGradientsRollBackWithoutAScalerButNotWithOne) {
  AutoAmpPolicy scaled(small());
  warm_up(scaled);
  EXPECT_FALSE(
      scaled.observe({10, loss_at(10), /*nonfinite_gradients=*/true, /*grad_scaling=*/true, 8.0}));
  EXPECT_TRUE(scaled.amp_on());
  AutoAmpPolicy bf16(small());
  warm_up(bf16);
  auto ev = bf16.observe({10, loss_at(10), true, false, 8.0});
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, "rolled_back");
}

TEST(AutoAmpPolicy, SlowerStepsRollBackUnlessAllowed) {
  AutoAmpPolicy p(small());
  warm_up(p);
  std::optional<AmpEvent> ev;
  for (std::int64_t s = 10; s < 15; ++s) ev = p.observe({s, loss_at(s), false, false, 12.0});
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, "rolled_back");
  EXPECT_NE(ev->detail.find("slower"), std::string::npos) << ev->detail;

  AutoAmpOptions o = small();
  o.rollback_if_slower = false;
  AutoAmpPolicy q(o);
  warm_up(q);
  for (std::int64_t s = 10; s < 15; ++s) ev = q.observe({s, loss_at(s), false, false, 12.0});
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, "accepted");
}

TEST(AutoAmpPolicy, NonFiniteLossAfterAcceptanceStillRollsBack) {
  AutoAmpPolicy p(small());
  warm_up(p);
  for (std::int64_t s = 10; s < 15; ++s) p.observe({s, loss_at(s), false, false, 8.0});
  ASSERT_EQ(p.stage(), AmpStage::Enabled);
  auto ev = p.observe({40, std::numeric_limits<double>::infinity(), false, false, 8.0});
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, "rolled_back");
}

TEST(AutoAmpPolicy, NoLossFromTheLoopMeansNotEnabled) {
  AutoAmpPolicy p(small());
  std::optional<AmpEvent> ev;
  for (std::int64_t s = 0; s < 10; ++s) ev = p.observe({s, std::nullopt, false, false, 10.0});
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, "not_enabled");
  EXPECT_NE(ev->detail.find("step.loss(loss)"), std::string::npos);
  EXPECT_EQ(amp_stage_name(p.stage()), "fp32");
  EXPECT_FALSE(p.amp_on());
}

TEST(AutoAmpPolicy, NonFiniteFp32LossRestartsTheWarmup) {
  AutoAmpPolicy p(small());
  for (std::int64_t s = 0; s < 5; ++s) p.observe({s, loss_at(s), false, false, 10.0});
  auto ev = p.observe({5, std::numeric_limits<double>::infinity(), false, false, 10.0});
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->kind, "warmup_restarted");
  for (std::int64_t s = 6; s < 15; ++s)
    EXPECT_FALSE(p.observe({s, loss_at(s), false, false, 10.0})) << s;
  EXPECT_EQ(p.observe({15, loss_at(15), false, false, 10.0})->kind, "enabled");
}

TEST(AutoAmpPolicy, RefuseKeepsItOff) {
  AutoAmpPolicy p(small());
  const AmpEvent ev = p.refuse(0, "fp16 needs a GradScaler");
  EXPECT_EQ(ev.kind, "not_enabled");
  for (std::int64_t s = 0; s < 20; ++s)
    EXPECT_FALSE(p.observe({s, loss_at(s), false, false, 10.0}));
  EXPECT_FALSE(p.amp_on());
}

}  // namespace
}  // namespace fathom
