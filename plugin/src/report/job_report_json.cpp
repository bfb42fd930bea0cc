// The job report as JSON (schema "fathom.job_report", docs/distributed.md).
#include <fathom/job_report.h>
#include <fathom/report_writers.h>

#include <nlohmann/json.hpp>

#include "base/json_fields.h"

namespace fathom {
namespace {

using json = nlohmann::ordered_json;

template <typename T>
json optional_json(const std::optional<T>& v) {
  return detail::write_json<std::optional<T>, json>(v);
}
json finding_json(const Finding& f) { return detail::write_json<Finding, json>(f); }

json rank_json(const RankSummary& s) {
  json phases = json::object();
  for (Phase p : kAllPhases)
    phases[std::string(phase_name(p))] = s.per_step(s.phase_ms[static_cast<std::size_t>(p)]);
  json comm = {{"source", std::string(comm_source_name(s.comm.source))}};
  if (s.comm.source != CommSource::None) {
    comm["collectives"] = s.comm.collectives;
    comm["bytes"] = s.comm.bytes;
    comm["busy_ms_per_step"] = s.per_step(s.comm.busy_ms);
    comm["exposed_ms_per_step"] = s.comm_exposed_ms_mean();
    const double step = s.step_ms_mean();
    comm["share_of_step"] = step > 0 ? json(s.per_step(s.comm.busy_ms) / step) : json(nullptr);
    comm["overlap_share"] = s.comm.busy_ms > 0
                                ? json(1.0 - std::min(1.0, s.comm.exposed_ms / s.comm.busy_ms))
                                : json(nullptr);
  }
  json findings = json::array();
  for (const RankFinding& f : s.top_findings)
    findings.push_back({{"id", f.id}, {"severity", std::string(severity_name(f.severity))}});
  return {{"rank", s.rank.rank},
          {"local_rank", s.rank.local_rank},
          {"host", s.host},
          {"pid", s.pid},
          {"steps", s.steps},
          {"failed_steps", s.failed_steps},
          {"samples", s.samples},
          {"wall_ms", s.wall_ms},
          {"step_ms_mean", s.step_ms_mean()},
          {"step_ms_max", s.step_ms_max},
          {"work_ms", s.work_ms()},
          {"work_ms_mean", s.work_ms_mean()},
          {"work_ms_median", optional_json(s.work_ms_median)},
          {"data_ms_mean", s.data_ms_mean()},
          {"phase_ms_per_step", phases},
          {"communication", comm},
          {"device_peak_allocated_bytes", optional_json(s.device_peak_allocated_bytes)},
          {"device_peak_reserved_bytes", optional_json(s.device_peak_reserved_bytes)},
          {"peak_rss_bytes", optional_json(s.peak_rss_bytes)},
          {"ended_by_exception", s.ended_by_exception},
          {"top_findings", findings}};
}

json epoch_json(const JobEpoch& e) {
  json ranks = json::array();
  for (const RankSummary& s : e.ranks) ranks.push_back(rank_json(s));
  json unreadable = json::array();
  for (const UnreadableRank& u : e.unreadable)
    unreadable.push_back({{"rank", u.rank}, {"why", u.why}});
  json findings = json::array();
  for (const Finding& f : e.findings) findings.push_back(finding_json(f));
  return {{"index", e.index},
          {"world_size", e.world_size},
          {"reported_ranks", e.ranks.size()},
          {"missing_ranks", e.missing_ranks},
          {"unreadable_ranks", unreadable},
          {"waited_ms", e.waited_ms},
          {"work_measured_as", e.work_from_comm ? "step_minus_communication_wait" : "step_time"},
          {"work_statistic", e.work_is_median ? "median_per_step" : "mean_per_step"},
          {"slowest_rank", optional_json(e.slowest_rank)},
          {"fastest_rank", optional_json(e.fastest_rank)},
          {"work_ms_slowest", e.work_ms_slowest},
          {"work_ms_fastest", e.work_ms_fastest},
          {"work_ms_median", e.work_ms_median},
          {"skew_ms", e.skew_ms},
          {"skew_share", e.skew_share},
          {"ranks", ranks},
          {"findings", findings}};
}

}  // namespace

std::string format_job_json(const JobReport& report) {
  json epochs = json::array();
  for (const JobEpoch& e : report.epochs) epochs.push_back(epoch_json(e));
  json j = {{"schema", "fathom.job_report"},
            {"schema_version", report.schema_version},
            {"run_name", report.run_name},
            {"world_size", report.world_size},
            {"epochs", epochs}};
  return j.dump(2) + "\n";
}

}  // namespace fathom
