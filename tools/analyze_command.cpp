// fathom analyze TRACE: the Tensor Core, transfer and timeline analyses of a PyTorch profiler
// trace (.json, .json.gz), a fathom activity file (.jsonl[.gz]) or an Nsight Systems SQLite
// export (.sqlite: with the advisor's findings, per step and per device), printed and written as
// JSON (and, for an export, as the HTML report).
#include <fathom/error.h>
#include <fathom/replay.h>
#include <fathom/report_writers.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <iostream>
#include <memory>
#include <optional>
#include <utility>

#include "advise/export_analysis.h"
#include "analyze/gpu_pipeline.h"
#include "analyze/transfer_analysis.h"
#include "base/command_output.h"
#include "base/terminal_text.h"
#include "commands.h"
#include "report/analysis_json.h"
#include "report/chrome_trace.h"

namespace fathom::cli {
namespace {

struct AnalyzeArgs {
  std::string path;
  std::string json_out;
  std::string chrome_trace_out;
  std::string html_out;
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

// The export's NVTX ranges outside fathom's domain by name, the longest total first.
void print_range_names(const NsightExportInfo& info) {
  if (info.range_names.empty()) return;
  constexpr std::size_t kRows = 20;
  std::cout << fmt::format("\nNVTX ranges: {} ({} name{})\n", info.nvtx_ranges,
                           info.range_names.size(), info.range_names.size() == 1 ? "" : "s");
  std::cout << fmt::format("    {:<48} {:>9} {:>12}\n", "name", "count", "total ms");
  for (std::size_t i = 0; i < std::min(kRows, info.range_names.size()); ++i) {
    const auto& r = info.range_names[i];
    std::cout << fmt::format("    {:<48} {:>9} {:>12.3f}\n", detail::terminal_safe(r.name), r.count,
                             double(r.total_ns) / 1e6);
  }
  if (info.range_names.size() > kRows)
    std::cout << fmt::format("    ... {} more names (--json lists them all)\n",
                             info.range_names.size() - kRows);
}

// An Nsight Systems export: streamed (exports reach gigabytes), advised, one section per device.
int run_analyze_export(const AnalyzeArgs& a, const LinkPeak& link) {
  if (!a.chrome_trace_out.empty())
    throw Error(
        "--chrome-trace is not available for an Nsight Systems export: open the .nsys-rep in "
        "Nsight Systems itself");
  GpuSummaryOptions options;
  options.source = "Nsight Systems export";
  options.link = link;
  const ExportAnalysis x = analyze_nsight_export(a.path, options);
  const EpochSummary& e = x.report.epochs.front();
  std::cout << fmt::format(
      "fathom analyze | {} (Nsight Systems{}{}; {} rows, {} ranges of fathom's "
      "domain, {} op ranges)\n",
      a.path, x.info.nsys_version.empty() ? "" : " ", x.info.nsys_version, x.info.rows,
      x.info.fathom_ranges, x.info.op_ranges);
  std::cout << format_terminal_report(x.report);
  for (const DeviceAnalysis& d : x.devices)
    std::cout << fmt::format("\ndevice {} alone (its GPU work and the processes that used it)\n",
                             d.device)
              << format_gpu_summary_text(d.gpu);
  print_range_names(x.info);
  for (const std::string& s : x.info.skipped) std::cout << "  skipped: " << s << "\n";
  if (!a.json_out.empty()) {
    AnalysisDocument doc{a.path, *e.gpu, x.devices, e.findings, x.info};
    write_command_output(a.json_out, "--json", format_analysis_json(doc), {a.path});
    std::cout << fmt::format("  JSON written to {}\n", a.json_out);
  }
  if (!a.html_out.empty()) {
    write_command_output(a.html_out, "--html", format_html_report(x.report), {a.path});
    std::cout << fmt::format("  HTML written to {}\n", a.html_out);
  }
  return 0;
}

int run_analyze(const AnalyzeArgs& a) {
  const LinkPeak link = link_of(a);
  // Before the analysis: an output that cannot be written (or is the input) is said at once.
  for (const auto& [path, option] :
       {std::pair{&a.json_out, "--json"}, std::pair{&a.html_out, "--html"},
        std::pair{&a.chrome_trace_out, "--chrome-trace"}})
    if (!path->empty()) check_command_output(*path, option, {a.path});
  if (is_sqlite_file(a.path)) return run_analyze_export(a, link);
  if (!a.html_out.empty())
    throw Error(
        "--html is written for Nsight Systems exports; for a trace, use --json and "
        "`fathom diff`, or --chrome-trace for ui.perfetto.dev");
  const bool replay = is_activity_file(a.path);
  const GpuActivity activity = load_trace(a.path);
  GpuSummaryOptions options;
  options.source = replay ? "fathom activity file" : "PyTorch profiler trace";
  options.link = link;
  // A row per step (ProfilerStep#N in a PyTorch trace), as for an Nsight export.
  const GpuSummary summary = summarize_activity(activity, options, std::size_t{1} << 16);
  std::cout << fmt::format("fathom analyze | {}\n", a.path) << format_gpu_summary_text(summary);
  if (!a.chrome_trace_out.empty()) {
    // The records themselves, for ui.perfetto.dev: one GPU track per stream, the host's steps
    // and phases where the source recorded them.
    TraceInput in;
    in.process_name = a.path;
    in.gpu = &activity;
    write_command_output(a.chrome_trace_out, "--chrome-trace", format_chrome_trace(in), {a.path});
    std::cout << fmt::format("  Chrome trace written to {}\n", a.chrome_trace_out);
  }
  if (!a.json_out.empty()) {
    write_command_output(a.json_out, "--json",
                         format_analysis_json(AnalysisDocument{a.path, summary}), {a.path});
    std::cout << fmt::format("  JSON written to {}\n", a.json_out);
  }
  return 0;
}

}  // namespace

Run add_analyze_command(CLI::App& app) {
  auto args = std::make_shared<AnalyzeArgs>();
  auto* cmd = app.add_subcommand("analyze",
                                 "Tensor Core, transfer and timeline analysis of a PyTorch "
                                 "profiler trace, a fathom activity file or an Nsight Systems "
                                 "SQLite export");
  cmd->add_option("trace", args->path,
                  "the trace (.json, .json.gz), activity file (.jsonl, .jsonl.gz) or Nsight "
                  "Systems export (`nsys export --type sqlite`)")
      ->required();
  cmd->add_option("--json", args->json_out, "also write the analysis as JSON to this file");
  cmd->add_option("--html", args->html_out,
                  "also write the report as one HTML page to this file (Nsight exports)");
  cmd->add_option("--chrome-trace", args->chrome_trace_out,
                  "also write the records as a Chrome trace (ui.perfetto.dev) to this file");
  cmd->add_option("--pcie", args->pcie,
                  "the host link as GEN:WIDTH (e.g. 4:16), for bandwidth against its peak");
  cmd->add_option("--link-gbps", args->link_gbps, "the host link's peak GB/s, when it is not PCIe");
  return [args] { return run_analyze(*args); };
}

}  // namespace fathom::cli
