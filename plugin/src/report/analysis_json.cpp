#include "report/analysis_json.h"

#include <fathom/error.h>
#include <fathom/report_writers.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "base/json_fields.h"
#include "base/json_number.h"
#include "report/gpu_summary_json.h"

namespace fathom::detail {

template <typename V>
static void fields(V& v, NsightExportInfo::RangeName& r) {
  v("name", r.name);
  v("count", r.count);
  v("total_ns", r.total_ns);
}

template <typename V>
static void fields(V& v, NsightExportInfo& i) {
  v("nsys_version", i.nsys_version);
  v("rows", i.rows);
  v("skipped_rows", i.skipped_rows);
  v("skipped", i.skipped);
  v("fathom_ranges", i.fathom_ranges);
  v("op_ranges", i.op_ranges);
  v("other_domain_ranges", i.other_domain_ranges);
  v("devices", i.devices);
  v("device_table", i.device_table);
  // Added later: absent in older analyses, which measured kernels whenever they had any.
  if constexpr (!V::writing) i.kernel_table = true;
  v.since("kernel_table", i.kernel_table);
  v.since("nvtx_ranges", i.nvtx_ranges);
  v.since("range_names", i.range_names);
}

template <typename V>
static void fields(V& v, DeviceAnalysis& d) {
  v("device", d.device);
  v("gpu", d.gpu);
}

// "schema" and "schema_version" are the document's frame (format_ and parse_analysis_json).
template <typename V>
static void fields(V& v, AnalysisDocument& d) {
  v("input", d.input);
  v("gpu", d.gpu);
  v.since("devices", d.devices);
  v.since("findings", d.findings);
  v.since("nsight", d.nsight);
}

}  // namespace fathom::detail

namespace fathom {

using nlohmann::json;

std::string format_analysis_json(const AnalysisDocument& d) {
  json j = detail::write_json(d);
  j["schema"] = "fathom.analysis";
  j["schema_version"] = kAnalysisSchemaVersion;
  return j.dump(2) + "\n";
}

bool is_analysis_json(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  auto s = j.find("schema");
  return s != j.end() && s->is_string() && s->get<std::string>() == "fathom.analysis";
}

AnalysisDocument parse_analysis_json(const std::string& text, const std::string& source_name) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    throw Error(fmt::format("{} is not valid JSON (truncated or corrupted?)", source_name));
  try {
    if (!j.is_object() || j.value("schema", "") != "fathom.analysis")
      throw Error(fmt::format("{} is not a fathom analysis (`fathom analyze --json` writes one)",
                              source_name));
    const int version = detail::json_integer<int>(j.at("schema_version"));
    if (version < 1 || version > kAnalysisSchemaVersion)
      throw Error(fmt::format("{} has analysis schema version {}; this fathom reads 1 to {}",
                              source_name, version, kAnalysisSchemaVersion));
    return detail::read_json<AnalysisDocument>(j);
  } catch (const json::exception& e) {
    throw Error(
        fmt::format("{} is not a fathom analysis of a known shape: {}", source_name, e.what()));
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.find(source_name) != std::string::npos) throw;
    throw Error(fmt::format("{}: {}", source_name, what.substr(8)));  // without "fathom: "
  }
}

}  // namespace fathom
