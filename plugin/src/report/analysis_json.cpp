#include "report/analysis_json.h"

#include <fathom/error.h>
#include <fathom/report_writers.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "base/json_number.h"
#include "report/gpu_summary_json.h"
#include "report/json_helpers.h"

namespace fathom {
namespace {

using nlohmann::json;

json nsight_json(const NsightExportInfo& i) {
  json range_names = json::array();
  for (const auto& r : i.range_names)
    range_names.push_back({{"name", r.name}, {"count", r.count}, {"total_ns", r.total_ns}});
  return {{"nsys_version", i.nsys_version},
          {"rows", i.rows},
          {"skipped_rows", i.skipped_rows},
          {"skipped", i.skipped},
          {"fathom_ranges", i.fathom_ranges},
          {"op_ranges", i.op_ranges},
          {"other_domain_ranges", i.other_domain_ranges},
          {"devices", i.devices},
          {"device_table", i.device_table},
          {"kernel_table", i.kernel_table},
          {"nvtx_ranges", i.nvtx_ranges},
          {"range_names", range_names}};
}

NsightExportInfo nsight_from(const json& j) {
  NsightExportInfo i;
  i.nsys_version = j.at("nsys_version").get<std::string>();
  i.rows = detail::json_integer<std::int64_t>(j.at("rows"));
  i.skipped_rows = detail::json_integer<std::int64_t>(j.at("skipped_rows"));
  i.skipped = j.at("skipped").get<std::vector<std::string>>();
  i.fathom_ranges = detail::json_integer<std::int64_t>(j.at("fathom_ranges"));
  i.op_ranges = detail::json_integer<std::int64_t>(j.at("op_ranges"));
  i.other_domain_ranges = detail::json_integer<std::int64_t>(j.at("other_domain_ranges"));
  for (const json& d : j.at("devices")) i.devices.push_back(detail::json_integer<std::int32_t>(d));
  i.device_table = j.at("device_table").get<bool>();
  // Added later: absent in older analyses, which measured kernels whenever they had any.
  i.kernel_table = j.value("kernel_table", true);
  i.nvtx_ranges = detail::json_integer<std::int64_t>(j.value("nvtx_ranges", json(0)));
  for (const json& r : j.value("range_names", json::array()))
    i.range_names.push_back({r.at("name").get<std::string>(),
                             detail::json_integer<std::int64_t>(r.at("count")),
                             detail::json_integer<std::int64_t>(r.at("total_ns"))});
  return i;
}

}  // namespace

std::string format_analysis_json(const AnalysisDocument& d) {
  json j = {{"schema", "fathom.analysis"},
            {"schema_version", kAnalysisSchemaVersion},
            {"input", d.input},
            {"gpu", detail::gpu_summary_to_json(d.gpu)}};
  json devices = json::array(), findings = json::array();
  for (const DeviceAnalysis& a : d.devices)
    devices.push_back({{"device", a.device}, {"gpu", detail::gpu_summary_to_json(a.gpu)}});
  for (const Finding& f : d.findings) findings.push_back(detail::finding_json(f));
  j["devices"] = devices;
  j["findings"] = findings;
  j["nsight"] = d.nsight ? nsight_json(*d.nsight) : json(nullptr);
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
    AnalysisDocument d;
    d.input = j.at("input").get<std::string>();
    d.gpu = detail::gpu_summary_from_json(j.at("gpu"));
    if (auto it = j.find("devices"); it != j.end())
      for (const json& x : *it)
        d.devices.push_back({detail::json_integer<std::int32_t>(x.at("device")),
                             detail::gpu_summary_from_json(x.at("gpu"))});
    if (auto it = j.find("findings"); it != j.end())
      for (const json& f : *it) d.findings.push_back(detail::finding_from(f));
    if (auto it = j.find("nsight"); it != j.end() && !it->is_null()) d.nsight = nsight_from(*it);
    return d;
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
