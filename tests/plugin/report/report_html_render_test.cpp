// Opens the HTML report in headless Chromium (Debian's `chromium`) and checks that its script ran
// to the end without an error: the page marks <html data-fathom-rendered="N"> with the number of
// charts, and Chromium's console log has no uncaught exception. Skipped, with the reason, where
// Chromium is not installed (scripts/lib.sh installs it).
#include <fathom/report_writers.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "advise/advisor.h"
#include "base/atomic_file.h"
#include "golden_reports.h"
#include "gpu_summary_fixture.h"

namespace fathom {
namespace {

namespace fs = std::filesystem;

std::string find_chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    const std::string cmd = std::string("command -v ") + name + " 2>/dev/null";
    std::array<char, 512> buf{};
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) continue;
    std::string out;
    while (fgets(buf.data(), buf.size(), p)) out += buf.data();
    pclose(p);
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    if (!out.empty()) return out;
  }
  return {};
}

struct Rendered {
  std::string dom;
  std::string log;
  int status = -1;
};

Rendered render(const std::string& chromium, const RunReport& r, const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("fathom_html_" + std::to_string(::getpid()) + "_" + name);
  fs::create_directories(dir);
  const fs::path page = dir / "report.html";
  write_file_atomically(page.string(), format_html_report(r));
  const fs::path dom = dir / "dom.html";
  const fs::path log = dir / "chromium.log";
  const std::string cmd =
      "timeout 120 '" + chromium +
      "' --headless --no-sandbox --disable-gpu --no-first-run --disable-dev-shm-usage "
      "--user-data-dir='" +
      (dir / "profile").string() + "' --enable-logging=stderr --v=0 --dump-dom 'file://" +
      page.string() + "' > '" + dom.string() + "' 2> '" + log.string() + "'";
  Rendered out;
  out.status = std::system(cmd.c_str());
  out.dom = test::read_text(dom.string());
  out.log = test::read_text(log.string());
  std::error_code ec;
  fs::remove_all(dir, ec);
  return out;
}

class ReportHtmlRender : public ::testing::Test {
 protected:
  void SetUp() override {
    chromium_ = find_chromium();
    if (chromium_.empty()) GTEST_SKIP() << "chromium is not installed (apt-get install chromium)";
  }
  std::string chromium_;
};

TEST_F(ReportHtmlRender, SyntheticGpuRunRendersWithoutScriptErrors) {
  RunReport r = test::golden_report("synthetic_h100.report.json");
  r.epochs.back().gpu = test::gpu_summary_fixture();
  for (EpochSummary& e : r.epochs) e.findings = advise(e, r.environment);
  const Rendered out = render(chromium_, r, "gpu");
  ASSERT_EQ(out.status, 0) << out.log;
  EXPECT_NE(out.dom.find("data-fathom-rendered=\"7\""), std::string::npos)
      << out.dom.substr(0, 400) << out.log;
  EXPECT_EQ(out.log.find("Uncaught"), std::string::npos) << out.log;
  EXPECT_EQ(out.log.find(":CONSOLE"), std::string::npos) << out.log;
  // The tabs script showed the last epoch and hid the first.
  EXPECT_NE(out.dom.find("data-epoch-panel=\"0\" hidden"), std::string::npos);
  EXPECT_NE(out.dom.find("data-epoch-tab=\"1\" aria-selected=\"true\""), std::string::npos);
}

TEST_F(ReportHtmlRender, CpuRunAndHostileNamesRenderWithoutScriptErrors) {
  RunReport r = test::golden_report("cpu_cnn_batch16.report.json");
  r.run_name = "</script><script>throw new Error('injected')</script>";
  r.environment.not_measured.push_back({"<b>x</b>", "';alert(1);//"});
  const Rendered out = render(chromium_, r, "cpu");
  ASSERT_EQ(out.status, 0) << out.log;
  EXPECT_NE(out.dom.find("data-fathom-rendered=\"2\""), std::string::npos) << out.log;
  EXPECT_EQ(out.log.find("Uncaught"), std::string::npos) << out.log;
  EXPECT_EQ(out.log.find("injected"), std::string::npos) << out.log;
}

}  // namespace
}  // namespace fathom
