// The live report: a journal of one line per ended epoch, read back as the same report the
// document gives, with a last line a kill cut short left out.
#include <fathom/error.h>
#include <fathom/report_writers.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "records/report_journal_file.h"
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
