// The live report: a journal of one line per ended epoch, read back as the same report the
// document gives, with a last line a kill cut short left out.
#include <fathom/error.h>
#include <fathom/report_writers.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/warning_sink.h"
#include "formats/report_journal_file.h"
#include "sample_report.h"

namespace fathom {
namespace {

namespace fs = std::filesystem;

// The journal a session appends, epoch by epoch, for report r.
std::string journal_of(const RunReport& r) {
  std::string text = format_journal_header(r);
  for (const EpochSummary& e : r.epochs) text += format_journal_epoch(e, r.environment);
  return text;
}

RunReport three_epochs() {
  RunReport r = test::sample_report();
  for (int i = 1; i < 3; ++i) {
    r.epochs.push_back(r.epochs.front());
    r.epochs.back().index = i;
  }
  return r;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ReportJournal, ReadsBackAsTheDocumentWouldBe) {
  const RunReport r = three_epochs();
  const std::string text = journal_of(r);
  // One line per epoch after the header: each epoch written once, nothing rewritten.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 4);
  EXPECT_EQ(format_json_report(parse_report_journal(text, "run.jsonl")), format_json_report(r));
}

TEST(ReportJournal, TheLastEpochsEnvironmentWins) {
  RunReport r = three_epochs();
  std::string text = format_journal_header(r);  // the environment at the first epoch's end
  r.environment.device_name = "learned later";
  for (const EpochSummary& e : r.epochs) text += format_journal_epoch(e, r.environment);
  EXPECT_EQ(parse_report_journal(text, "run.jsonl").environment.device_name, "learned later");
}

TEST(ReportJournal, ALastLineAKillCutShortIsLeftOut) {
  const RunReport r = three_epochs();
  const std::string text = journal_of(r);
  // Every cut inside the last line: the first two epochs, whole.
  const std::size_t last = text.rfind('\n', text.size() - 2) + 1;
  for (std::size_t cut = last; cut < text.size(); cut += 97) {
    const RunReport back = parse_report_journal(text.substr(0, cut), "run.jsonl");
    ASSERT_EQ(back.epochs.size(), 2u) << "cut at " << cut;
    EXPECT_EQ(back.epochs[1].index, 1);
  }
  // The header alone: a run killed before its first epoch's line was whole.
  const std::string header = format_journal_header(r);
  EXPECT_TRUE(parse_report_journal(header, "run.jsonl").epochs.empty());
}

TEST(ReportJournal, ACorruptLineIsNamed) {
  std::string text = journal_of(three_epochs());
  const std::size_t second = text.find('\n') + 1;
  text[second] = '#';  // the line's opening brace
  try {
    parse_report_journal(text, "run.jsonl");
    FAIL() << "a corrupt line was read";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "fathom: run.jsonl line 2 is not a JSON object (corrupted?)");
  }
}

TEST(ReportJournal, AnotherFileIsNotTakenForAJournal) {
  const std::string document = format_json_report(three_epochs());
  EXPECT_THROW(parse_report_journal(document, "run.json"), Error);  // line 1 is "{"
  EXPECT_THROW(parse_report_journal("{\"schema\": \"fathom.report\"}\n", "x.jsonl"), Error);
  EXPECT_THROW(parse_report_journal("", "empty.jsonl"), Error);
  try {
    parse_report_journal("{\"schema\": \"fathom.activity\"}\n", "x.jsonl");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x.jsonl is not a fathom report journal"),
              std::string::npos)
        << e.what();
  }
}

class ReportFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fathom-journal-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const char* name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(ReportFilesTest, TheJournalGrowsByOneLineAnEpochAndTheEndWritesTheDocument) {
  const RunReport r = three_epochs();
  // An earlier run of the same name left its document: not this run's report once it began.
  std::ofstream(path("run.json")) << "old";
  std::ofstream(path("run.html")) << "old";
  detail::ReportJournalFile files(path("run.json"));
  const std::string header = format_journal_header(r);
  RunReport so_far = r;
  so_far.epochs.clear();
  for (const EpochSummary& e : r.epochs) {
    files.append(header, format_journal_epoch(e, r.environment));
    so_far.epochs.push_back(e);
    EXPECT_FALSE(fs::exists(path("run.json")));
    EXPECT_FALSE(fs::exists(path("run.html")));
    // What a reader finds after each epoch: the report so far, from the .json path too.
    EXPECT_EQ(format_json_report(read_report_file(path("run.json"))), format_json_report(so_far));
  }
  EXPECT_EQ(slurp(path("run.jsonl")), journal_of(r));
  files.finish(format_json_report(r), format_html_report(r));
  EXPECT_FALSE(fs::exists(path("run.jsonl")));
  EXPECT_EQ(slurp(path("run.json")), format_json_report(r));
  EXPECT_EQ(slurp(path("run.html")), format_html_report(r));
  EXPECT_EQ(format_json_report(read_report_file(path("run.json"))), format_json_report(r));
}

TEST_F(ReportFilesTest, APlantedLinkAtTheJournalsNameIsReplacedNotWrittenThrough) {
  std::ofstream(path("target")) << "keep";
  fs::create_symlink(path("target"), path("run.jsonl"));
  const RunReport r = three_epochs();
  detail::ReportJournalFile files(path("run.json"));
  files.append(format_journal_header(r), format_journal_epoch(r.epochs[0], r.environment));
  files.append(format_journal_header(r), format_journal_epoch(r.epochs[1], r.environment));
  EXPECT_EQ(slurp(path("target")), "keep");
  EXPECT_FALSE(fs::is_symlink(path("run.jsonl")));
  EXPECT_EQ(read_report_file(path("run.jsonl")).epochs.size(), 2u);
}

// Issue 25: after `rm -rf` of the report folder mid-run, later epochs went to the unlinked
// journal and the run's report was lost. The next append notices, says so, and writes the
// journal again with every epoch; the end writes the document into the folder made again.
TEST_F(ReportFilesTest, ARemovedFolderIsNoticedAtTheNextAppendAndMadeAgain) {
  const RunReport r = three_epochs();
  const std::string header = format_journal_header(r);
  std::vector<std::string> said;
  detail::WarningRedirect capture([&](std::string_view m) { said.emplace_back(m); });
  detail::ReportJournalFile files(path("reports/run.json"));
  fs::create_directories(dir_ / "reports");
  files.append(header, format_journal_epoch(r.epochs[0], r.environment));
  fs::remove_all(dir_ / "reports");
  files.append(header, format_journal_epoch(r.epochs[1], r.environment));
  ASSERT_TRUE(fs::exists(path("reports/run.jsonl")));
  EXPECT_EQ(read_report_file(path("reports/run.jsonl")).epochs.size(), 2u);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("reports/run.jsonl was removed"), std::string::npos) << said[0];
  // The journal alone removed: the same.
  fs::remove(path("reports/run.jsonl"));
  files.append(header, format_journal_epoch(r.epochs[2], r.environment));
  EXPECT_EQ(slurp(path("reports/run.jsonl")), journal_of(r));
  EXPECT_EQ(said.size(), 2u);
  fs::remove_all(dir_ / "reports");
  files.finish(format_json_report(r), format_html_report(r));
  EXPECT_EQ(slurp(path("reports/run.json")), format_json_report(r));
}

// Issue 25: the run-name lock went with the folder, so a run started after the next epoch took
// the name of the run still writing there. The append that makes the folder again makes the lock
// again too; a run that took the name while the folder was gone keeps it, and it is said.
TEST_F(ReportFilesTest, ARemovedFolderGetsItsRunNameLockBack) {
  const RunReport r = three_epochs();
  const std::string header = format_journal_header(r);
  const std::string folder = path("reports");
  fs::create_directories(folder);
  std::vector<std::string> said;
  detail::WarningRedirect capture([&](std::string_view m) { said.emplace_back(m); });
  detail::RunNameLock lock(folder, "run");
  ASSERT_TRUE(lock.held());
  detail::ReportJournalFile files(path("reports/run.json"), &lock);
  files.append(header, format_journal_epoch(r.epochs[0], r.environment));
  fs::remove_all(folder);
  files.append(header, format_journal_epoch(r.epochs[1], r.environment));
  EXPECT_TRUE(fs::exists(path("reports/.run.lock")));
  {
    detail::RunNameLock second(folder, "run");
    EXPECT_EQ(second.name(), "run-2") << "a second run took the live run's name";
  }
  // Gone again, and a second run takes the name before this one's next epoch: it keeps it.
  fs::remove_all(folder);
  fs::create_directories(folder);
  detail::RunNameLock second(folder, "run");
  ASSERT_EQ(second.name(), "run");
  said.clear();
  files.append(header, format_journal_epoch(r.epochs[2], r.environment));
  EXPECT_EQ(lock.reclaim(), detail::RunNameLock::Reclaim::Taken);
  ASSERT_FALSE(said.empty());
  EXPECT_NE(said[0].find("run name 'run' was taken by another run (pid "), std::string::npos)
      << said[0];
}

// Kills the process at its first call of any of syscalls (a seccomp filter): a kill at that
// exact point. False when this kernel or container allows no filter.
bool kill_at_first(const std::vector<long>& syscalls) {
  std::vector<sock_filter> code;
  code.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
  for (long nr : syscalls) {
    code.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(nr), 0, 1));
    code.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
  }
  code.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  sock_fprog program{static_cast<unsigned short>(code.size()), code.data()};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

// Issue 25: a kill between the journal's rename and the unlink of the earlier run's `run.json`
// left both, and `fathom report run.json` showed the earlier run. Whichever of the two steps a
// kill stops at, this run's journal never stands beside the earlier run's document.
TEST_F(ReportFilesTest, AKillDuringTheSwitchNeverLeavesTheNewJournalBesideTheOldDocument) {
  const RunReport r = three_epochs();
  const std::vector<std::pair<const char*, std::vector<long>>> kills = {{"unlink",
                                                                         {SYS_unlinkat,
#ifdef SYS_unlink
                                                                          SYS_unlink
#endif
                                                                         }},
                                                                        {"rename",
                                                                         {SYS_renameat2,
#ifdef SYS_rename
                                                                          SYS_rename,
#endif
#ifdef SYS_renameat
                                                                          SYS_renameat
#endif
                                                                         }}};
  for (const auto& [step, syscalls] : kills) {
    std::ofstream(path("run.json")) << "the earlier run";
    fs::remove(path("run.jsonl"));
    const pid_t child = ::fork();
    if (child == 0) {
      if (!kill_at_first(syscalls)) ::_exit(3);
      detail::ReportJournalFile files(path("run.json"));
      files.append(format_journal_header(r), format_journal_epoch(r.epochs[0], r.environment));
      ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3) GTEST_SKIP() << "no seccomp filter here";
    ASSERT_TRUE(WIFSIGNALED(status)) << "the kill at the first " << step << " did not happen";
    EXPECT_FALSE(fs::exists(path("run.jsonl")) && fs::exists(path("run.json")))
        << "killed at the " << step << ": a reader of run.json takes the earlier run for this one";
  }
}

TEST_F(ReportFilesTest, AMissingFolderIsAnErrorNamingTheJournal) {
  detail::ReportJournalFile files(path("gone/run.json"));
  const RunReport r = three_epochs();
  try {
    files.append(format_journal_header(r), format_journal_epoch(r.epochs[0], r.environment));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gone/run.jsonl"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_report_file(path("gone/run.json")), Error);
}

}  // namespace
}  // namespace fathom

namespace fathom {
namespace {

// Issue 24: the session's end reads its early epochs back from the journal, a block at a time,
// while it writes the document into the new file; the journal goes only once both are there.
TEST_F(ReportFilesTest, TheEndReadsTheJournalsLinesBackWhileItWritesTheDocuments) {
  const RunReport r = three_epochs();
  const std::string header = format_journal_header(r);
  detail::ReportJournalFile files(path("run.json"));
  for (const EpochSummary& e : r.epochs)
    files.append(header, format_journal_epoch(e, r.environment));
  EXPECT_EQ(files.epoch_lines(), 3u);
  std::vector<std::string> lines;
  files.for_each_epoch_line(2, [&](std::string_view l) { lines.emplace_back(l); });
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1] + "\n", format_journal_epoch(r.epochs[1], r.environment));
  EXPECT_THROW(files.for_each_epoch_line(4, [](std::string_view) {}), Error);
  files.finish(
      [&](TextSink& out) {
        files.for_each_epoch_line(3, [&](std::string_view l) { out.write(l.substr(0, 1)); });
        EXPECT_TRUE(fs::exists(path("run.jsonl")));
      },
      [&](TextSink& out) { out.write("page"); });
  EXPECT_EQ(slurp(path("run.json")), "{{{");
  EXPECT_EQ(slurp(path("run.html")), "page");
  EXPECT_FALSE(fs::exists(path("run.jsonl")));
}

// A writer that fails midway leaves no document and no temporary, and the journal with every
// epoch: nothing of the run is lost.
TEST_F(ReportFilesTest, AWriterThatThrowsLeavesTheJournalAndNoTemporary) {
  const RunReport r = three_epochs();
  detail::ReportJournalFile files(path("run.json"));
  files.append(format_journal_header(r), format_journal_epoch(r.epochs[0], r.environment));
  EXPECT_THROW(files.finish(
                   [](TextSink& out) {
                     out.write(std::string(100000, 'x'));
                     throw Error("the writer failed");
                   },
                   [](TextSink& out) { out.write("page"); }),
               Error);
  EXPECT_FALSE(fs::exists(path("run.json")));
  EXPECT_FALSE(fs::exists(path("run.html")));
  EXPECT_EQ(read_report_file(path("run.jsonl")).epochs.size(), 1u);
  int files_in_folder = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir_)) ++files_in_folder;
  EXPECT_EQ(files_in_folder, 1);  // the journal alone
}

// Lines longer than the reader's block, and many of them.
TEST_F(ReportFilesTest, LinesLongerThanAReadBlockComeBackWhole) {
  detail::ReportJournalFile files(path("run.json"));
  std::vector<std::string> written;
  for (int i = 0; i < 5; ++i) {
    written.push_back(std::string(static_cast<std::size_t>(700'000 + i * 300'001), 'a' + i));
    files.append("header\n", written.back() + "\n");
  }
  std::vector<std::string> read;
  files.for_each_epoch_line(5, [&](std::string_view l) { read.emplace_back(l); });
  EXPECT_TRUE(read == written);
}

}  // namespace
}  // namespace fathom
