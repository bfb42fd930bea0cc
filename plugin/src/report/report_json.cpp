// JSON form of the report model. The schema is documented in docs/report-schema.md; a change to
// a field's meaning bumps kReportSchemaVersion.
#include <fathom/error.h>
#include <fathom/hardware_fit.h>
#include <fathom/report_writers.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "analyze/fit_hardware.h"
#include "base/json_number.h"
#include "report/achievement_json.h"
#include "report/gpu_summary_json.h"
#include "report/json_helpers.h"
#include "report/mixed_precision_report.h"
#include "report/module_report_writers.h"
#include "report/report_stream.h"
#include "report/step_series_json.h"

namespace fathom {
namespace {

using detail::finding_json;
using detail::optional_from;
using detail::optional_json;
using detail::unmeasured_from;
using detail::unmeasured_json;
using nlohmann::json;

json memory_json(const std::optional<DeviceMemoryPeak>& m) {
  if (!m) return nullptr;
  return {{"peak_allocated_bytes", m->peak_allocated_bytes},
          {"peak_reserved_bytes", m->peak_reserved_bytes},
          {"alloc_retries", m->alloc_retries},
          {"ooms", m->ooms}};
}

std::optional<DeviceMemoryPeak> memory_from(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  DeviceMemoryPeak m;
  m.peak_allocated_bytes = detail::json_integer<std::int64_t>(it->at("peak_allocated_bytes"));
  m.peak_reserved_bytes = detail::json_integer<std::int64_t>(it->at("peak_reserved_bytes"));
  m.alloc_retries = detail::json_integer<std::int64_t>(it->at("alloc_retries"));
  m.ooms = detail::json_integer<std::int64_t>(it->at("ooms"));
  return m;
}

// How the run went (origin, mode, loop language), read back into enums. Reports written before
// "origin" carried an export's origin in "mode" ("nsight export"), and before "language" were
// all C++ loops.
void read_run_kind(const json& ej, Environment& env) {
  const json& mode = ej.at("mode");
  const std::string mode_text = mode.is_null() ? std::string() : mode.get<std::string>();
  if (auto it = ej.find("origin"); it != ej.end()) {
    const auto origin = report_origin_from_name(it->get<std::string>());
    if (!origin)
      throw Error(fmt::format("environment.origin '{}' is not session or nsight export",
                              it->get<std::string>()));
    env.origin = *origin;
  } else if (mode_text == report_origin_name(ReportOrigin::NsightExport)) {
    env.origin = ReportOrigin::NsightExport;
  }
  if (!mode.is_null() && mode_text != report_origin_name(ReportOrigin::NsightExport)) {
    env.mode = mode_from_name(mode_text);
    if (!env.mode)
      throw Error(
          fmt::format("environment.mode '{}' is not off, observe, suggest or auto", mode_text));
  }
  if (auto it = ej.find("language"); it != ej.end()) {
    const auto language = loop_language_from_name(it->get<std::string>());
    if (!language)
      throw Error(
          fmt::format("environment.language '{}' is not c++ or python", it->get<std::string>()));
    env.language = *language;
  }
}

json environment_json(const Environment& e) {
  json not_measured = json::array();
  for (const auto& u : e.not_measured) not_measured.push_back(unmeasured_json(u));
  return {{"fathom_version", e.fathom_version},
          {"torch_version", e.torch_version},
          {"device", e.device},
          {"device_name", e.device_name},
          {"device_memory_bytes", optional_json(e.device_memory_bytes)},
          {"hostname", e.hostname},
          {"pid", e.pid},
          {"started_at", e.started_at},
          {"origin", report_origin_name(e.origin)},
          {"mode", e.mode ? json(mode_name(*e.mode)) : json(nullptr)},
          {"nvtx", e.nvtx},
          {"language", loop_language_name(e.language)},
          {"not_measured", not_measured}};
}

// --- device telemetry (NVML), memory footprint and hardware fit ---------------------------------

json telemetry_json(const std::optional<DeviceTelemetry>& t) {
  if (!t) return nullptr;
  json throttle = json::array();
  for (const ThrottleShare& s : t->throttle)
    throttle.push_back({{"reason", s.reason}, {"share", s.share}});
  json series = json::array();
  for (const TelemetryPoint& p : t->series) {
    series.push_back({{"t_s", p.t_s},
                      {"gpu_utilization_pct", optional_json(p.gpu_utilization_pct)},
                      {"memory_used_bytes", optional_json(p.memory_used_bytes)},
                      {"power_w", optional_json(p.power_w)},
                      {"sm_clock_mhz", optional_json(p.sm_clock_mhz)},
                      {"pcie_tx_bytes_per_s", optional_json(p.pcie_tx_bytes_per_s)},
                      {"pcie_rx_bytes_per_s", optional_json(p.pcie_rx_bytes_per_s)}});
  }
  json not_measured = json::array();
  for (const auto& u : t->not_measured) not_measured.push_back(unmeasured_json(u));
  return {{"source", t->source},
          {"device_name", t->device_name},
          {"samples", t->samples},
          {"duration_s", t->duration_s},
          {"gpu_utilization_pct_mean", optional_json(t->gpu_utilization_pct_mean)},
          {"gpu_utilization_pct_max", optional_json(t->gpu_utilization_pct_max)},
          {"memory_utilization_pct_mean", optional_json(t->memory_utilization_pct_mean)},
          {"memory_used_bytes_max", optional_json(t->memory_used_bytes_max)},
          {"memory_total_bytes", optional_json(t->memory_total_bytes)},
          {"power_w_mean", optional_json(t->power_w_mean)},
          {"power_w_max", optional_json(t->power_w_max)},
          {"power_limit_w", optional_json(t->power_limit_w)},
          {"energy_j", optional_json(t->energy_j)},
          {"sm_clock_mhz_mean", optional_json(t->sm_clock_mhz_mean)},
          {"sm_clock_mhz_max", optional_json(t->sm_clock_mhz_max)},
          {"memory_clock_mhz_mean", optional_json(t->memory_clock_mhz_mean)},
          {"throttle", throttle},
          {"pcie",
           {{"gen", optional_json(t->pcie.gen)},
            {"width", optional_json(t->pcie.width)},
            {"max_gen", optional_json(t->pcie.max_gen)},
            {"max_width", optional_json(t->pcie.max_width)},
            {"under_load", t->pcie.under_load}}},
          {"pcie_tx_bytes_per_s_mean", optional_json(t->pcie_tx_bytes_per_s_mean)},
          {"pcie_rx_bytes_per_s_mean", optional_json(t->pcie_rx_bytes_per_s_mean)},
          {"pcie_rx_bytes_per_s_max", optional_json(t->pcie_rx_bytes_per_s_max)},
          {"nvlinks_active", optional_json(t->nvlinks_active)},
          {"series", series},
          {"not_measured", not_measured}};
}

std::optional<DeviceTelemetry> telemetry_from(const json& parent) {
  auto it = parent.find("telemetry");
  if (it == parent.end() || it->is_null()) return std::nullopt;
  const json& j = *it;
  DeviceTelemetry t;
  t.source = j.at("source").get<std::string>();
  t.device_name = j.at("device_name").get<std::string>();
  t.samples = detail::json_integer<std::int64_t>(j.at("samples"));
  t.duration_s = j.at("duration_s").get<double>();
  t.gpu_utilization_pct_mean = optional_from<double>(j, "gpu_utilization_pct_mean");
  t.gpu_utilization_pct_max = optional_from<double>(j, "gpu_utilization_pct_max");
  t.memory_utilization_pct_mean = optional_from<double>(j, "memory_utilization_pct_mean");
  t.memory_used_bytes_max = optional_from<std::int64_t>(j, "memory_used_bytes_max");
  t.memory_total_bytes = optional_from<std::int64_t>(j, "memory_total_bytes");
  t.power_w_mean = optional_from<double>(j, "power_w_mean");
  t.power_w_max = optional_from<double>(j, "power_w_max");
  t.power_limit_w = optional_from<double>(j, "power_limit_w");
  t.energy_j = optional_from<double>(j, "energy_j");
  t.sm_clock_mhz_mean = optional_from<double>(j, "sm_clock_mhz_mean");
  t.sm_clock_mhz_max = optional_from<double>(j, "sm_clock_mhz_max");
  t.memory_clock_mhz_mean = optional_from<double>(j, "memory_clock_mhz_mean");
  for (const json& s : j.at("throttle"))
    t.throttle.push_back({s.at("reason").get<std::string>(), s.at("share").get<double>()});
  const json& l = j.at("pcie");
  t.pcie = PcieLinkState{optional_from<int>(l, "gen"), optional_from<int>(l, "width"),
                         optional_from<int>(l, "max_gen"), optional_from<int>(l, "max_width"),
                         l.at("under_load").get<bool>()};
  t.pcie_tx_bytes_per_s_mean = optional_from<double>(j, "pcie_tx_bytes_per_s_mean");
  t.pcie_rx_bytes_per_s_mean = optional_from<double>(j, "pcie_rx_bytes_per_s_mean");
  t.pcie_rx_bytes_per_s_max = optional_from<double>(j, "pcie_rx_bytes_per_s_max");
  t.nvlinks_active = optional_from<int>(j, "nvlinks_active");
  for (const json& p : j.at("series")) {
    t.series.push_back(TelemetryPoint{
        p.at("t_s").get<double>(), optional_from<double>(p, "gpu_utilization_pct"),
        optional_from<double>(p, "memory_used_bytes"), optional_from<double>(p, "power_w"),
        optional_from<double>(p, "sm_clock_mhz"), optional_from<double>(p, "pcie_tx_bytes_per_s"),
        optional_from<double>(p, "pcie_rx_bytes_per_s")});
  }
  for (const json& u : j.at("not_measured")) t.not_measured.push_back(unmeasured_from(u));
  return t;
}

json footprint_json(const std::optional<MemoryFootprint>& m) {
  if (!m) return nullptr;
  json models = json::array();
  for (const ModelFootprint& f : m->models)
    models.push_back({{"name", f.name},
                      {"parameter_count", f.parameter_count},
                      {"parameter_bytes", f.parameter_bytes},
                      {"gradient_bytes", f.gradient_bytes},
                      {"optimizer_state_bytes", optional_json(f.optimizer_state_bytes)}});
  return {{"parameter_count", m->parameter_count},
          {"parameter_bytes", m->parameter_bytes},
          {"gradient_bytes", m->gradient_bytes},
          {"optimizer_state_bytes", optional_json(m->optimizer_state_bytes)},
          {"activation_bytes", optional_json(m->activation_bytes)},
          {"activation_bytes_why", m->activation_bytes ? json(nullptr) : json(m->activation_why)},
          {"checkpointable_blocks", optional_json(m->checkpointable_blocks)},
          {"mixed_precision", m->mixed_precision},
          {"checkpointing", m->checkpointing},
          {"models", models}};
}

std::optional<MemoryFootprint> footprint_from(const json& parent) {
  auto it = parent.find("footprint");
  if (it == parent.end() || it->is_null()) return std::nullopt;
  const json& j = *it;
  MemoryFootprint m;
  m.parameter_count = detail::json_integer<std::int64_t>(j.at("parameter_count"));
  m.parameter_bytes = detail::json_integer<std::int64_t>(j.at("parameter_bytes"));
  m.gradient_bytes = detail::json_integer<std::int64_t>(j.at("gradient_bytes"));
  m.optimizer_state_bytes = optional_from<std::int64_t>(j, "optimizer_state_bytes");
  m.activation_bytes = optional_from<std::int64_t>(j, "activation_bytes");
  if (auto why = j.find("activation_bytes_why"); why != j.end() && why->is_string())
    m.activation_why = why->get<std::string>();
  if (auto models = j.find("models"); models != j.end()) {  // absent in reports written before it
    for (const json& f : *models) {
      ModelFootprint mf;
      mf.name = f.at("name").get<std::string>();
      mf.parameter_count = detail::json_integer<std::int64_t>(f.at("parameter_count"));
      mf.parameter_bytes = detail::json_integer<std::int64_t>(f.at("parameter_bytes"));
      mf.gradient_bytes = detail::json_integer<std::int64_t>(f.at("gradient_bytes"));
      mf.optimizer_state_bytes = optional_from<std::int64_t>(f, "optimizer_state_bytes");
      m.models.push_back(std::move(mf));
    }
  }
  m.checkpointable_blocks = optional_from<std::int64_t>(j, "checkpointable_blocks");
  m.mixed_precision = j.at("mixed_precision").get<bool>();
  m.checkpointing = j.at("checkpointing").get<bool>();
  return m;
}

// Derived from the footprint (and memory peaks) on every write; readers may ignore it. A CPU run
// compares no GPU card (epoch_hardware_fit): its cards and card capacities are null.
json hardware_fit_json(const EpochSummary& e, const Environment& env) {
  const std::optional<HardwareFit> fit = epoch_hardware_fit(e, env);
  if (!fit) return nullptr;
  json variants = json::array();
  for (const FitVariant& v : fit->variants) {
    json cards = json::object();
    for (std::size_t i = 0; i < v.cards.size(); ++i)
      cards[std::string(kFitCards[i].label)] = std::string(fit_name(v.cards[i]));
    variants.push_back(
        {{"mixed_precision", v.mixed_precision},
         {"checkpointing", v.checkpointing},
         {"as_run", v.as_run},
         {"need_bytes", optional_json(v.need_bytes)},
         {"activation_bytes", v.need_bytes ? json(v.activation_bytes) : json(nullptr)},
         {"cast_cache_bytes", v.need_bytes ? json(v.cast_cache_bytes) : json(nullptr)},
         {"cards", v.need_bytes && fit->cards_compared ? cards : json(nullptr)},
         {"why_not_estimated", v.why}});
  }
  json capacities = json::object();
  for (const CardSize& c : kFitCards) capacities[std::string(c.label)] = c.capacity_bytes;
  return {{"overhead_bytes", fit->overhead_bytes},
          {"overhead_measured", fit->overhead_measured},
          {"fragmentation", fit->fragmentation},
          {"card_capacity_bytes", fit->cards_compared ? capacities : json(nullptr)},
          {"variants", variants}};
}

json epoch_json(const EpochSummary& e, const Environment& env) {
  json phases = json::object();
  for (const PhaseSummary& p : e.phases) {
    phases[std::string(phase_name(p.phase))] = {
        {"count", p.count},
        {"aborted", p.aborted},
        {"inferred", p.inferred},
        {"wall_ms_total", p.wall_ms_total},
        {"wall_ms_mean", p.wall_ms_mean()},
        {"wall_ms_max", p.wall_ms_max},
        {"device_ms_total", optional_json(p.device_ms_total)},
        {"device_memory", memory_json(p.device_memory)},
        {"rss_bytes_max", optional_json(p.rss_bytes_max)}};
  }
  json copies = json::array();
  for (const CopySummary& c : e.copies) {
    copies.push_back({{"direction", std::string(copy_direction_name(c.direction))},
                      {"pinned", c.pinned},
                      {"non_blocking", c.non_blocking},
                      {"count", c.count},
                      {"bytes", c.bytes},
                      {"wall_ms_total", c.wall_ms_total}});
  }
  json findings = json::array();
  for (const Finding& f : e.findings) findings.push_back(finding_json(f));
  return {{"index", e.index},
          {"steps", e.steps},
          {"failed_steps", e.failed_steps},
          {"samples", e.samples},
          {"wall_ms", e.wall_ms},
          {"step_ms_total", e.step_ms_total},
          {"step_ms_mean", e.step_ms_mean()},
          {"step_ms_max", e.step_ms_max},
          {"samples_per_second", e.samples_per_second()},
          {"ended_by_exception", e.ended_by_exception},
          {"phases", phases},
          {"copies", copies},
          {"device_memory", memory_json(e.device_memory)},
          {"peak_rss_bytes", optional_json(e.peak_rss_bytes)},
          {"telemetry", telemetry_json(e.telemetry)},
          {"footprint", footprint_json(e.footprint)},
          {"hardware_fit", hardware_fit_json(e, env)},
          {"mixed_precision", detail::mixed_precision_json(e.mixed_precision)},
          {"modules", detail::module_report_json(e.modules)},
          {"gpu", e.gpu ? detail::gpu_summary_to_json(*e.gpu) : json(nullptr)},
          {"flops", detail::flops_json(e.flops)},
          {"energy", detail::energy_json(e.energy)},
          {"series", detail::step_series_json(e.series)},
          {"findings", findings}};
}

CopyDirection direction_from(const std::string& s) {
  for (CopyDirection d : {CopyDirection::HostToDevice, CopyDirection::DeviceToHost,
                          CopyDirection::DeviceToDevice, CopyDirection::HostToHost}) {
    if (copy_direction_name(d) == s) return d;
  }
  throw Error(fmt::format("unknown copy direction '{}'", s));
}

EpochSummary epoch_from(const json& j) {
  EpochSummary e;
  e.index = detail::json_integer<std::int64_t>(j.at("index"));
  e.steps = detail::json_integer<std::int64_t>(j.at("steps"));
  e.failed_steps = detail::json_integer<std::int64_t>(j.at("failed_steps"));
  e.samples = detail::json_integer<std::int64_t>(j.at("samples"));
  e.wall_ms = j.at("wall_ms").get<double>();
  e.step_ms_total = j.at("step_ms_total").get<double>();
  e.step_ms_max = j.at("step_ms_max").get<double>();
  e.ended_by_exception = j.at("ended_by_exception").get<bool>();
  for (Phase p : kAllPhases) {
    const json& pj = j.at("phases").at(std::string(phase_name(p)));
    PhaseSummary& s = e.phases[static_cast<std::size_t>(p)];
    s.phase = p;
    s.count = detail::json_integer<std::int64_t>(pj.at("count"));
    s.aborted = detail::json_integer<std::int64_t>(pj.at("aborted"));
    s.inferred = pj.at("inferred").get<bool>();
    s.wall_ms_total = pj.at("wall_ms_total").get<double>();
    s.wall_ms_max = pj.at("wall_ms_max").get<double>();
    s.device_ms_total = optional_from<double>(pj, "device_ms_total");
    s.device_memory = memory_from(pj, "device_memory");
    s.rss_bytes_max = optional_from<std::int64_t>(pj, "rss_bytes_max");
  }
  for (const json& c : j.at("copies")) {
    e.copies.push_back(CopySummary{
        direction_from(c.at("direction").get<std::string>()), c.at("pinned").get<bool>(),
        c.at("non_blocking").get<bool>(), detail::json_integer<std::int64_t>(c.at("count")),
        detail::json_integer<std::int64_t>(c.at("bytes")), c.at("wall_ms_total").get<double>()});
  }
  e.device_memory = memory_from(j, "device_memory");
  e.peak_rss_bytes = optional_from<std::int64_t>(j, "peak_rss_bytes");
  e.telemetry = telemetry_from(j);
  e.footprint = footprint_from(j);
  e.mixed_precision = detail::mixed_precision_from(j);
  e.modules = detail::module_report_from(j);
  if (auto g = j.find("gpu"); g != j.end() && !g->is_null())
    e.gpu = detail::gpu_summary_from_json(*g);
  e.flops = detail::flops_from(j);
  e.energy = detail::energy_from(j);
  e.series = detail::step_series_from(j);
  for (const json& fj : j.at("findings")) e.findings.push_back(detail::finding_from(fj));
  return e;
}

// The live report's first line says this (docs/report-schema.md, "report journal").
constexpr const char* kJournalSchema = "fathom.report.journal";

}  // namespace

namespace detail {
// Both readers end here: the document, or the one the journal's lines make up.
RunReport report_from_json(const json& j, const std::string& source_name);
}  // namespace detail

namespace detail {

void write_json_report(const RunReport& head, const EachEpoch& epochs, TextSink& out) {
  // The document as one dump would write it, built an epoch at a time: the tree of one epoch is
  // in memory at once, not the run's (issue 24: the session's end held the whole run as a JSON
  // tree, a transient several times the report's size).
  json j = {{"schema", "fathom.report"},
            {"schema_version", head.schema_version},
            {"run_name", head.run_name},
            {"environment", environment_json(head.environment)},
            {"epochs", json::array()}};
  // Kernel, op and module names come from drivers and traces: invalid UTF-8 is replaced (U+FFFD)
  // rather than losing the report.
  const std::string frame = j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  const std::string placeholder = "\"epochs\": []";
  const std::size_t array_at = frame.find(placeholder) + placeholder.size() - 2;
  out.write(std::string_view(frame).substr(0, array_at));
  bool any = false;
  std::string indented;
  epochs([&](const EpochSummary& e) {
    const std::string one =
        epoch_json(e, head.environment).dump(2, ' ', false, json::error_handler_t::replace);
    indented.assign(any ? ",\n    " : "[\n    ");  // the array's items sit two levels deep
    for (char c : one) {
      indented += c;
      if (c == '\n') indented += "    ";
    }
    out.write(indented);
    any = true;
  });
  out.write(any ? "\n  ]" : "[]");
  out.write(std::string_view(frame).substr(array_at + 2));
}

}  // namespace detail

std::string format_json_report(const RunReport& report) {
  std::string out;
  StringSink sink(out);
  detail::write_json_report(
      report,
      [&](const std::function<void(const EpochSummary&)>& each) {
        for (const EpochSummary& e : report.epochs) each(e);
      },
      sink);
  return out;
}

RunReport parse_json_report(const std::string& text, const std::string& source_name) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    throw Error(fmt::format("{} is not valid JSON (truncated or corrupted?)", source_name));
  }
  return detail::report_from_json(j, source_name);
}

namespace detail {

RunReport report_from_json(const json& j, const std::string& source_name) {
  const auto schema = j.is_object() ? j.find("schema") : j.end();
  if (!j.is_object() || schema == j.end() || *schema != "fathom.report") {
    throw Error(
        fmt::format("{} is not a fathom report (no \"schema\": \"fathom.report\")", source_name));
  }
  const auto v = j.find("schema_version");
  const std::int64_t version = v != j.end() && v->is_number_integer() ? v->get<std::int64_t>() : -1;
  if (version != kReportSchemaVersion) {
    throw Error(fmt::format("{} has report schema version {}; this fathom reads version {}",
                            source_name, version, kReportSchemaVersion));
  }
  try {
    RunReport r;
    r.schema_version = version;
    r.run_name = j.at("run_name").get<std::string>();
    const json& ej = j.at("environment");
    Environment& env = r.environment;
    env.fathom_version = ej.at("fathom_version").get<std::string>();
    env.torch_version = ej.at("torch_version").get<std::string>();
    env.device = ej.at("device").get<std::string>();
    env.device_name = ej.at("device_name").get<std::string>();
    env.device_memory_bytes = optional_from<std::int64_t>(ej, "device_memory_bytes");
    env.hostname = ej.at("hostname").get<std::string>();
    env.pid = detail::json_integer<std::int64_t>(ej.at("pid"));
    env.started_at = ej.at("started_at").get<std::string>();
    read_run_kind(ej, env);
    env.nvtx = ej.at("nvtx").get<std::string>();
    for (const json& u : ej.at("not_measured")) env.not_measured.push_back(unmeasured_from(u));
    // The place of a problem: which epoch (nlohmann's messages name the type, not the path).
    const json& epochs = j.at("epochs");
    for (std::size_t i = 0; i < epochs.size(); ++i) {
      try {
        r.epochs.push_back(epoch_from(epochs.at(i)));
      } catch (const json::exception& e) {
        throw Error(fmt::format("epochs[{}]: {}", i, e.what()));
      } catch (const Error& e) {
        throw Error(fmt::format("epochs[{}]: {}", i, std::string(e.what()).substr(8)));
      }
    }
    return r;
  } catch (const json::exception& e) {
    throw Error(fmt::format("{} is not a valid fathom report: {}", source_name, e.what()));
  } catch (const Error& e) {
    throw Error(fmt::format("{} is not a valid fathom report: {}", source_name,
                            std::string(e.what()).substr(8)));
  }
}

}  // namespace detail

// --- the report journal: the live report, one line per ended epoch ------------------------------

std::string format_journal_header(const RunReport& report) {
  json j = {{"schema", kJournalSchema},
            {"schema_version", report.schema_version},
            {"run_name", report.run_name},
            {"environment", environment_json(report.environment)}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string format_journal_epoch(const EpochSummary& epoch, const Environment& environment) {
  // The environment rides with each epoch: extensions fill it in as the run goes (the device's
  // name at the first step, what went unmeasured), and it is a few hundred bytes, not a history.
  json j = {{"environment", environment_json(environment)},
            {"epoch", epoch_json(epoch, environment)}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

namespace detail {

EpochSummary parse_journal_epoch(std::string_view line, const std::string& source_name) {
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  const auto epoch = j.is_object() ? j.find("epoch") : j.end();
  if (epoch == j.end())
    throw Error(
        fmt::format("{}: a line is not a fathom report journal's epoch (corrupted?)", source_name));
  try {
    return epoch_from(*epoch);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{} is not a valid fathom report journal: {}", source_name, e.what()));
  }
}

}  // namespace detail

RunReport parse_report_journal(const std::string& text, const std::string& source_name) {
  // A line is complete once its newline is written; a kill mid-append leaves a last line without
  // one, which is an epoch that never finished reaching the disk: left out, the rest is whole.
  const std::size_t complete = text.rfind('\n');
  if (complete == std::string::npos)
    throw Error(fmt::format("{} holds no complete header line; it is not a fathom report journal",
                            source_name));
  json document;
  json epochs = json::array();
  std::size_t begin = 0;
  for (int line = 1; begin <= complete; ++line) {
    const std::size_t end = text.find('\n', begin);
    const std::string_view row(text.data() + begin, end - begin);
    begin = end + 1;
    if (row.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    json j = json::parse(row, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object())
      throw Error(fmt::format("{} line {} is not a JSON object (corrupted?)", source_name, line));
    if (document.is_null()) {
      const auto schema = j.find("schema");
      if (schema == j.end() || *schema != kJournalSchema)
        throw Error(
            fmt::format("{} is not a fathom report journal (no \"schema\": \"{}\" on its "
                        "first line)",
                        source_name, kJournalSchema));
      document = {{"schema", "fathom.report"},
                  {"schema_version", j.value("schema_version", json(nullptr))},
                  {"run_name", j.value("run_name", json(nullptr))},
                  {"environment", j.value("environment", json(nullptr))}};
      continue;
    }
    const auto epoch = j.find("epoch");
    const auto environment = j.find("environment");
    if (epoch == j.end() || environment == j.end())
      throw Error(
          fmt::format("{} line {} has no \"epoch\" and \"environment\"", source_name, line));
    epochs.push_back(std::move(*epoch));
    document["environment"] = std::move(*environment);
  }
  if (document.is_null())
    throw Error(
        fmt::format("{} holds no header line; it is not a fathom report journal", source_name));
  document["epochs"] = std::move(epochs);
  return detail::report_from_json(document, source_name);
}

}  // namespace fathom
