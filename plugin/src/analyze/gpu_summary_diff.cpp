// What changed between two GPU sections: the two analyses `fathom diff` compares, or the GPU
// sections of two report epochs. Shares are in percent; times are the analysed window's.
#include <fathom/report_diff.h>

#include <algorithm>
#include <map>
#include <string_view>

namespace fathom {
namespace {

std::optional<double> pct(const std::optional<double>& share) {
  return share ? std::optional<double>(100.0 * *share) : std::nullopt;
}
std::optional<double> ms(std::int64_t ns) { return double(ns) / 1e6; }
std::optional<double> count(std::int64_t n) { return double(n); }

std::optional<double> share_of(std::int64_t part, std::int64_t whole) {
  return whole > 0 ? std::optional<double>(100.0 * double(part) / double(whole)) : std::nullopt;
}

std::optional<double> us_per_call(std::int64_t ns, std::int64_t calls) {
  return calls > 0 ? std::optional<double>(double(ns) / double(calls) / 1e3) : std::nullopt;
}

std::optional<double> mean_busy(const TimelineResult& t) {
  double sum = 0;
  int n = 0;
  for (const DeviceTimeline& d : t.devices)
    if (d.busy_share) {
      sum += *d.busy_share;
      ++n;
    }
  return n > 0 ? std::optional<double>(100.0 * sum / n) : std::nullopt;
}

// A kernel's name for the table's column: without "void " and the function's namespaces (their
// template arguments tell kernels of one name apart), cut to the column.
std::string kernel_label(std::string_view name) {
  constexpr std::size_t kWidth = 24;
  if (name.starts_with("void ")) name.remove_prefix(5);
  const std::size_t args = std::min(name.find('<'), name.find('('));
  const std::size_t scope = name.substr(0, args).rfind("::");
  if (scope != std::string_view::npos) name.remove_prefix(scope + 2);
  return name.size() <= kWidth ? std::string(name)
                               : std::string(name.substr(0, kWidth - 3)) + "...";
}

}  // namespace

std::vector<MetricChange> diff_gpu_summaries(const GpuSummary& a, const GpuSummary& b) {
  std::vector<MetricChange> out;
  if (!a.gpu_activity && !b.gpu_activity) return out;
  auto add = [&](std::string name, const char* unit, std::optional<double> x,
                 std::optional<double> y, bool lower_is_better = true) {
    out.push_back({"gpu", std::move(name), unit, x, y, lower_is_better});
  };
  const TensorCoreResult& ta = a.tensor_cores;
  const TensorCoreResult& tb = b.tensor_cores;
  add("compute-kernel time", "ms", ms(ta.kernel_ns), ms(tb.kernel_ns));
  add("Tensor Core share of compute", "%", pct(ta.share), pct(tb.share), false);
  // Fewer kernels is not better by itself (fused, slower ones; a shorter window): the time per
  // call and how busy the devices were judge, the count is shown.
  add("kernels", "count", count(ta.kernel_count), count(tb.kernel_count));
  out.back().judged = false;
  add("compute time per kernel call", "us", us_per_call(ta.kernel_ns, ta.kernel_count),
      us_per_call(tb.kernel_ns, tb.kernel_count));
  add("devices busy (mean)", "%", mean_busy(a.timeline), mean_busy(b.timeline), false);
  add("analysed window", "ms", ms(a.timeline.window_ns), ms(b.timeline.window_ns));
  add("tiny kernels (share of kernels)", "%", pct(a.timeline.tiny_count_share),
      pct(b.timeline.tiny_count_share));
  add("communication (NCCL) kernel time", "ms", ms(a.timeline.communication_ns),
      ms(b.timeline.communication_ns));
  add("host synchronization calls", "count", count(a.timeline.sync_calls),
      count(b.timeline.sync_calls));
  add("copies", "count", count(a.transfers.count), count(b.transfers.count));
  add("copied bytes", "bytes", count(a.transfers.bytes), count(b.transfers.bytes));
  add("copy time", "ms", ms(a.transfers.total_ns), ms(b.transfers.total_ns));
  add("pageable async copies", "count", count(a.transfers.pageable_async_count),
      count(b.transfers.pageable_async_count));
  // Devices by id: a device only one side has shows as new or gone.
  std::map<std::int32_t, std::pair<const DeviceTimeline*, const DeviceTimeline*>> devices;
  for (const DeviceTimeline& d : a.timeline.devices) devices[d.device].first = &d;
  for (const DeviceTimeline& d : b.timeline.devices) devices[d.device].second = &d;
  for (const auto& [id, p] : devices) {
    const auto& [da, db] = p;
    auto get = [](const DeviceTimeline* d, auto f) -> std::optional<double> {
      return d ? f(*d) : std::nullopt;
    };
    const std::string n = "device " + std::to_string(id) + " ";
    add(n + "busy", "%", get(da, [](const auto& d) { return pct(d.busy_share); }),
        get(db, [](const auto& d) { return pct(d.busy_share); }), false);
    add(n + "idle: data wait", "%",
        get(da, [&](const auto& d) { return share_of(d.idle.data_wait_ns, a.timeline.window_ns); }),
        get(db,
            [&](const auto& d) { return share_of(d.idle.data_wait_ns, b.timeline.window_ns); }));
    add(n + "idle: synchronization", "%",
        get(da, [&](const auto& d) { return share_of(d.idle.sync_ns, a.timeline.window_ns); }),
        get(db, [&](const auto& d) { return share_of(d.idle.sync_ns, b.timeline.window_ns); }));
    add(n + "idle: late launches", "%",
        get(da,
            [&](const auto& d) { return share_of(d.idle.host_launch_ns, a.timeline.window_ns); }),
        get(db,
            [&](const auto& d) { return share_of(d.idle.host_launch_ns, b.timeline.window_ns); }));
    add(n + "communication overlapped", "%",
        get(da, [](const auto& d) { return pct(d.communication_overlap_share); }),
        get(db, [](const auto& d) { return pct(d.communication_overlap_share); }), false);
  }
  // The kernels that took the most time on either side, by name: calls (shown) and time per
  // call (judged).
  std::map<std::string, std::pair<const TopKernel*, const TopKernel*>> kernels;
  for (const TopKernel& k : ta.top_kernels) kernels[k.name].first = &k;
  for (const TopKernel& k : tb.top_kernels) kernels[k.name].second = &k;
  for (const auto& [name, p] : kernels) {
    const auto& [ka, kb] = p;
    auto per_call = [](const TopKernel* k) {
      return k ? us_per_call(k->total_ns, k->count) : std::nullopt;
    };
    auto calls = [](const TopKernel* k) { return k ? count(k->count) : std::nullopt; };
    out.push_back({"kernels", kernel_label(name) + " per call", "us", per_call(ka), per_call(kb)});
    out.push_back({"kernels", kernel_label(name) + " calls", "count", calls(ka), calls(kb)});
    out.back().judged = false;
  }
  return out;
}

std::vector<FindingChange> diff_findings(const std::vector<Finding>& a,
                                         const std::vector<Finding>& b) {
  std::vector<FindingChange> out;
  std::map<std::string, const Finding*> fa, fb;
  for (const Finding& f : a) fa.emplace(f.id, &f);
  for (const Finding& f : b) fb.emplace(f.id, &f);
  for (const auto& [id, f] : fb) {
    auto it = fa.find(id);
    if (it == fa.end())
      out.push_back({FindingChange::Kind::Appeared, id, f->title, Severity::Info, f->severity});
    else if (it->second->severity != f->severity)
      out.push_back(
          {FindingChange::Kind::SeverityChanged, id, f->title, it->second->severity, f->severity});
  }
  for (const auto& [id, f] : fa)
    if (!fb.count(id))
      out.push_back({FindingChange::Kind::Disappeared, id, f->title, f->severity, Severity::Info});
  return out;
}

}  // namespace fathom
