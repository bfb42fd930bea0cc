// Configuration checked at session start, all of it (issue 17): each of these values was accepted
// silently before (the merge timeout was read only by a distributed run, the activity path only
// at the first GPU batch, run names from code not at all). Each test fails on the code before.
#include <fathom/error.h>
#include <fathom/memory_budget.h>
#include <fathom/options.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/file_system.h"
#include "base/run_name.h"
#include "base/warning_sink.h"
#include "scoped_env.h"

namespace fathom {
namespace {

using test::ScopedEnv;

std::string error_of(const Options& o) {
  try {
    (void)o.with_env();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

void expect_mentions(const std::string& msg, std::initializer_list<const char*> words) {
  for (const char* w : words) EXPECT_NE(msg.find(w), std::string::npos) << w << " in: " << msg;
}

TEST(StartChecks, MergeTimeoutIsCheckedEvenWithoutADistributedRun) {
  for (const char* bad : {"abc", "-1", "1e308", "", "nan"}) {
    ScopedEnv v("FATHOM_MERGE_TIMEOUT", bad);
    expect_mentions(error_of(Options()), {"FATHOM_MERGE_TIMEOUT", "(0, 86400]"});
  }
  ScopedEnv good("FATHOM_MERGE_TIMEOUT", "2.5");
  EXPECT_EQ(error_of(Options()), "no error");
}

TEST(StartChecks, ActivityFileNeedsAnExistingFolderAndItsExtension) {
  for (const char* bad : {"/nonexistent/dir/x.jsonl", "x.txt", "run.json"}) {
    ScopedEnv v("FATHOM_RECORD_ACTIVITY", bad);
    expect_mentions(error_of(Options()), {"FATHOM_RECORD_ACTIVITY", ".jsonl or .jsonl.gz"});
  }
  expect_mentions(error_of(Options().record_activity("/nonexistent/dir/x.jsonl.gz")),
                  {"Options::record_activity", "does not exist"});
  for (const std::string good : {std::string("x.jsonl"), fs::temp_directory() + "/x.jsonl.gz"}) {
    ScopedEnv v("FATHOM_RECORD_ACTIVITY", good.c_str());
    EXPECT_EQ(error_of(Options()), "no error") << good;
  }
}

TEST(StartChecks, BudgetsBelowASaneMinimumAreRejected) {
  for (const char* bad : {"1e-300", "1e-300%", "0.001", "0.5%", "1000", "512KiB"}) {
    ScopedEnv v("FATHOM_CHECKPOINT_BUDGET", bad);
    expect_mentions(error_of(Options()), {"FATHOM_CHECKPOINT_BUDGET", "smallest budget", "80%"});
  }
  for (const char* good : {"1%", "0.01", "1000000", "1MiB", "80%"}) {
    ScopedEnv v("FATHOM_CHECKPOINT_BUDGET", good);
    EXPECT_EQ(error_of(Options()), "no error") << good;
  }
  expect_mentions(error_of(Options().checkpoint_budget(MemoryBudget::fraction(1e-300))),
                  {"Options::checkpoint_budget", "0.01 to 1"});
}

TEST(StartChecks, RunNamesAreCheckedAlikeFromEveryEntryPoint) {
  const std::string too_long(detail::kMaxRunNameBytes + 1, 'r');
  for (const std::string bad :
       {std::string("."), std::string(".."), std::string("../escape"), std::string("a/b"),
        std::string("line\nbreak"), std::string("bell\x07"), too_long}) {
    {
      ScopedEnv v("FATHOM_RUN_NAME", bad.c_str());
      expect_mentions(error_of(Options()), {"FATHOM_RUN_NAME", "not a valid run name", "1 to 191"});
    }
    expect_mentions(error_of(Options().run_name(bad)),
                    {"Options::run_name", "not a valid run name", "1 to 191"});
  }
  const std::string longest(detail::kMaxRunNameBytes, 'r');
  EXPECT_EQ(error_of(Options().run_name(longest)), "no error");
  EXPECT_EQ(error_of(Options().run_name("cnn-2026.12.01 run #3")), "no error");
}

class RunNameLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory() + "/fathom_run_name_lock_" + std::to_string(::getpid());
    ASSERT_EQ(fs::make_directories(dir_), "");
  }
  void TearDown() override { fs::remove_tree(dir_); }
  std::string dir_;
};

TEST_F(RunNameLockTest, ASecondLiveRunWithTheSameNameTakesTheNextFreeOne) {
  {
    detail::RunNameLock first(dir_, "cnn");
    ASSERT_TRUE(first.held());
    EXPECT_EQ(first.name(), "cnn");
    detail::RunNameLock second(dir_, "cnn");
    EXPECT_EQ(second.name(), "cnn-2");
    EXPECT_EQ(second.holder_of_base(), ::getpid());
    detail::RunNameLock third(dir_, "cnn");
    EXPECT_EQ(third.name(), "cnn-3");
  }
  // Released with their runs, and their lock files gone.
  detail::RunNameLock again(dir_, "cnn");
  EXPECT_EQ(again.name(), "cnn");
  EXPECT_FALSE(fs::exists(dir_ + "/.cnn-2.lock"));
}

// Issue 25: past 100 taken names the 101st run shared `cnn`, the live first run's name.
TEST_F(RunNameLockTest, PastAHundredTakenNamesARunGetsAUniqueOne) {
  std::vector<std::unique_ptr<detail::RunNameLock>> held;
  std::set<std::string> names;
  for (int i = 0; i < 102; ++i) {
    held.push_back(std::make_unique<detail::RunNameLock>(dir_, "cnn"));
    ASSERT_TRUE(held.back()->held()) << i;
    EXPECT_TRUE(names.insert(held.back()->name()).second) << "shared: " << held.back()->name();
  }
  EXPECT_EQ(held[99]->name(), "cnn-100");
  EXPECT_EQ(held[100]->name().rfind("cnn-", 0), 0u) << held[100]->name();
  EXPECT_EQ(held[100]->name().size(), std::string("cnn-").size() + 8) << held[100]->name();
}

// Issue 25: a hard link planted at `.cnn.lock` had its other name (someone's file) emptied and
// overwritten with the pid. The name is refused instead, and the file is left as it was.
TEST_F(RunNameLockTest, AHardLinkAtTheLockNameIsNeverWritten) {
  const std::string victim = dir_ + "/victim.txt";
  { std::ofstream(victim) << "precious"; }
  ASSERT_EQ(::link(victim.c_str(), (dir_ + "/.cnn.lock").c_str()), 0);
  {
    detail::RunNameLock lock(dir_, "cnn");
    EXPECT_TRUE(lock.held());
    EXPECT_EQ(lock.name(), "cnn-2");
  }
  std::ifstream in(victim);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "precious");
  EXPECT_TRUE(fs::exists(dir_ + "/.cnn.lock")) << "the planted name is not fathom's to remove";
}

// A random source that repeats itself: its one name is taken after the first run that draws it,
// which a working source never comes to, but a hostile folder can plant.
std::uint32_t always_the_same_bits() noexcept { return 0x0badf00d; }

// Issue 25: when the random names were taken too, the run fell through to `cnn`, unlocked and
// silent, and wrote the live first run's journal and report. It takes a name nobody holds, and
// says why its name is not the one asked for.
TEST_F(RunNameLockTest, WhenEveryRandomNameIsTakenTooARunTakesAFreeOneAndSaysSo) {
  std::vector<std::unique_ptr<detail::RunNameLock>> held;
  std::set<std::string> names;
  for (int i = 0; i < 101; ++i) {
    held.push_back(std::make_unique<detail::RunNameLock>(dir_, "cnn", always_the_same_bits));
    ASSERT_TRUE(held.back()->held()) << i;
    names.insert(held.back()->name());
  }
  ASSERT_EQ(held[100]->name(), "cnn-0badf00d");
  std::vector<std::string> said;
  detail::WarningRedirect capture([&](std::string_view m) { said.emplace_back(m); });
  detail::RunNameLock late(dir_, "cnn", always_the_same_bits);
  EXPECT_TRUE(late.held());
  EXPECT_EQ(names.count(late.name()), 0u) << "shared a live run's name: " << late.name();
  EXPECT_EQ(late.name().rfind("cnn-", 0), 0u) << late.name();
  EXPECT_LE(late.name().size(), std::string("cnn-").size() + 8) << late.name();
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("run name 'cnn': it, cnn-2 to cnn-100 and 8 random names are held"),
            std::string::npos)
      << said[0];
  EXPECT_NE(said[0].find("this run takes '" + late.name() + "'"), std::string::npos) << said[0];
}

TEST_F(RunNameLockTest, AFolderWithoutLocksLeavesTheNameAsItIs) {
  detail::RunNameLock lock(dir_ + "/missing", "cnn");
  EXPECT_FALSE(lock.held());
  EXPECT_EQ(lock.name(), "cnn");
}

}  // namespace
}  // namespace fathom
