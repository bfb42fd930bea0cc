#pragma once
// What changed between two runs: step time, throughput, phase times, memory, device telemetry,
// and which findings appeared or disappeared. For `fathom diff A B`.
#include <fathom/report.h>

#include <optional>
#include <string>
#include <vector>

namespace fathom {

struct MetricChange {
  std::string section;  // "step", "phase", "memory", "device", "copies"
  std::string name;     // "step time, mean"
  std::string unit;     // "ms", "samples/s", "bytes", "%", "W", "J"
  std::optional<double> a;
  std::optional<double> b;
  bool lower_is_better = true;
  // False for a figure that is neither better nor worse by itself (a kernel count: fewer kernels
  // can be slower ones): shown with its change, never judged.
  bool judged = true;

  std::optional<double> delta() const;     // b - a, when both are known
  std::optional<double> relative() const;  // (b - a) / a, when both are known and a != 0
  // Better, worse or unchanged within noise (relative change below `noise`).
  int verdict(double noise) const;  // -1 worse, 0 unchanged / unknown, +1 better
};

struct FindingChange {
  enum class Kind { Appeared, Disappeared, SeverityChanged };
  Kind kind = Kind::Appeared;
  std::string id;
  std::string title;
  Severity severity_a = Severity::Info;  // Disappeared, SeverityChanged
  Severity severity_b = Severity::Info;  // Appeared, SeverityChanged
};

struct ReportDiff {
  std::string name_a, name_b;
  std::int64_t epoch_a = 0, epoch_b = 0;
  std::vector<std::string> environment_changes;  // "device: cpu -> cuda:0"
  std::vector<MetricChange> metrics;
  std::vector<FindingChange> findings;
};

// Compares epoch_a of a with epoch_b of b (the last epoch of each when negative). Throws
// fathom::Error naming the report and the epoch when one is missing.
ReportDiff diff_reports(const RunReport& a, const RunReport& b, int epoch_a = -1, int epoch_b = -1);

// What changed between two GPU sections (section "gpu"): compute-kernel time, Tensor Core share,
// copies, communication, and per device the busy share and why it idled. For two `fathom analyze`
// results, and inside diff_reports when both epochs have one.
std::vector<MetricChange> diff_gpu_summaries(const GpuSummary& a, const GpuSummary& b);
// Findings that appeared, disappeared or changed severity, matched by id.
std::vector<FindingChange> diff_findings(const std::vector<Finding>& a,
                                         const std::vector<Finding>& b);

// The terminal form: what changed most first; changes below `noise` (relative) are marked "~".
std::string format_diff(const ReportDiff& d, double noise = 0.02);

}  // namespace fathom
