#include <fathom/error.h>
#include <fathom/options.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "scoped_env.h"

namespace fathom {
namespace {

using test::ScopedEnv;

TEST(Options, BuilderChainsAndKeepsValues) {
  Options o = Options()
                  .mode(Mode::Auto)
                  .report_dir("r")
                  .nvtx(NvtxLevel::Ops)
                  .record_shapes(true)
                  .cupti(false);
  EXPECT_EQ(o.mode(), Mode::Auto);
  EXPECT_EQ(o.report_dir(), "r");
  EXPECT_EQ(o.nvtx(), NvtxLevel::Ops);
  EXPECT_TRUE(o.record_shapes());
  EXPECT_FALSE(o.cupti());
}

TEST(Options, EnvironmentOverridesCode) {
  ScopedEnv mode("FATHOM_MODE", "observe");
  ScopedEnv dir("FATHOM_REPORT_DIR", "/tmp/elsewhere");
  ScopedEnv nvtx("FATHOM_NVTX", "phases");
  Options o = Options().mode(Mode::Auto).report_dir("r").with_env();
  EXPECT_EQ(o.mode(), Mode::Observe);
  EXPECT_EQ(o.report_dir(), "/tmp/elsewhere");
  EXPECT_EQ(o.nvtx(), NvtxLevel::Phases);
}

TEST(Options, BadValueNamesVariableAndAcceptedValues) {
  ScopedEnv mode("FATHOM_MODE", "fast");
  try {
    (void)Options().with_env();
    FAIL() << "expected fathom::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("FATHOM_MODE='fast'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("off|observe|suggest|auto"), std::string::npos) << msg;
  }
}

TEST(Options, FlopCountingIsOnUnlessTurnedOff) {
  EXPECT_TRUE(Options().count_flops());
  EXPECT_FALSE(Options().count_flops(false).count_flops());
  {
    ScopedEnv off("FATHOM_COUNT_FLOPS", "off");
    EXPECT_FALSE(Options().with_env().count_flops());
  }
  ScopedEnv on("FATHOM_COUNT_FLOPS", "on");
  EXPECT_TRUE(Options().count_flops(false).with_env().count_flops());
  ScopedEnv bad("FATHOM_COUNT_FLOPS", "sometimes");
  EXPECT_THROW((void)Options().with_env(), Error);
}

TEST(Options, TheAutogradHookIsOnUnlessTurnedOff) {
  EXPECT_TRUE(Options().autograd_hook());
  EXPECT_FALSE(Options().autograd_hook(false).autograd_hook());
  {
    ScopedEnv off("FATHOM_AUTOGRAD_HOOK", "off");
    EXPECT_FALSE(Options().with_env().autograd_hook());
  }
  ScopedEnv on("FATHOM_AUTOGRAD_HOOK", "on");
  EXPECT_TRUE(Options().autograd_hook(false).with_env().autograd_hook());
  ScopedEnv bad("FATHOM_AUTOGRAD_HOOK", "sometimes");
  EXPECT_THROW((void)Options().with_env(), Error);
}

TEST(Options, BadSwitchValue) {
  ScopedEnv cupti("FATHOM_CUPTI", "maybe");
  EXPECT_THROW((void)Options().with_env(), Error);
}

TEST(Options, MisspelledVariableIsAnErrorThatNamesTheRightOne) {
  for (const char* typo : {"FATHOM_MDOE", "FATHOM_REPORTDIR", "FATHOM_CUPIT", "FATHOM_PRNT"}) {
    ScopedEnv env(typo, "off");
    try {
      (void)Options().with_env();
      FAIL() << "expected fathom::Error for " << typo;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(typo), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("did you mean"), std::string::npos) << e.what();
    }
  }
}

TEST(Options, UnrelatedFathomVariableIsLeftAlone) {
  // Build scripts name their own FATHOM_* variables; a session must still start.
  ScopedEnv build("FATHOM_BUILD_DIR", "/tmp/build");
  ScopedEnv mode("FATHOM_MODE", "suggest");
  testing::internal::CaptureStderr();
  const Options o = Options().with_env();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(o.mode(), Mode::Suggest);
  EXPECT_NE(err.find("ignoring FATHOM_BUILD_DIR"), std::string::npos) << err;
}

TEST(Options, AnUnknownVariableIsSaidThroughTheWarningSink) {
  // Issue 25: the line went out through fprintf, past a session's Options::warnings handler (a
  // logger, a test) and the warning sink's escaping and rate limit.
  ScopedEnv unrelated("FATHOM_SWEEP_WORKER_INDEX", "7");
  std::vector<std::string> said;
  testing::internal::CaptureStderr();
  (void)Options().warnings([&](std::string_view m) { said.emplace_back(m); }).with_env();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "") << "printed past the handler";
  // Only the lines about this variable: the environment the suite runs in may hold other FATHOM_*
  // names fathom does not read (scripts/test's FATHOM_FUZZ_SECONDS), each said the same way.
  std::erase_if(said, [](const std::string& m) {
    return m.find("FATHOM_SWEEP_WORKER_INDEX") == std::string::npos;
  });
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0].rfind("ignoring FATHOM_SWEEP_WORKER_INDEX, not a variable fathom reads (", 0),
            0u)
      << said[0];
}

TEST(Options, RecordActivityFromTheEnvironment) {
  EXPECT_EQ(Options().record_activity(), "");
  {
    ScopedEnv file("FATHOM_RECORD_ACTIVITY", "/tmp/run.jsonl.gz");
    EXPECT_EQ(Options().with_env().record_activity(), "/tmp/run.jsonl.gz");
  }
  ScopedEnv empty("FATHOM_RECORD_ACTIVITY", "");
  EXPECT_THROW((void)Options().with_env(), Error);
}

TEST(Options, TraceFileAndProgressFromTheEnvironment) {
  EXPECT_EQ(Options().trace_file(), "");
  EXPECT_EQ(Options().progress(), Progress::Auto);
  {
    ScopedEnv file("FATHOM_TRACE", "/tmp/run.trace.json.gz");
    ScopedEnv progress("FATHOM_PROGRESS", "off");
    const Options o = Options().with_env();
    EXPECT_EQ(o.trace_file(), "/tmp/run.trace.json.gz");
    EXPECT_EQ(o.progress(), Progress::Off);
  }
  {
    // Not a trace's name: the error says what is accepted.
    ScopedEnv file("FATHOM_TRACE", "/tmp/run.jsonl");
    try {
      (void)Options().with_env();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("ending in .json or .json.gz"), std::string::npos)
          << e.what();
    }
  }
  {
    ScopedEnv file("FATHOM_TRACE", "/no/such/folder/run.json");
    EXPECT_THROW((void)Options().trace_file("x.json").with_env(), Error);
  }
  EXPECT_THROW((void)Options().trace_file("/no/such/folder/run.json").with_env(), Error);
  ScopedEnv progress("FATHOM_PROGRESS", "sometimes");
  EXPECT_THROW((void)Options().with_env(), Error);
}

TEST(Options, EmptyReportDirIsAnError) {
  ScopedEnv dir("FATHOM_REPORT_DIR", "");
  EXPECT_THROW((void)Options().with_env(), Error);
}

TEST(Options, NamesRoundTrip) {
  EXPECT_EQ(mode_name(Mode::Suggest), "suggest");
  EXPECT_EQ(nvtx_level_name(NvtxLevel::Modules), "modules");
}

// Issue 25: a bad value is echoed in the error, but cut and escaped, as FATHOM_RUN_NAME's always
// was: an escape sequence in it must not reach the terminal, and a 100 KB value must not make a
// 100 KB message.
std::string hostile_value(std::string_view tail = "") {
  return "\x1b]0;owned\x07\n\t" + std::string(100'000, 'x') + std::string(tail);
}

std::string error_of_variable(const char* name, const std::string& value) {
  ScopedEnv env(name, value.c_str());
  try {
    (void)Options().with_env();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_escaped_and_cut(const std::string& msg, std::string_view name, std::size_t limit) {
  EXPECT_NE(msg.find(name), std::string::npos) << msg;
  EXPECT_NE(msg.find("\\x1b]0;owned\\x07\\n\\t"), std::string::npos) << msg.substr(0, 200);
  EXPECT_LT(msg.size(), limit) << name;
  for (char c : msg)
    ASSERT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7F)
        << name << ": a raw control character in " << msg.substr(0, 200);
}

TEST(Options, EveryEchoedValueIsEscapedAndCut) {
  for (const char* name :
       {"FATHOM_MODE", "FATHOM_NVTX", "FATHOM_CUPTI", "FATHOM_PRINT", "FATHOM_PROGRESS",
        "FATHOM_RECORD_SHAPES", "FATHOM_AUTOGRAD_HOOK", "FATHOM_COUNT_FLOPS",
        "FATHOM_CHECKPOINT_BUDGET", "FATHOM_MERGE_TIMEOUT", "FATHOM_RUN_NAME"})
    expect_escaped_and_cut(error_of_variable(name, hostile_value()), name, 1000);
  // A memory budget's unit is echoed on its own.
  expect_escaped_and_cut(error_of_variable("FATHOM_CHECKPOINT_BUDGET", "12" + hostile_value()),
                         "unknown unit", 1000);
}

TEST(Options, PathsInErrorsAreEscaped) {
  // Paths are cut only past PATH_MAX: real ones are longer than a value's 64 bytes.
  for (const char* name : {"FATHOM_TRACE", "FATHOM_RECORD_ACTIVITY"})
    expect_escaped_and_cut(error_of_variable(name, hostile_value()), name, 5000);
  expect_escaped_and_cut(
      error_of_variable("FATHOM_TRACE", "/nonexistent/" + hostile_value(".json")), "does not exist",
      10000);
}

TEST(Options, AnUnknownVariableNameIsEscaped) {
  // A name one edit from FATHOM_MODE, with an escape sequence in it.
  const std::string name = "FATHOM_MOD\x1b";
  ScopedEnv env(name.c_str(), "off");
  try {
    (void)Options().with_env();
    FAIL() << "expected fathom::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("FATHOM_MOD\\x1b"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\x1b'), std::string::npos) << msg;
  }
}

TEST(Options, APathWithANulIsRefused) {
  // Python's str and std::string hold NUL; the system's C strings would end at it and make a
  // folder nobody named.
  const std::string nul("reports\0elsewhere", 17);
  for (Options o : {Options().report_dir(nul), Options().trace_file(nul + ".json"),
                    Options().record_activity(nul + ".jsonl")}) {
    try {
      (void)o.with_env();
      FAIL() << "expected fathom::Error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("NUL"), std::string::npos) << msg;
      EXPECT_NE(msg.find("reports\\x00elsewhere"), std::string::npos) << msg;
    }
  }
}

}  // namespace
}  // namespace fathom
