// fathom analyze TRACE: the Tensor Core, transfer and timeline analyses of a PyTorch profiler
// trace (.json, .json.gz) or a fathom activity file (.jsonl[.gz]), printed and written as JSON.
#include <fathom/error.h>
#include <fathom/replay.h>
#include <fmt/format.h>

#include <charconv>
#include <iostream>
#include <memory>
#include <optional>

#include "analyze/transfer_analysis.h"
#include "commands.h"
#include "records/atomic_file.h"
#include "report/chrome_trace.h"

namespace fathom::cli {
namespace {

struct AnalyzeArgs {
  std::string path;
  std::string json_out;
  std::string chrome_trace_out;
  std::string pcie;  // "GEN:WIDTH"
  std::optional<double> link_gbps;
};

int parse_int(std::string_view s, const std::string& whole) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size())
    throw Error(
        fmt::format("bad --pcie value '{}': give GEN:WIDTH, e.g. 4:16 for PCIe gen4 x16", whole));
  return v;
}

LinkPeak link_of(const AnalyzeArgs& a) {
  if (a.link_gbps) {
    if (!(*a.link_gbps > 0))
      throw Error(
          fmt::format("bad --link-gbps value {}: give the link's GB/s, e.g. 31.5", *a.link_gbps));
    return LinkPeak{*a.link_gbps, fmt::format("{:.1f} GB/s (--link-gbps)", *a.link_gbps)};
  }
  if (!a.pcie.empty()) {
    const auto colon = a.pcie.find(':');
    if (colon == std::string::npos)
      throw Error(fmt::format("bad --pcie value '{}': give GEN:WIDTH, e.g. 4:16 for PCIe gen4 x16",
                              a.pcie));
    const int gen = parse_int(std::string_view(a.pcie).substr(0, colon), a.pcie);
    const int width = parse_int(std::string_view(a.pcie).substr(colon + 1), a.pcie);
    const auto peak = pcie_peak_gb_per_s(gen, width);
    if (!peak)
      throw Error(fmt::format(
          "bad --pcie value '{}': generations 1 to 6, widths 1, 2, 4, 8, 12, 16 or 32", a.pcie));
    return LinkPeak{peak, fmt::format("PCIe gen{} x{}", gen, width)};
  }
  return LinkPeak{std::nullopt,
                  "the trace does not give the PCIe generation and width (pass --pcie GEN:WIDTH)"};
}

int run_analyze(const AnalyzeArgs& a) {
  const LinkPeak link = link_of(a);
  const bool replay = is_activity_file(a.path);
  const GpuActivity activity = load_trace(a.path);
  GpuSummaryOptions options;
  options.source = replay ? "fathom activity file" : "PyTorch profiler trace";
  options.link = link;
  const GpuSummary summary = analyze_activity(activity, options);
  std::cout << fmt::format("fathom analyze | {}\n", a.path) << format_gpu_summary_text(summary);
  if (!a.chrome_trace_out.empty()) {
    // The records themselves, for ui.perfetto.dev: one GPU track per stream, the host's steps
    // and phases where the source recorded them.
    TraceInput in;
    in.process_name = a.path;
    in.gpu = &activity;
    write_file_atomically(a.chrome_trace_out, format_chrome_trace(in));
    std::cout << fmt::format("  Chrome trace written to {}\n", a.chrome_trace_out);
  }
  if (!a.json_out.empty()) {
    write_file_atomically(a.json_out, format_gpu_analysis_json(summary, a.path));
    std::cout << fmt::format("  JSON written to {}\n", a.json_out);
  }
  return 0;
}

}  // namespace

Run add_analyze_command(CLI::App& app) {
  auto args = std::make_shared<AnalyzeArgs>();
  auto* cmd = app.add_subcommand("analyze",
                                 "Tensor Core, transfer and timeline analysis of a PyTorch "
                                 "profiler trace or a fathom activity file");
  cmd->add_option("trace", args->path,
                  "the trace (.json, .json.gz) or activity file (.jsonl, .jsonl.gz)")
      ->required();
  cmd->add_option("--json", args->json_out, "also write the analysis as JSON to this file");
  cmd->add_option("--chrome-trace", args->chrome_trace_out,
                  "also write the records as a Chrome trace (ui.perfetto.dev) to this file");
  cmd->add_option("--pcie", args->pcie,
                  "the host link as GEN:WIDTH (e.g. 4:16), for bandwidth against its peak");
  cmd->add_option("--link-gbps", args->link_gbps, "the host link's peak GB/s, when it is not PCIe");
  return [args] { return run_analyze(*args); };
}

}  // namespace fathom::cli
