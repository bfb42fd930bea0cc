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

#include "base/atomic_file.h"
#include "formats/activity_file.h"

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

// The name a fathom process makes for a temporary with prefix, by a child that then dies: a
// temporary that a killed run of this host left.
std::string name_a_dead_writer_left(const std::string& prefix) {
  int pipe_fds[2];
  EXPECT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    std::string name;
    const int fd = detail::create_new_file(prefix, name);
    if (fd >= 0) (void)!::write(pipe_fds[1], name.data(), name.size());
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  char text[512] = {};
  const ssize_t n = ::read(pipe_fds[0], text, sizeof text);
  ::close(pipe_fds[0]);
  ::waitpid(child, nullptr, 0);
  const std::string path(text, n > 0 ? static_cast<std::size_t>(n) : 0);
  return path.substr(path.rfind('/') + 1);
}

TEST_F(SafeFileCreation, StaleTemporariesOfDeadWritersAreRemoved) {
  const std::string dir = reports().string() + "/";
  const std::set<std::string> removed = {name_a_dead_writer_left(dir + "run.json.tmp."),
                                         name_a_dead_writer_left(dir + "run.jsonl.tmp."),
                                         name_a_dead_writer_left(dir + ".fathom-probe.")};
  std::string tag, alive;
  {
    const int fd = detail::create_new_file(dir + "run.html.tmp.", alive);  // this process's
    ASSERT_GE(fd, 0);
    ::close(fd);
    alive = alive.substr(alive.rfind('/') + 1);
    tag = detail::host_tag();
  }
  const std::string dead = std::to_string(dead_pid());
  const std::string other_tag = tag == "0123abcd" ? "fedc3210" : "0123abcd";
  // Issue 25: the pid in a name another host or container gave means nothing here (removed
  // before: another host's live temporary on a shared NFS folder), and neither does one in a
  // file that merely looks like a temporary (removed before: backup.tmp.<pid>).
  const std::set<std::string> kept = {
      alive,
      "run.json.tmp." + other_tag + "." + dead + ".0123456789abcdef",  // another host's
      "run.json.tmp." + dead + ".0123456789abcdef",                    // no host: not provable
      ".fathom-probe." + dead,
      "backup.tmp." + dead,
      "notes.tmp." + tag + "." + dead + ".0123456789abcdef",  // not a report's name
      "notes.tmp." + dead + ".mine"};
  for (const std::string& name : kept)
    if (name != alive) std::ofstream(reports() / name) << "not fathom's to remove";
  const std::string link = "other.json.tmp." + tag + "." + dead + ".0123456789abcdef";
  plant(reports() / link);
  for (const std::string& name : removed) ASSERT_TRUE(sfs::exists(reports() / name)) << name;

  EXPECT_EQ(remove_stale_temporaries(reports().string()), 3);
  std::set<std::string> left;
  for (const auto& e : sfs::directory_iterator(reports())) left.insert(e.path().filename());
  std::set<std::string> wanted = kept;
  wanted.insert(link);
  EXPECT_EQ(left, wanted);
  EXPECT_EQ(slurp(victim_), "precious");
}

}  // namespace
}  // namespace fathom
