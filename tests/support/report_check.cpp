// report_check REPORT.json EPOCHS [--amp-enabled]: exits 0 when the report holds EPOCHS epochs,
// each with non-zero forward, backward and optimizer time and at least one step; prints what is
// wrong otherwise. --amp-enabled also requires that Auto mode turned mixed precision on and that
// steps ran under it (whatever the policy decided afterwards, which is printed).
#include <fathom/error.h>
#include <fathom/report_writers.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

int main(int argc, char** argv) {
  const bool amp_enabled = argc == 4 && std::string(argv[3]) == "--amp-enabled";
  if (argc != 3 && !amp_enabled) {
    std::fprintf(stderr, "usage: report_check REPORT.json EPOCHS [--amp-enabled]\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  std::stringstream text;
  text << in.rdbuf();
  try {
    fathom::RunReport r = fathom::parse_json_report(text.str(), argv[1]);
    int bad = 0;
    if (static_cast<int>(r.epochs.size()) != std::stoi(argv[2])) {
      std::printf("expected %s epochs, found %zu\n", argv[2], r.epochs.size());
      ++bad;
    }
    for (const auto& e : r.epochs) {
      if (e.steps <= 0)
        std::printf("epoch %lld: no steps\n", static_cast<long long>(e.index)), ++bad;
      for (fathom::Phase p :
           {fathom::Phase::Forward, fathom::Phase::Backward, fathom::Phase::Optimizer}) {
        if (e.phase(p).wall_ms_total <= 0) {
          std::printf("epoch %lld: no %s time\n", static_cast<long long>(e.index),
                      std::string(fathom::phase_name(p)).c_str());
          ++bad;
        }
      }
    }
    if (amp_enabled) {
      bool enabled = false;
      std::int64_t low = 0;
      for (const auto& e : r.epochs) {
        if (!e.mixed_precision) continue;
        low += e.mixed_precision->steps_low_precision;
        for (const auto& ev : e.mixed_precision->events) {
          std::printf("mixed precision %s at step %lld: %s\n",
                      std::string(fathom::amp_event_kind_name(ev.kind)).c_str(),
                      static_cast<long long>(ev.step), ev.detail.c_str());
          enabled = enabled || ev.kind == fathom::AmpEventKind::Enabled;
        }
      }
      if (!enabled) std::printf("mixed precision was never enabled\n"), ++bad;
      if (low == 0) std::printf("no step ran under mixed precision\n"), ++bad;
    }
    std::printf("report_check: %zu epochs, %s\n", r.epochs.size(), bad ? "FAILED" : "ok");
    return bad ? 1 : 0;
  } catch (const fathom::Error& e) {
    std::printf("%s\n", e.what());
    return 1;
  }
}
