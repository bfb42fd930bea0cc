// What a session prints (issue 16): a few lines per epoch on standard error by default, findings
// already said once as "still true", the full report at the end of the run, FATHOM_PRINT=full for
// the full report every epoch, and a chosen sink instead of standard error. Module type names
// keep their template arguments whole.
#include <fathom/fathom.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "framework/module_type_name.h"
#include "scoped_env.h"
#include "session_fixture.h"

namespace fathom {
namespace {

using test::ScopedEnv;
using test::SessionTest;

// One epoch whose steps leave most of their time outside any phase scope: a finding every epoch.
void train(Session& session, torch::nn::Sequential& model, int steps) {
  auto e = session.epoch();
  for (int i = 0; i < steps; ++i) {
    auto step = e.step(4);
    torch::Tensor y;
    {
      auto f = step.forward();
      y = model->forward(torch::randn({4, 8}));
    }
    auto z = torch::randn({256, 256}).matmul(torch::randn({256, 256}));  // outside the scopes
    (void)z;
  }
}

std::size_t lines(const std::string& s) { return std::count(s.begin(), s.end(), '\n'); }

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST_F(SessionTest, DefaultPrintsAShortSummaryOnStderrAndTheFullReportAtTheEnd) {
  ScopedEnv unset("FATHOM_PRINT", nullptr);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  std::string after_epoch_1;
  {
    Session session(
        Options().report_dir(dir()).run_name("quiet").warnings([](std::string_view) {}));
    auto model = tiny_model();
    train(session, model, 6);
    train(session, model, 6);
    ASSERT_FALSE(session.report().epochs.at(1).findings.empty());
  }
  const std::string out = ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  // Nothing on the program's own stream.
  EXPECT_EQ(out, "");
  // Two summaries and one full report, at the end.
  EXPECT_EQ(count(err, "fathom | quiet | epoch 0 |"), 1u) << err;
  EXPECT_EQ(count(err, "fathom | quiet | epoch 1 |"), 1u) << err;
  EXPECT_EQ(count(err, "fathom report | quiet | epoch 1"), 1u) << err;
  EXPECT_EQ(count(err, "fathom report | quiet | epoch 0"), 0u) << err;
  const std::size_t full_at = err.find("fathom report | quiet");
  const std::string summaries = err.substr(0, full_at);
  EXPECT_LT(lines(summaries), 16u) << summaries;
  EXPECT_EQ(summaries.find("fix:"), std::string::npos) << summaries;
  // The same finding in epoch 1 is one "still true" line, not its fix again.
  const std::string second = summaries.substr(summaries.find("epoch 1 |"));
  EXPECT_NE(second.find("still true: Part of each step runs outside any phase scope"),
            std::string::npos)
      << second;
  // While the run goes the report is its journal; the whole run's files come at the end.
  EXPECT_NE(summaries.find(dir() + "/quiet.jsonl"), std::string::npos) << summaries;
  EXPECT_NE(err.substr(full_at).find("report: " + dir() + "/quiet.json (for tools), " + dir() +
                                     "/quiet.html (for people)"),
            std::string::npos)
      << err.substr(full_at);
  // The full report ends with where it is.
  EXPECT_NE(err.substr(full_at).find("fix:"), std::string::npos);
}

TEST_F(SessionTest, PrintFullPrintsTheWholeReportEveryEpoch) {
  ScopedEnv full("FATHOM_PRINT", "full");
  std::string printed;
  {
    Session session(Options().report_dir(dir()).run_name("loud").print_to(
        [&](std::string_view text) { printed += text; }));
    auto model = tiny_model();
    train(session, model, 3);
    train(session, model, 3);
  }
  EXPECT_EQ(count(printed, "fathom report | loud | epoch 0"), 1u) << printed;
  EXPECT_EQ(count(printed, "fathom report | loud | epoch 1"), 1u) << printed;
  EXPECT_EQ(count(printed, "step time by phase"), 2u);
}

TEST_F(SessionTest, PrintOffPrintsNothing) {
  ScopedEnv off("FATHOM_PRINT", "off");
  std::string printed;
  {
    Session session(Options().report_dir(dir()).run_name("mute").print_to(
        [&](std::string_view text) { printed += text; }));
    auto model = tiny_model();
    train(session, model, 2);
  }
  EXPECT_EQ(printed, "");
}

TEST_F(SessionTest, BadPrintValueNamesTheAcceptedOnes) {
  ScopedEnv bad("FATHOM_PRINT", "loud");
  try {
    Session session(Options().report_dir(dir()));
    FAIL() << "FATHOM_PRINT=loud was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("summary|full|off"), std::string::npos) << e.what();
  }
}

TEST(ModuleTypeName, KeepsTemplateArgumentsWhole) {
  using detail::short_type_name;
  EXPECT_EQ(short_type_name("torch::nn::Conv2dImpl"), "Conv2d");
  EXPECT_EQ(short_type_name("Net"), "Net");
  EXPECT_EQ(short_type_name("demo::BlockImpl<demo::ResidualBlock>"), "Block<ResidualBlock>");
  EXPECT_EQ(short_type_name("demo::StackImpl<torch::nn::Conv2dImpl, 3>"), "Stack<Conv2d, 3>");
  EXPECT_EQ(short_type_name("(anonymous namespace)::TinyImpl"), "Tiny");
  EXPECT_EQ(short_type_name("demo::(anonymous namespace)::TinyImpl"), "Tiny");
}

}  // namespace
}  // namespace fathom
