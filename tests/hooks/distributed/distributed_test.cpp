// The session side of distributed jobs in one process: rank from the environment, rank-named
// report files, the checks on what use_store is handed, and a one-rank job report. The two-rank
// jobs over Gloo are in tests/distributed.
#include <fathom/distributed.h>
#include <fathom/error.h>
#include <fathom/report.h>
#include <fathom/session.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "base/file_system.h"
#include "scoped_env.h"
#include "session_fixture.h"

namespace fathom::test {
namespace {

class DistributedSessionTest : public SessionTest {
 protected:
  Options options() const {
    return Options().report_dir(dir()).run_name("job").print_report(false);
  }
  static void one_epoch(Session& session) {
    auto e = session.epoch();
    for (int i = 0; i < 2; ++i) {
      auto s = e.step(4);
      auto f = s.forward();
    }
  }
};

TEST_F(DistributedSessionTest, BadRankVariableIsAClearError) {
  ScopedEnv rank("RANK", "first");
  ScopedEnv world("WORLD_SIZE", "2");
  try {
    Session session(options());
    FAIL() << "no error for RANK=first";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("RANK='first'"), std::string::npos) << e.what();
  }
}

TEST_F(DistributedSessionTest, RankFromTheEnvironmentNamesTheReportFile) {
  ScopedEnv rank("RANK", "1");
  ScopedEnv local("LOCAL_RANK", "1");
  ScopedEnv world("WORLD_SIZE", "2");
  Session session(options());
  EXPECT_EQ(session_rank(session), (RankInfo{1, 1, 2}));
  EXPECT_EQ(session.report_path(), dir() + "/job.rank1.json");
  one_epoch(session);
  session.flush_report();
  EXPECT_TRUE(fs::exists(dir() + "/job.rank1.jsonl"));  // the journal, while the session runs
  EXPECT_FALSE(fs::exists(dir() + "/job.jsonl"));
  // No process group was handed over: the rank says so instead of merging.
  bool noted = false;
  for (const Unmeasured& u : session.report().environment.not_measured)
    noted = noted || (u.what.find("job report") != std::string::npos &&
                      u.why.find("use_process_group") != std::string::npos);
  EXPECT_TRUE(noted);
}

TEST_F(DistributedSessionTest, UseStoreChecksWhatItIsHanded) {
  ScopedEnv rank("RANK", "1");
  ScopedEnv world("WORLD_SIZE", "2");
  Session session(options());
  auto store = c10::make_intrusive<c10d::HashStore>();
  EXPECT_THROW(use_store(session, {}, {1, 1, 2}), Error);
  EXPECT_THROW(use_store(session, store, {3, 0, 2}), Error);  // rank outside the world
  try {
    use_store(session, store, {0, 0, 2});  // RANK says 1
    FAIL() << "no error for a rank that disagrees with RANK";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("RANK / WORLD_SIZE say rank 1 of 2"), std::string::npos)
        << e.what();
  }
}

TEST_F(DistributedSessionTest, OneRankJobWritesAJobReport) {
  Session session(options());
  use_store(session, c10::make_intrusive<c10d::HashStore>(), {0, 0, 1});
  one_epoch(session);
  one_epoch(session);
  session.flush_report();
  ASSERT_TRUE(fs::exists(dir() + "/job.job.json"));
  EXPECT_TRUE(fs::exists(dir() + "/job.jsonl"));  // one rank: no rank in the name
}

TEST_F(DistributedSessionTest, RankCannotChangeAfterTheFirstEpoch) {
  Session session(options());
  one_epoch(session);
  EXPECT_THROW(use_store(session, c10::make_intrusive<c10d::HashStore>(), {1, 1, 2}), Error);
  EXPECT_EQ(session.report_path(), dir() + "/job.json");
}

TEST_F(DistributedSessionTest, OffSessionIgnoresTheStore) {
  Session session(options().mode(Mode::Off));
  use_store(session, c10::make_intrusive<c10d::HashStore>(), {1, 1, 2});
  EXPECT_EQ(session_rank(session), RankInfo{});
}

}  // namespace
}  // namespace fathom::test
