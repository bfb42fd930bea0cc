// report_check REPORT.json EPOCHS [--amp-enabled] [--flops FORWARD BACKWARD]: exits 0 when the
// report holds EPOCHS epochs, each with non-zero forward, backward and optimizer time and at least
// one step; prints what is wrong otherwise. --amp-enabled also requires that Auto mode turned mixed
// precision on and that steps ran under it (whatever the policy decided afterwards, which is
// printed), where this CPU has bf16 units this process's kernels may use; on a CPU without them
// (or with ONEDNN_MAX_CPU_ISA=AVX2) it requires that Auto said not_enabled and ran no 16-bit step
// (issue 28: the suite holds on every x86-64 host). --flops: every epoch counted exactly FORWARD
// and BACKWARD FLOPs per step.
#include <fathom/error.h>
#include <fathom/report_writers.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "analyze/amp_hardware.h"
#include "collect/host_info.h"

namespace {

// The CPU's bf16 units (from /proc/cpuinfo, as the AMP extension reads them), less what the
// process's oneDNN and ATen caps take away: the example ran in this test's environment.
std::vector<std::string> usable_bf16_units() {
  const char* onednn = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (!onednn || !*onednn) onednn = std::getenv("DNNL_MAX_CPU_ISA");
  const char* aten = std::getenv("ATEN_CPU_CAPABILITY");
  return fathom::usable_cpu_bf16_units(fathom::cpu_bf16_units(), onednn ? onednn : "",
                                       aten ? aten : "");
}

}  // namespace

int main(int argc, char** argv) {
  bool amp_enabled = false, usage = argc < 3;
  std::optional<double> forward_flops, backward_flops;
  for (int i = 3; i < argc && !usage; ++i) {
    const std::string a = argv[i];
    if (a == "--amp-enabled") {
      amp_enabled = true;
    } else if (a == "--flops" && i + 2 < argc) {
      forward_flops = std::stod(argv[++i]);
      backward_flops = std::stod(argv[++i]);
    } else {
      usage = true;
    }
  }
  if (usage) {
    std::fprintf(stderr,
                 "usage: report_check REPORT.json EPOCHS [--amp-enabled] [--flops FORWARD "
                 "BACKWARD]\n");
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
    if (forward_flops) {
      for (const auto& e : r.epochs) {
        const long long index = static_cast<long long>(e.index);
        if (!e.flops || e.flops->profiled_steps <= 0) {
          std::printf("epoch %lld: no FLOPs counted\n", index), ++bad;
          continue;
        }
        std::printf("epoch %lld: %.0f forward, %.0f backward FLOPs per step (%lld steps)\n", index,
                    e.flops->forward, e.flops->backward,
                    static_cast<long long>(e.flops->profiled_steps));
        if (e.flops->forward != *forward_flops || e.flops->backward != *backward_flops) {
          std::printf("epoch %lld: expected %.0f forward, %.0f backward\n", index, *forward_flops,
                      *backward_flops);
          ++bad;
        }
      }
    }
    if (amp_enabled) {
      bool enabled = false, not_enabled = false;
      std::int64_t low = 0;
      for (const auto& e : r.epochs) {
        if (!e.mixed_precision) continue;
        low += e.mixed_precision->steps_low_precision;
        for (const auto& ev : e.mixed_precision->events) {
          std::printf("mixed precision %s at step %lld: %s\n",
                      std::string(fathom::amp_event_kind_name(ev.kind)).c_str(),
                      static_cast<long long>(ev.step), ev.detail.c_str());
          enabled = enabled || ev.kind == fathom::AmpEventKind::Enabled;
          not_enabled = not_enabled || ev.kind == fathom::AmpEventKind::NotEnabled;
        }
      }
      if (usable_bf16_units().empty()) {
        std::printf("this CPU has no bf16 units its kernels may use: Auto must not try bf16\n");
        if (!not_enabled) std::printf("no not_enabled event says why\n"), ++bad;
        if (enabled || low != 0) std::printf("mixed precision ran without native units\n"), ++bad;
      } else {
        if (!enabled) std::printf("mixed precision was never enabled\n"), ++bad;
        if (low == 0) std::printf("no step ran under mixed precision\n"), ++bad;
      }
    }
    std::printf("report_check: %zu epochs, %s\n", r.epochs.size(), bad ? "FAILED" : "ok");
    return bad ? 1 : 0;
  } catch (const fathom::Error& e) {
    std::printf("%s\n", e.what());
    return 1;
  }
}
