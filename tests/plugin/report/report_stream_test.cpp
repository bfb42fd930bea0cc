// The whole-run writers a piece at a time (report/report_stream.h): the session's end takes its
// early epochs back from the journal's lines and the rest from memory, and writes the same bytes
// as the one-string writers over the whole run in memory.
#include "report/report_stream.h"

#include <fathom/error.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/atomic_file.h"
#include "golden_reports.h"

namespace fathom {
namespace {

// A recorded run made long: its epochs again and again, each with its own index.
RunReport long_run(const std::string& name, int epochs) {
  RunReport r = test::golden_report(name + ".report.json");
  const std::vector<EpochSummary> recorded = r.epochs;
  r.epochs.clear();
  for (int i = 0; i < epochs; ++i) {
    r.epochs.push_back(recorded[static_cast<std::size_t>(i) % recorded.size()]);
    r.epochs.back().index = i;
  }
  return r;
}

// The first `from_journal` epochs come from their journal lines, as at a session's end.
detail::EachEpoch journal_then_memory(const RunReport& r, std::size_t from_journal,
                                      const std::vector<std::string>& lines) {
  return [&r, from_journal, &lines](const std::function<void(const EpochSummary&)>& each) {
    for (std::size_t i = 0; i < from_journal; ++i)
      each(detail::parse_journal_epoch(lines[i], "test journal"));
    for (std::size_t i = from_journal; i < r.epochs.size(); ++i) each(r.epochs[i]);
  };
}

// A sink that counts its pieces: the writers hand over the run an epoch at a time.
class PieceSink final : public TextSink {
 public:
  void write(std::string_view text) override {
    text_ += text;
    ++pieces_;
  }
  std::string text_;
  int pieces_ = 0;
};

TEST(ReportStream, EpochsReadBackFromTheJournalWriteTheSameBytesAsTheRunInMemory) {
  for (const char* name : {"cpu_cnn_batch16", "cpu_cnn_batch64", "synthetic_h100"}) {
    SCOPED_TRACE(name);
    const RunReport r = long_run(name, 7);
    std::vector<std::string> lines;
    for (const EpochSummary& e : r.epochs) {
      std::string line = format_journal_epoch(e, r.environment);
      line.pop_back();  // the reader hands each line over without its newline
      lines.push_back(std::move(line));
    }
    for (std::size_t from_journal : {std::size_t{0}, std::size_t{3}, std::size_t{7}}) {
      PieceSink json, html;
      detail::write_json_report(r, journal_then_memory(r, from_journal, lines), json);
      detail::write_html_report(r, journal_then_memory(r, from_journal, lines), html);
      EXPECT_TRUE(json.text_ == format_json_report(r)) << from_journal;
      EXPECT_TRUE(html.text_ == format_html_report(r)) << from_journal;
      // The page's overview gathered during the JSON's visit, as a session's end does.
      detail::HtmlOverview overview;
      PieceSink json2, html2;
      const detail::EachEpoch epochs = journal_then_memory(r, from_journal, lines);
      detail::write_json_report(
          r,
          [&](const std::function<void(const EpochSummary&)>& each) {
            epochs([&](const EpochSummary& e) {
              overview.add(e);
              each(e);
            });
          },
          json2);
      detail::write_html_report(r, epochs, html2, &overview);
      EXPECT_TRUE(json2.text_ == json.text_);
      EXPECT_TRUE(html2.text_ == html.text_);
      EXPECT_GT(json.pieces_, 7);
      EXPECT_GT(html.pieces_, 7);
    }
  }
}

TEST(ReportStream, AnEmptyRunIsTheSameDocument) {
  RunReport r = test::golden_report("cpu_cnn_batch16.report.json");
  r.epochs.clear();
  const detail::EachEpoch none = [](const std::function<void(const EpochSummary&)>&) {};
  std::string json, html;
  StringSink json_sink(json), html_sink(html);
  detail::write_json_report(r, none, json_sink);
  detail::write_html_report(r, none, html_sink);
  EXPECT_EQ(json, format_json_report(r));
  EXPECT_EQ(html, format_html_report(r));
  EXPECT_NE(json.find("\"epochs\": []"), std::string::npos);
}

TEST(ReportStream, ALineThatIsNotAJournalEpochIsAnErrorNamingTheJournal) {
  try {
    (void)detail::parse_journal_epoch("{\"schema\": \"fathom.report.journal\"}", "run.jsonl");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("run.jsonl"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fathom
