// Links planted at every name fathom creates in a report folder leave their targets untouched
// (issue 17: a planted probe link emptied its target; a planted temporary link got the report
// written into another file). Each of these failed on the code before the fix but the
// FinalNameThatIsALink case, which rename() always handled: it is here so that every name is.
#include <fathom/error.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "records/activity_file.h"
#include "records/atomic_file.h"

namespace fathom {
namespace {

namespace sfs = std::filesystem;

class SafeFileCreation : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = sfs::temp_directory_path() / ("fathom-safe-files-" + std::to_string(::getpid()));
    sfs::remove_all(dir_);
    sfs::create_directories(dir_ / "reports");
    victim_ = dir_ / "victim.txt";
    std::ofstream(victim_) << "precious";
  }
  void TearDown() override { sfs::remove_all(dir_); }

  static std::string slurp(const sfs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  void plant(const sfs::path& at) const { sfs::create_symlink(victim_, at); }
  sfs::path reports() const { return dir_ / "reports"; }

  sfs::path dir_, victim_;
};

TEST_F(SafeFileCreation, ProbeNameThatIsALink) {
  plant(reports() / (".fathom-probe." + std::to_string(::getpid())));
  ensure_writable_folder(reports().string());
  EXPECT_EQ(slurp(victim_), "precious");
}

TEST_F(SafeFileCreation, TemporaryNameThatIsALink) {
  const sfs::path report = reports() / "run.json";
  const sfs::path tmp = reports() / ("run.json.tmp." + std::to_string(::getpid()));
  plant(tmp);
  write_file_atomically(report.string(), "{\"report\": 1}");
  EXPECT_EQ(slurp(victim_), "precious");
  EXPECT_FALSE(sfs::is_symlink(report));
  EXPECT_EQ(slurp(report), "{\"report\": 1}");
}

TEST_F(SafeFileCreation, FinalNameThatIsALink) {
  const sfs::path report = reports() / "run.html";
  plant(report);
  write_file_atomically(report.string(), "<html>");
  EXPECT_EQ(slurp(victim_), "precious");
  EXPECT_FALSE(sfs::is_symlink(report));
  EXPECT_EQ(slurp(report), "<html>");
}

TEST_F(SafeFileCreation, ActivityFileNameThatIsALinkIsRefused) {
  for (const char* name : {"run.jsonl", "run.jsonl.gz"}) {
    const sfs::path file = reports() / name;
    plant(file);
    try {
      ActivityFileWriter w(file.string());
      FAIL() << name << " was written through a link";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("symbolic link"), std::string::npos) << e.what();
    }
    EXPECT_EQ(slurp(victim_), "precious") << name;
  }
}

TEST_F(SafeFileCreation, ActivityFileNameThatIsAHardLinkIsRefused) {
  const sfs::path file = reports() / "run.jsonl";
  sfs::create_hard_link(victim_, file);
  EXPECT_THROW(ActivityFileWriter w(file.string()), Error);
  EXPECT_EQ(slurp(victim_), "precious");
}

pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

TEST_F(SafeFileCreation, StaleTemporariesOfDeadWritersAreRemoved) {
  const std::string dead = std::to_string(dead_pid());
  const std::string alive = std::to_string(::getppid());
  for (const std::string& name :
       {"run.json.tmp." + dead + ".0123456789abcdef", "run.html.tmp." + dead,
        ".fathom-probe." + dead, ".fathom-probe." + dead + ".fedcba9876543210"})
    std::ofstream(reports() / name) << "torn";
  const std::string kept_alive = "run.json.tmp." + alive + ".0123456789abcdef";
  const std::string kept_link = "other.json.tmp." + dead + ".0123456789abcdef";
  const std::string kept_other = "notes.tmp." + dead + ".mine";
  std::ofstream(reports() / kept_alive) << "being written";
  std::ofstream(reports() / kept_other) << "not fathom's";
  plant(reports() / kept_link);
  EXPECT_EQ(remove_stale_temporaries(reports().string()), 4);
  std::set<std::string> left;
  for (const auto& e : sfs::directory_iterator(reports())) left.insert(e.path().filename());
  EXPECT_EQ(left, (std::set<std::string>{kept_alive, kept_link, kept_other}));
  EXPECT_EQ(slurp(victim_), "precious");
}

}  // namespace
}  // namespace fathom
