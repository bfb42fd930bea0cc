// The data-parallel example as a real job: two ranks on loopback (127.0.0.1, a port free at run
// time), with Gloo. One rank is slowed and the job report must name it with the measured skew;
// one rank is killed and rank 0 must still write the job report, naming it missing, within the
// merge timeout. This driver links no torch: it launches train_ddp (FATHOM_TRAIN_DDP) and reads
// the JSON files the ranks write.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// A port on 127.0.0.1 that is free now: the kernel picks it, we let it go for rank 0's store.
int free_loopback_port() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
  socklen_t n = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(s);
  return ntohs(a.sin_port);
}

struct Rank {
  pid_t pid = -1;
  int status = -1;
  bool exited = false;
  double seconds = 0;
  fs::path log;
};

class Job {
 public:
  Job(const std::string& name, int world)
      : dir_(fs::temp_directory_path() /
             ("fathom-dist-" + name + "-" + std::to_string(::getpid()))),
        world_(world) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~Job() {
    for (Rank& r : ranks_)
      if (!r.exited && r.pid > 0) ::kill(r.pid, SIGKILL), ::waitpid(r.pid, nullptr, 0);
    if (!::testing::Test::HasFailure()) fs::remove_all(dir_);
  }

  // Starts every rank with the launcher's variables; flags go to train_ddp.
  void start(const std::vector<std::string>& flags, bool record_nvtx = false,
             const std::vector<std::string>& extra_env = {}) {
    const int port = free_loopback_port();
    ASSERT_GT(port, 0);
    started_ = Clock::now();
    for (int r = 0; r < world_; ++r) {
      std::vector<std::string> env;
      for (char** e = environ; *e; ++e) {
        const std::string kv = *e;
        if (kv.rfind("FATHOM_", 0) == 0 || kv.rfind("RANK=", 0) == 0 ||
            kv.rfind("WORLD_SIZE=", 0) == 0)
          continue;
        env.push_back(kv);
      }
      env.push_back("RANK=" + std::to_string(r));
      env.push_back("LOCAL_RANK=" + std::to_string(r));
      env.push_back("WORLD_SIZE=" + std::to_string(world_));
      env.push_back("MASTER_ADDR=127.0.0.1");
      env.push_back("MASTER_PORT=" + std::to_string(port));
      env.push_back("FATHOM_REPORT_DIR=" + (dir_ / "reports").string());
      env.push_back("FATHOM_PRINT=on");
      env.push_back("FATHOM_NVTX=phases");
      env.push_back("OMP_NUM_THREADS=1");  // two ranks on a small machine: no oversubscription
      env.insert(env.end(), extra_env.begin(), extra_env.end());
      if (record_nvtx) {
        env.push_back(std::string("NVTX_INJECTION64_PATH=") + FATHOM_NVTX_RECORDER);
        env.push_back("NVTX_RECORDER_OUT=" +
                      (dir_ / ("nvtx" + std::to_string(r) + ".tsv")).string());
      }
      std::vector<std::string> args{FATHOM_TRAIN_DDP, "--backend", "gloo"};
      args.insert(args.end(), flags.begin(), flags.end());
      Rank rank;
      rank.log = dir_ / ("rank" + std::to_string(r) + ".log");
      posix_spawn_file_actions_t actions;
      posix_spawn_file_actions_init(&actions);
      posix_spawn_file_actions_addopen(&actions, 1, rank.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                       0644);
      posix_spawn_file_actions_adddup2(&actions, 1, 2);
      std::vector<char*> argv, envp;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      for (auto& e : env) envp.push_back(e.data());
      envp.push_back(nullptr);
      ASSERT_EQ(posix_spawn(&rank.pid, argv[0], &actions, nullptr, argv.data(), envp.data()), 0)
          << argv[0];
      posix_spawn_file_actions_destroy(&actions);
      ranks_.push_back(rank);
    }
  }

  // Waits for every rank; one still running after `limit` is killed and the test fails.
  void wait(std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    for (Rank& r : ranks_) {
      while (!r.exited) {
        const pid_t got = ::waitpid(r.pid, &r.status, WNOHANG);
        if (got == r.pid) {
          r.exited = true;
          r.seconds = std::chrono::duration<double>(Clock::now() - started_).count();
          break;
        }
        if (Clock::now() > deadline) {
          ADD_FAILURE() << "rank with pid " << r.pid << " still running after " << limit.count()
                        << " s (hung)\n"
                        << logs();
          ::kill(r.pid, SIGKILL);
          ::waitpid(r.pid, &r.status, 0);
          r.exited = true;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }

  const Rank& rank(int r) const { return ranks_.at(static_cast<std::size_t>(r)); }
  fs::path dir() const { return dir_; }
  fs::path reports() const { return dir_ / "reports"; }

  std::string logs() const {
    std::string out;
    for (std::size_t r = 0; r < ranks_.size(); ++r)
      out += "--- rank " + std::to_string(r) + " log\n" + read(ranks_[r].log);
    return out;
  }

  static std::string read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  fs::path dir_;
  int world_;
  std::vector<Rank> ranks_;
  Clock::time_point started_;
};

const json* find_finding(const json& epoch, const std::string& id) {
  for (const json& f : epoch["findings"])
    if (f["id"] == id) return &f;
  return nullptr;
}

TEST(DistributedJob, NamesTheSlowedRankAsTheStraggler) {
  constexpr int kSlowMs = 40;
  Job job("straggler", 2);
  job.start({"--epochs", "2", "--steps", "12", "--batch", "32", "--slow-rank", "1", "--slow-ms",
             std::to_string(kSlowMs), "--merge-timeout-s", "30"},
            /*record_nvtx=*/true);
  job.wait(std::chrono::seconds(180));
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(WIFEXITED(job.rank(r).status) && WEXITSTATUS(job.rank(r).status) == 0)
        << "rank " << r << " failed\n"
        << job.logs();
  }
  // Every rank's report names its rank; rank 0 also wrote the job report.
  ASSERT_TRUE(fs::exists(job.reports() / "train_ddp.rank0.json")) << job.logs();
  ASSERT_TRUE(fs::exists(job.reports() / "train_ddp.rank1.json")) << job.logs();
  ASSERT_TRUE(fs::exists(job.reports() / "train_ddp.job.json")) << job.logs();
  const json report = json::parse(Job::read(job.reports() / "train_ddp.job.json"));
  EXPECT_EQ(report["schema"], "fathom.job_report");
  EXPECT_EQ(report["world_size"], 2);
  ASSERT_EQ(report["epochs"].size(), 2u);
  for (const json& epoch : report["epochs"]) {
    SCOPED_TRACE("epoch " + epoch["index"].dump());
    EXPECT_EQ(epoch["reported_ranks"], 2);
    EXPECT_TRUE(epoch["missing_ranks"].empty());
    EXPECT_EQ(epoch["work_measured_as"], "step_minus_communication_wait");
    EXPECT_EQ(epoch["work_statistic"], "median_per_step");
    EXPECT_EQ(epoch["slowest_rank"], 1);
    // The skew is what we slowed rank 1 by, measured: its sleep plus noise from a busy machine.
    const double skew = epoch["skew_ms"];
    EXPECT_GT(skew, 0.6 * kSlowMs) << Job::read(job.reports() / "train_ddp.job.json");
    EXPECT_LT(skew, 2.0 * kSlowMs) << Job::read(job.reports() / "train_ddp.job.json");
    const json* f = find_finding(epoch, "distributed.straggler");
    ASSERT_NE(f, nullptr) << epoch.dump(2);
    EXPECT_NE((*f)["title"].get<std::string>().find("Rank 1 is a straggler"), std::string::npos)
        << (*f)["title"];
    // Rank 0 waited for rank 1 inside the all-reduce: its communication wait holds the skew.
    const json& r0 = epoch["ranks"][0];
    const json& r1 = epoch["ranks"][1];
    EXPECT_EQ(r0["communication"]["source"], "host");
    EXPECT_GT(r0["communication"]["exposed_ms_per_step"].get<double>(),
              r1["communication"]["exposed_ms_per_step"].get<double>() + 0.5 * kSlowMs);
    EXPECT_GT(r0["communication"]["collectives"].get<int>(), 0);
    EXPECT_TRUE(r0["peak_rss_bytes"].is_number());
  }
  // NVTX labels name the rank, for Nsight Systems' multi-process view.
  const std::string nvtx1 = Job::read(job.dir() / "nvtx1.tsv");
  EXPECT_NE(nvtx1.find("epoch 1 [rank 1]"), std::string::npos);
  EXPECT_NE(nvtx1.find("step 11 [rank 1]"), std::string::npos);
  EXPECT_NE(Job::read(job.dir() / "nvtx0.tsv").find("step 0 [rank 0]"), std::string::npos);
}

TEST(DistributedJob, KilledRankIsNamedMissingWithinTheTimeout) {
  constexpr double kTimeoutS = 3.0;
  Job job("killed", 2);
  // The flag asks for 60 s; FATHOM_MERGE_TIMEOUT overrides it, as it would in a built binary.
  job.start({"--epochs", "3", "--steps", "8", "--batch", "16", "--kill-rank", "1", "--kill-at",
             "1:3", "--merge-timeout-s", "60"},
            /*record_nvtx=*/false, {"FATHOM_MERGE_TIMEOUT=" + std::to_string(kTimeoutS)});
  // Rank 0 must not hang: it notices the dead peer in its all-reduce, ends the epoch, waits at
  // most the merge timeout for rank 1's summary, writes the job report, and stops.
  job.wait(std::chrono::seconds(120));
  ASSERT_TRUE(WIFSIGNALED(job.rank(1).status) && WTERMSIG(job.rank(1).status) == SIGKILL)
      << job.logs();
  ASSERT_TRUE(WIFEXITED(job.rank(0).status)) << job.logs();
  ASSERT_TRUE(fs::exists(job.reports() / "train_ddp.job.json")) << job.logs();
  const json report = json::parse(Job::read(job.reports() / "train_ddp.job.json"));
  ASSERT_EQ(report["epochs"].size(), 2u) << report.dump(2);
  EXPECT_EQ(report["epochs"][0]["reported_ranks"], 2);  // before the kill, both ranks reported
  const json& epoch = report["epochs"][1];
  EXPECT_EQ(epoch["index"], 1);
  EXPECT_EQ(epoch["missing_ranks"], json::array({1}));
  EXPECT_EQ(epoch["reported_ranks"], 1);
  EXPECT_EQ(epoch["ranks"][0]["rank"], 0);
  EXPECT_TRUE(epoch["ranks"][0]["ended_by_exception"].get<bool>());
  const double waited = epoch["waited_ms"];
  EXPECT_GE(waited, 1000 * kTimeoutS - 50);
  EXPECT_LT(waited, 1000 * kTimeoutS + 2000);
  const json* f = find_finding(epoch, "distributed.missing_ranks");
  ASSERT_NE(f, nullptr) << epoch.dump(2);
  EXPECT_NE((*f)["title"].get<std::string>().find("rank 1"), std::string::npos) << (*f)["title"];
  // Only what can be judged with a rank missing: no verdict on communication.
  EXPECT_EQ(find_finding(epoch, "distributed.communication_exposed"), nullptr);
}

}  // namespace
