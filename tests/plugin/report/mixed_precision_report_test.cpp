#include <fathom/error.h>
#include <fathom/report_writers.h>
#include <gtest/gtest.h>

#include "sample_report.h"

namespace fathom {
namespace {

MixedPrecisionSummary sample_amp() {
  MixedPrecisionSummary m;
  m.policy = "auto";
  m.state = "rolled_back";
  m.dtype = "fp16";
  m.device_type = "cuda";
  m.grad_scaling = true;
  m.steps_low_precision = 30;
  m.steps_fp32 = 10;
  m.phases = {{Phase::Forward, 30, 10}, {Phase::Backward, 30, 10}, {Phase::Optimizer, 0, 40}};
  m.skipped_steps = 2;
  m.scale = 32768;
  m.scale_changes = 1;
  m.scale_history = {{10, 65536}, {13, 32768}};
  m.fp32_step_ms = 12.5;
  m.amp_step_ms = 7.25;
  m.fp32_loss_reference = 1.5;
  m.amp_loss = 2.75;
  m.events = {{9, AmpEventKind::Enabled, "after 10 fp32 steps"},
              {39, AmpEventKind::RolledBack, "the loss drifted"}};
  return m;
}

TEST(MixedPrecisionReport, JsonRoundTripsEveryField) {
  RunReport r = test::sample_report();
  r.epochs[0].mixed_precision = sample_amp();
  const std::string text = format_json_report(r);
  EXPECT_NE(text.find("\"mixed_precision\": {"), std::string::npos);
  RunReport back = parse_json_report(text, "mem");
  EXPECT_EQ(format_json_report(back), text);
  ASSERT_TRUE(back.epochs[0].mixed_precision);
  const MixedPrecisionSummary& m = *back.epochs[0].mixed_precision;
  EXPECT_EQ(m.state, "rolled_back");
  EXPECT_EQ(m.phases.at(2).phase, Phase::Optimizer);
  EXPECT_EQ(m.phases.at(2).fp32, 40);
  EXPECT_EQ(m.scale_history.at(1).scale, 32768);
  EXPECT_EQ(m.events.at(1).detail, "the loss drifted");
  EXPECT_EQ(*m.amp_step_ms, 7.25);
}

TEST(MixedPrecisionReport, AbsentSectionIsNullAndReadsBackAbsent) {
  RunReport r = test::sample_report();
  const std::string text = format_json_report(r);
  EXPECT_NE(text.find("\"mixed_precision\": null"), std::string::npos);
  EXPECT_FALSE(parse_json_report(text, "mem").epochs[0].mixed_precision);
}

TEST(MixedPrecisionReport, UnknownPhaseIsAClearError) {
  RunReport r = test::sample_report();
  r.epochs[0].mixed_precision = sample_amp();
  std::string text = format_json_report(r);
  const auto at = text.find("\"phase\": \"optimizer\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 21, "\"phase\": \"optimiser\"");
  EXPECT_THROW((void)parse_json_report(text, "mem"), Error);
}

TEST(MixedPrecisionReport, TerminalShowsPrecisionSkipsScaleAndEvents) {
  RunReport r = test::sample_report();
  r.epochs[0].mixed_precision = sample_amp();
  const std::string text = format_terminal_report(r);
  for (const char* s :
       {"mixed precision (auto: rolled_back, fp16 autocast on cuda, GradScaler)",
        "forward    fp16 in 30 of 40, fp32 in 10", "optimizer  fp32 (fp32 master weights)",
        "30 in fp16, 10 in fp32; 2 skipped on inf/NaN gradients",
        "scale      32768 now; 1 change: 65536 @10, 32768 @13",
        "loss 2.75 mixed vs 1.5 fp32 trend; step 7.25 ms mixed vs 12.50 ms fp32",
        "step 39    rolled_back: the loss drifted"}) {
    EXPECT_NE(text.find(s), std::string::npos) << s << "\n" << text;
  }
  EXPECT_EQ(text.find("shown)"), std::string::npos);
  // A history cut to its bound says so.
  r.epochs[0].mixed_precision->scale_changes = 100;
  EXPECT_NE(format_terminal_report(r).find("(the first and the latest 1 shown)"),
            std::string::npos);
  r.epochs[0].mixed_precision.reset();
  EXPECT_EQ(format_terminal_report(r).find("mixed precision ("), std::string::npos);
}

TEST(MixedPrecisionReport, AnFp32EpochIsOneLine) {
  RunReport r = test::sample_report();
  MixedPrecisionSummary m;
  m.policy = "suggest";
  m.state = "fp32";
  m.steps_fp32 = 10;
  m.phases = {{Phase::Forward, 0, 10}, {Phase::Backward, 0, 10}, {Phase::Optimizer, 0, 10}};
  r.epochs[0].mixed_precision = m;
  const std::string text = format_terminal_report(r);
  EXPECT_NE(text.find("\nmixed precision: fp32 throughout (suggest)\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("forward    fp32"), std::string::npos);
}

}  // namespace
}  // namespace fathom
