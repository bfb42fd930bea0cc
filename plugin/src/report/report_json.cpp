// JSON form of the report model. The schema is documented in docs/report-schema.md; a change to
// a field's meaning bumps kReportSchemaVersion.
#include <fathom/error.h>
#include <fathom/hardware_fit.h>
#include <fathom/report_writers.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "analyze/fit_hardware.h"
#include "base/json_fields.h"
#include "base/json_number.h"
#include "report/achievement_json.h"
#include "report/gpu_summary_json.h"
#include "report/mixed_precision_report.h"
#include "report/module_report_writers.h"
#include "report/report_stream.h"
#include "report/step_series_json.h"

namespace fathom::detail {

// --- the model's JSON, one description per type (json_fields.h) ---------------------------------

template <>
struct JsonCodec<CopyDirection> {
  static nlohmann::json write(CopyDirection d) { return std::string(copy_direction_name(d)); }
  static void read(const nlohmann::json& j, CopyDirection& d) {
    d = enum_from_name(j,
                       {CopyDirection::HostToDevice, CopyDirection::DeviceToHost,
                        CopyDirection::DeviceToDevice, CopyDirection::HostToHost},
                       copy_direction_name, "copy direction");
  }
};

template <typename V>
static void fields(V& v, DeviceMemoryPeak& m) {
  v("peak_allocated_bytes", m.peak_allocated_bytes);
  v("peak_reserved_bytes", m.peak_reserved_bytes);
  v("alloc_retries", m.alloc_retries);
  v("ooms", m.ooms);
}

template <typename V>
static void fields(V& v, ThrottleShare& t) {
  v("reason", t.reason);
  v("share", t.share);
}

template <typename V>
static void fields(V& v, PcieLinkState& l) {
  v.since("gen", l.gen);
  v.since("width", l.width);
  v.since("max_gen", l.max_gen);
  v.since("max_width", l.max_width);
  v("under_load", l.under_load);
}

template <typename V>
static void fields(V& v, TelemetryPoint& p) {
  v("t_s", p.t_s);
  v.since("gpu_utilization_pct", p.gpu_utilization_pct);
  v.since("memory_used_bytes", p.memory_used_bytes);
  v.since("power_w", p.power_w);
  v.since("sm_clock_mhz", p.sm_clock_mhz);
  v.since("pcie_tx_bytes_per_s", p.pcie_tx_bytes_per_s);
  v.since("pcie_rx_bytes_per_s", p.pcie_rx_bytes_per_s);
}

template <typename V>
static void fields(V& v, DeviceTelemetry& t) {
  v("source", t.source);
  v("device_name", t.device_name);
  v("samples", t.samples);
  v("duration_s", t.duration_s);
  v.since("gpu_utilization_pct_mean", t.gpu_utilization_pct_mean);
  v.since("gpu_utilization_pct_max", t.gpu_utilization_pct_max);
  v.since("memory_utilization_pct_mean", t.memory_utilization_pct_mean);
  v.since("memory_used_bytes_max", t.memory_used_bytes_max);
  v.since("memory_total_bytes", t.memory_total_bytes);
  v.since("power_w_mean", t.power_w_mean);
  v.since("power_w_max", t.power_w_max);
  v.since("power_limit_w", t.power_limit_w);
  v.since("energy_j", t.energy_j);
  v.since("sm_clock_mhz_mean", t.sm_clock_mhz_mean);
  v.since("sm_clock_mhz_max", t.sm_clock_mhz_max);
  v.since("memory_clock_mhz_mean", t.memory_clock_mhz_mean);
  v("throttle", t.throttle);
  v("pcie", t.pcie);
  v.since("pcie_tx_bytes_per_s_mean", t.pcie_tx_bytes_per_s_mean);
  v.since("pcie_rx_bytes_per_s_mean", t.pcie_rx_bytes_per_s_mean);
  v.since("pcie_rx_bytes_per_s_max", t.pcie_rx_bytes_per_s_max);
  v.since("nvlinks_active", t.nvlinks_active);
  v("series", t.series);
  v("not_measured", t.not_measured);
}

template <typename V>
static void fields(V& v, ModelFootprint& f) {
  v("name", f.name);
  v("parameter_count", f.parameter_count);
  v("parameter_bytes", f.parameter_bytes);
  v("gradient_bytes", f.gradient_bytes);
  v.since("optimizer_state_bytes", f.optimizer_state_bytes);
}

template <typename V>
static void fields(V& v, MemoryFootprint& m) {
  v("parameter_count", m.parameter_count);
  v("parameter_bytes", m.parameter_bytes);
  v("gradient_bytes", m.gradient_bytes);
  v.since("optimizer_state_bytes", m.optimizer_state_bytes);
  v.since("activation_bytes", m.activation_bytes);
  // Why there are none: null once they were measured.
  if constexpr (V::writing)
    v.null_unless(!m.activation_bytes, "activation_bytes_why", m.activation_why);
  else
    v.since("activation_bytes_why", m.activation_why);
  v.since("checkpointable_blocks", m.checkpointable_blocks);
  v("mixed_precision", m.mixed_precision);
  v("checkpointing", m.checkpointing);
  v.since("models", m.models);  // absent in reports written before it
}

template <typename V>
static void fields(V& v, PhaseSummary& p) {
  v("count", p.count);
  v("aborted", p.aborted);
  v("inferred", p.inferred);
  v("wall_ms_total", p.wall_ms_total);
  if constexpr (V::writing) v("wall_ms_mean", p.wall_ms_mean());  // derived: readers skip it
  v("wall_ms_max", p.wall_ms_max);
  v.since("device_ms_total", p.device_ms_total);
  v.since("device_memory", p.device_memory);
  v.since("rss_bytes_max", p.rss_bytes_max);
}

// An epoch's phases: an object keyed by phase name, every phase there.
template <>
struct JsonCodec<std::array<PhaseSummary, kPhaseCount>> {
  static nlohmann::json write(const std::array<PhaseSummary, kPhaseCount>& phases) {
    nlohmann::json out = nlohmann::json::object();
    for (const PhaseSummary& p : phases) out[std::string(phase_name(p.phase))] = write_json(p);
    return out;
  }
  static void read(const nlohmann::json& j, std::array<PhaseSummary, kPhaseCount>& phases) {
    for (Phase p : kAllPhases) {
      PhaseSummary& s = phases[static_cast<std::size_t>(p)];
      read_json(j.at(std::string(phase_name(p))), s);
      s.phase = p;
    }
  }
};

template <typename V>
static void fields(V& v, CopySummary& c) {
  v("direction", c.direction);
  v("pinned", c.pinned);
  v("non_blocking", c.non_blocking);
  v("count", c.count);
  v("bytes", c.bytes);
  v("wall_ms_total", c.wall_ms_total);
}

// The hardware fit is derived from the epoch and its environment at every write (readers skip
// it): epoch_json adds it.
template <typename V>
static void fields(V& v, EpochSummary& e) {
  v("index", e.index);
  v("steps", e.steps);
  v("failed_steps", e.failed_steps);
  v("samples", e.samples);
  v("wall_ms", e.wall_ms);
  v("step_ms_total", e.step_ms_total);
  v("step_ms_max", e.step_ms_max);
  if constexpr (V::writing) {
    v("step_ms_mean", e.step_ms_mean());
    v("samples_per_second", e.samples_per_second());
  }
  v("ended_by_exception", e.ended_by_exception);
  v("phases", e.phases);
  v("copies", e.copies);
  v.since("device_memory", e.device_memory);
  v.since("peak_rss_bytes", e.peak_rss_bytes);
  // Sections a report written before them lacks: absent or null reads as not measured.
  v.since("telemetry", e.telemetry);
  v.since("footprint", e.footprint);
  v.since("mixed_precision", e.mixed_precision);
  v.since("modules", e.modules);
  v.since("gpu", e.gpu);
  v.since("flops", e.flops);
  v.since("energy", e.energy);
  if constexpr (V::writing)
    v("series", e.series ? std::optional<StepSeries>(reported_series(*e.series)) : std::nullopt);
  else
    v.since("series", e.series);
  v("findings", e.findings);
}

template <>
struct JsonCodec<ReportOrigin> {
  static nlohmann::json write(ReportOrigin o) { return std::string(report_origin_name(o)); }
  static void read(const nlohmann::json& j, ReportOrigin& o) {
    const auto name = j.get<std::string>();
    const auto origin = report_origin_from_name(name);
    if (!origin)
      throw Error(fmt::format("environment.origin '{}' is not session or nsight export", name));
    o = *origin;
  }
};

template <>
struct JsonCodec<Mode> {
  static nlohmann::json write(Mode m) { return std::string(mode_name(m)); }
  static void read(const nlohmann::json& j, Mode& m) {
    const auto name = j.get<std::string>();
    const auto mode = mode_from_name(name);
    if (!mode)
      throw Error(fmt::format("environment.mode '{}' is not off, observe, suggest or auto", name));
    m = *mode;
  }
};

template <>
struct JsonCodec<LoopLanguage> {
  static nlohmann::json write(LoopLanguage l) { return std::string(loop_language_name(l)); }
  static void read(const nlohmann::json& j, LoopLanguage& l) {
    const auto name = j.get<std::string>();
    const auto language = loop_language_from_name(name);
    if (!language) throw Error(fmt::format("environment.language '{}' is not c++ or python", name));
    l = *language;
  }
};

template <typename V>
static void fields(V& v, Environment& e) {
  v("fathom_version", e.fathom_version);
  v("torch_version", e.torch_version);
  v("device", e.device);
  v("device_name", e.device_name);
  v.since("device_memory_bytes", e.device_memory_bytes);
  v("hostname", e.hostname);
  v("pid", e.pid);
  v("started_at", e.started_at);
  // Reports written before "origin" said an export's origin in "mode" ("nsight export"); before
  // "language", every loop was C++ (the default).
  const bool origin = v.since("origin", e.origin);
  if constexpr (!V::writing) {
    const nlohmann::json& mode = v.object().at("mode");
    if (mode == report_origin_name(ReportOrigin::NsightExport)) {
      if (!origin) e.origin = ReportOrigin::NsightExport;
    } else {
      v("mode", e.mode);
    }
  } else {
    v("mode", e.mode);
  }
  v("nvtx", e.nvtx);
  v.since("language", e.language);
  v("not_measured", e.not_measured);
}

// Derived from the footprint (and memory peaks) on every write; readers may ignore it. A CPU run
// compares no GPU card (epoch_hardware_fit): its cards and card capacities are null.
nlohmann::json hardware_fit_json(const EpochSummary& e, const Environment& env) {
  const std::optional<HardwareFit> fit = epoch_hardware_fit(e, env);
  if (!fit) return nullptr;
  nlohmann::json variants = nlohmann::json::array();
  for (const FitVariant& v : fit->variants) {
    nlohmann::json cards = nlohmann::json::object();
    for (std::size_t i = 0; i < v.cards.size(); ++i)
      cards[std::string(kFitCards[i].label)] = std::string(fit_name(v.cards[i]));
    variants.push_back(
        {{"mixed_precision", v.mixed_precision},
         {"checkpointing", v.checkpointing},
         {"as_run", v.as_run},
         {"need_bytes", write_json(v.need_bytes)},
         {"activation_bytes",
          v.need_bytes ? nlohmann::json(v.activation_bytes) : nlohmann::json(nullptr)},
         {"cast_cache_bytes",
          v.need_bytes ? nlohmann::json(v.cast_cache_bytes) : nlohmann::json(nullptr)},
         {"cards", v.need_bytes && fit->cards_compared ? cards : nlohmann::json(nullptr)},
         {"why_not_estimated", v.why}});
  }
  nlohmann::json capacities = nlohmann::json::object();
  for (const CardSize& c : kFitCards) capacities[std::string(c.label)] = c.capacity_bytes;
  return {{"overhead_bytes", fit->overhead_bytes},
          {"overhead_measured", fit->overhead_measured},
          {"fragmentation", fit->fragmentation},
          {"card_capacity_bytes", fit->cards_compared ? capacities : nlohmann::json(nullptr)},
          {"variants", variants}};
}

nlohmann::json epoch_json(const EpochSummary& e, const Environment& env) {
  nlohmann::json j = write_json(e);
  j["hardware_fit"] = hardware_fit_json(e, env);
  return j;
}

EpochSummary epoch_from(const nlohmann::json& j) { return read_json<EpochSummary>(j); }

nlohmann::json environment_json(const Environment& e) { return write_json(e); }

}  // namespace fathom::detail

namespace fathom {
namespace {

using detail::environment_json;
using detail::epoch_from;
using detail::epoch_json;
using nlohmann::json;

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
    r.environment = read_json<Environment>(j.at("environment"));
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
