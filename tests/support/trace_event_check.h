#pragma once
// Checks a Chrome / Perfetto trace against the Trace Event Format, as the viewers read it: the
// JSON array form (its closing bracket optional, as the format allows for a killed writer) or the
// object form with "traceEvents"; every event an object with a known "ph", numeric pid, tid and
// ts (metadata events excepted), names where the phase needs one; B and E balanced on each
// thread, never an E without its B; and timestamps that never go back on one track.
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace fathom::test {

struct TraceCheck {
  std::vector<std::string> problems;  // empty: well-formed
  nlohmann::json events = nlohmann::json::array();
  bool closed = true;  // the array's closing bracket was there
  std::map<std::pair<std::int64_t, std::int64_t>, int> open_at_end;  // per (pid, tid), if any
};

inline TraceCheck check_trace_events(std::string text) {
  TraceCheck out;
  using nlohmann::json;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() && !text.empty() && text.front() == '[') {
    doc = json::parse(text + "\n]", nullptr, false);
    out.closed = false;
  }
  if (doc.is_discarded()) {
    out.problems.push_back("not JSON, even with the array's closing bracket added");
    return out;
  }
  if (doc.is_object()) doc = doc.value("traceEvents", json());
  if (!doc.is_array()) {
    out.problems.push_back("neither an array of events nor an object with traceEvents");
    return out;
  }
  out.events = doc;
  const std::set<std::string> known{"B", "E", "X", "i", "I", "M", "C",
                                    "b", "e", "n", "s", "t", "f"};
  std::map<std::pair<std::int64_t, std::int64_t>, int> depth;
  std::map<std::pair<std::int64_t, std::int64_t>, double> last_ts;
  for (std::size_t i = 0; i < doc.size(); ++i) {
    const json& e = doc[i];
    const std::string at = "event " + std::to_string(i) + ": ";
    if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string()) {
      out.problems.push_back(at + "no ph");
      continue;
    }
    const std::string ph = e["ph"];
    if (!known.count(ph)) out.problems.push_back(at + "unknown ph " + ph);
    if (!e.contains("pid") || !e["pid"].is_number_integer())
      out.problems.push_back(at + "no integer pid");
    if (!e.contains("tid") || !e["tid"].is_number_integer())
      out.problems.push_back(at + "no integer tid");
    if (ph != "E" && (!e.contains("name") || !e["name"].is_string()))
      out.problems.push_back(at + "no name");
    if (ph == "M") continue;
    if (!e.contains("ts") || !e["ts"].is_number()) {
      out.problems.push_back(at + "no numeric ts");
      continue;
    }
    if (ph == "X" && (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0))
      out.problems.push_back(at + "complete event without a duration >= 0");
    if (e.contains("args") && !e["args"].is_object())
      out.problems.push_back(at + "args not an object");
    if (!e["pid"].is_number_integer() || !e["tid"].is_number_integer()) continue;
    const auto track = std::make_pair(e["pid"].get<std::int64_t>(), e["tid"].get<std::int64_t>());
    const double ts = e["ts"].get<double>();
    if (auto it = last_ts.find(track); it != last_ts.end() && ts < it->second)
      out.problems.push_back(at + "ts " + std::to_string(ts) + " goes back on its track (was " +
                             std::to_string(it->second) + ")");
    last_ts[track] = ts;
    if (ph == "B") ++depth[track];
    if (ph == "E" && --depth[track] < 0) {
      out.problems.push_back(at + "E without its B");
      depth[track] = 0;
    }
  }
  for (const auto& [track, d] : depth)
    if (d != 0) out.open_at_end[track] = d;
  return out;
}

}  // namespace fathom::test
