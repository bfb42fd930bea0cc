// The self-contained HTML report: one file, inline CSS, inline SVG charts and a small inline
// script (epoch tabs, sortable tables). Nothing is fetched from the network. Every string that
// comes from the report (run, device, kernel, op and module names, findings) goes through
// html::escape; colors and numbers are fathom's own.
#include <fathom/gpu_summary.h>
#include <fathom/hardware_fit.h>
#include <fathom/report_writers.h>
#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "analyze/tensor_core_analysis.h"
#include "analyze/transfer_analysis.h"
#include "base/bytes_text.h"
#include "report/html_charts.h"
#include "report/no_findings_text.h"
#include "report/report_html_parts.h"
#include "report/report_stream.h"

namespace fathom {
namespace {

using namespace html_report;
using detail::bytes_text;
using html::escape;

constexpr const char* kStyle = R"css(
:root{--fg:#1d232b;--muted:#5f6b7a;--line:#dde3ea;--bg:#f6f8fa;--crit:#b42318;--warn:#b54708;--info:#175cd3}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);margin:0;background:#fff}
header{background:#12263a;color:#fff;padding:16px 28px}
header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#c9d6e3}
main{padding:8px 28px 40px;max-width:1180px}
h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;margin:6px 0 12px;font-variant-numeric:tabular-nums}
th,td{border-bottom:1px solid var(--line);padding:4px 10px;text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left}
th{background:var(--bg);cursor:pointer;user-select:none}
td.text{text-align:left;white-space:normal}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(460px,1fr));gap:16px}
.chart-figure{margin:0;border:1px solid var(--line);border-radius:6px;padding:10px}
.chart-figure figcaption{font-weight:600;margin-bottom:4px}
svg.chart{width:100%;height:auto;display:block}
svg .grid{stroke:#e8ecf0;stroke-width:1}
svg .tick,svg .unit{font-size:11px;fill:var(--muted)}
svg .marker{stroke:#222;stroke-width:2.5;stroke-dasharray:4 2}
.legend{list-style:none;padding:0;margin:6px 0 0;display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px;color:var(--muted)}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px;vertical-align:-1px}
.caption{font-size:12px;color:var(--muted);margin:6px 0 0}
.not-measured-text{color:var(--muted);font-style:italic;margin:24px 0;text-align:center}
.tabs{display:flex;gap:6px;flex-wrap:wrap;margin:16px 0 0}
.tabs button{border:1px solid var(--line);background:var(--bg);padding:5px 12px;border-radius:5px;cursor:pointer;font:inherit}
.tabs button[aria-selected=true]{background:#12263a;color:#fff;border-color:#12263a}
.finding{border:1px solid var(--line);border-left:5px solid var(--info);border-radius:6px;padding:8px 14px;margin:10px 0}
.finding.critical{border-left-color:var(--crit)}.finding.warning{border-left-color:var(--warn)}
.finding h4{margin:2px 0 6px;font-size:15px}
.badge{font-size:11px;text-transform:uppercase;font-weight:700;letter-spacing:.04em;margin-right:8px}
.critical .badge{color:var(--crit)}.warning .badge{color:var(--warn)}.info .badge{color:var(--info)}
.id{color:var(--muted);font-size:12px;font-weight:400}
.applied{background:#dcfae6;color:#067647;font-size:11px;padding:1px 6px;border-radius:4px;margin-left:6px}
pre{background:#0f1720;color:#e6edf3;padding:10px 12px;border-radius:5px;overflow:auto;font-size:12.5px}
.kv td{text-align:left}
.stats{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}
.stat{background:var(--bg);border-radius:6px;padding:8px 14px;min-width:130px}
.stat b{display:block;font-size:18px}
.stat span{color:var(--muted);font-size:12px}
.muted{color:var(--muted)}
)css";

// Epoch tabs (the last epoch shown first), sortable tables, and a marker that tells a headless
// browser (tests/plugin/report_html_render_test) the script ran to its end.
constexpr const char* kScript = R"js(
(function () {
  'use strict';
  var tabs = Array.prototype.slice.call(document.querySelectorAll('[data-epoch-tab]'));
  var panels = Array.prototype.slice.call(document.querySelectorAll('[data-epoch-panel]'));
  function show(id) {
    panels.forEach(function (p) { p.hidden = p.getAttribute('data-epoch-panel') !== id; });
    tabs.forEach(function (t) {
      t.setAttribute('aria-selected', String(t.getAttribute('data-epoch-tab') === id));
    });
  }
  tabs.forEach(function (t) {
    t.addEventListener('click', function () { show(t.getAttribute('data-epoch-tab')); });
  });
  if (tabs.length) show(tabs[tabs.length - 1].getAttribute('data-epoch-tab'));
  function cellValue(td) {
    var v = td.getAttribute('data-sort');
    if (v !== null) return parseFloat(v);
    var n = parseFloat(td.textContent);
    return isNaN(n) ? td.textContent : n;
  }
  Array.prototype.forEach.call(document.querySelectorAll('table.sortable'), function (table) {
    Array.prototype.forEach.call(table.querySelectorAll('th'), function (th, col) {
      th.addEventListener('click', function () {
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var asc = th.getAttribute('data-order') !== 'asc';
        rows.sort(function (a, b) {
          var x = cellValue(a.cells[col]), y = cellValue(b.cells[col]);
          return (x > y ? 1 : x < y ? -1 : 0) * (asc ? 1 : -1);
        });
        th.setAttribute('data-order', asc ? 'asc' : 'desc');
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  document.documentElement.setAttribute('data-fathom-rendered',
      String(document.querySelectorAll('svg.chart').length));
})();
)js";

// --- epoch-level tables and findings ------------------------------------------------------------

std::string stats(const EpochSummary& e) {
  std::string out = "<div class=\"stats\">";
  auto stat = [&](std::string value, const char* label) {
    fmt::format_to(std::back_inserter(out), "<div class=\"stat\"><b>{}</b><span>{}</span></div>",
                   escape(value), label);
  };
  stat(fmt::format("{:.2f} ms", e.step_ms_mean()), "step time, mean");
  stat(fmt::format("{:.1f}", e.samples_per_second()), "samples per second");
  stat(fmt::format("{}", e.steps), e.failed_steps ? "steps (some failed)" : "steps");
  stat(fmt::format("{:.2f} s", e.wall_ms / 1000), "epoch wall time");
  if (e.device_memory)
    stat(bytes_text(e.device_memory->peak_reserved_bytes), "peak device memory reserved");
  if (e.telemetry && e.telemetry->energy_j)
    stat(fmt::format("{:.1f} kJ", *e.telemetry->energy_j / 1000), "GPU energy");
  return out + "</div>";
}

std::string findings_html(const EpochSummary& e, const Environment& env) {
  if (e.findings.empty())
    return "<p class=\"muted\">Findings: " + std::string(detail::no_findings_text(env)) + ".</p>";
  std::string out;
  for (const Finding& f : e.findings) {
    const std::string sev(severity_name(f.severity));
    // A fix fathom applied is badged so, not with the severity of the problem it fixed.
    const std::string badge = f.applied ? "applied" : sev;
    fmt::format_to(std::back_inserter(out),
                   "<section class=\"finding {}\"><h4><span class=\"badge\">{}</span>{} <span "
                   "class=\"id\">{}</span>{}</h4>",
                   sev, badge, escape(f.title), escape(f.id),
                   f.applied ? "<span class=\"applied\">applied by fathom</span>" : "");
    if (!f.evidence.empty()) {
      out += "<table class=\"kv\"><tbody>";
      for (const Evidence& ev : f.evidence) row(out, {escape(ev.name), escape(ev.value)});
      out += "</tbody></table>";
    }
    if (!f.why.empty()) fmt::format_to(std::back_inserter(out), "<p>{}</p>", escape(f.why));
    if (!f.estimated_gain.empty())
      fmt::format_to(std::back_inserter(out), "<p><b>Estimated gain:</b> {}</p>",
                     escape(f.estimated_gain));
    if (!f.fix.empty())
      fmt::format_to(std::back_inserter(out), "<pre><code>{}</code></pre>", escape(f.fix));
    out += "</section>";
  }
  return out;
}

std::string epoch_panel(const EpochSummary& e, const Environment& env) {
  std::string out = fmt::format("<section class=\"epoch\" data-epoch-panel=\"{}\">", e.index);
  fmt::format_to(std::back_inserter(out), "<h2>Epoch {}{}</h2>", e.index,
                 e.ended_by_exception ? " (ended by an exception)" : "");
  out += stats(e);
  out += "<div class=\"charts\">";
  out += tensor_core_chart(e, env);
  out += transfer_chart(e, env);
  out += busy_chart(e, env);
  out += step_series_charts(e);
  out += "</div>";
  fmt::format_to(std::back_inserter(out), "<h3>Findings ({})</h3>", e.findings.size());
  out += findings_html(e, env);
  out += "<h3>Phases</h3>";
  out += phase_table(e);
  out += copies_table(e);
  out += top_kernels_table(e);
  out += telemetry_table(e);
  out += achievement_table(e);
  out += hardware_fit_table(e, env);
  return out + "</section>";
}

}  // namespace

namespace detail {

void HtmlOverview::add(const EpochSummary& e) {
  digests.push_back(digest_of(e));
  top.assign(e.findings.begin(), e.findings.begin() + std::min<std::size_t>(3, e.findings.size()));
}

void write_html_report(const RunReport& r, const EachEpoch& epochs, TextSink& sink,
                       HtmlOverview* gathered) {
  const Environment& env = r.environment;
  std::string out =
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">";
  fmt::format_to(std::back_inserter(out),
                 "<title>fathom report: {}</title><style>{}</style></head><body>",
                 escape(r.run_name), kStyle);
  fmt::format_to(
      std::back_inserter(out),
      "<header><h1>fathom report: {}</h1><p>{}{} | fathom {} | torch {} | mode {} | "
      "started {} | host {} (pid {})</p></header><main>",
      escape(r.run_name), escape(env.device),
      env.device_name.empty() ? "" : " (" + escape(env.device_name) + ")",
      escape(env.fathom_version), escape(env.torch_version.empty() ? "-" : env.torch_version),
      escape(std::string(env.mode_text())), escape(env.started_at), escape(env.hostname), env.pid);
  // The first visit (unless the caller made it): the few numbers of each epoch that the overview
  // and its charts read, and the last epoch's top findings; the second writes each epoch's panel
  // as it comes.
  HtmlOverview own;
  if (!gathered) {
    epochs([&](const EpochSummary& e) { own.add(e); });
    gathered = &own;
  }
  std::vector<EpochDigest>& digests = gathered->digests;
  const std::vector<Finding>& top = gathered->top;
  if (digests.empty()) {
    out += "<p>No epoch has ended in this report.</p>";
  } else {
    // Top findings of the last epoch first: what a reader came for.
    fmt::format_to(std::back_inserter(out), "<h2>Top findings (epoch {})</h2>",
                   digests.back().index);
    if (top.empty()) {
      out += "<p class=\"muted\">Findings: " + std::string(detail::no_findings_text(env)) + ".</p>";
    } else {
      out += "<ol>";
      for (const Finding& f : top) {
        fmt::format_to(std::back_inserter(out), "<li><b>{}</b>: {}{}</li>",
                       severity_name(f.severity), escape(f.title),
                       f.estimated_gain.empty() ? "" : " — " + escape(f.estimated_gain));
      }
      out += "</ol>";
    }
    out += "<h2>Run overview</h2>";
    table_head(out, {"epoch", "steps", "samples/s", "step ms mean", "step ms max", "findings"});
    for (const EpochDigest& e : digests) {
      if (out.size() > 60000) {
        sink.write(out);
        out.clear();
      }
      row(out, {fmt::format("{}", e.index), fmt::format("{}", e.steps),
                fmt::format("{:.1f}", e.samples_per_second), fmt::format("{:.2f}", e.step_ms_mean),
                fmt::format("{:.2f}", e.step_ms_max), fmt::format("{}", e.findings)});
    }
    out += "</tbody></table><div class=\"charts\">";
    sink.write(out);  // a long run's overview is megabytes: out in pieces, not one string
    out = step_time_chart(digests);
    sink.write(out);
    out = memory_chart(digests, env);
    out += "</div>";
    out += "<nav class=\"tabs\" aria-label=\"epochs\">";
    for (const EpochDigest& e : digests)
      fmt::format_to(
          std::back_inserter(out),
          "<button type=\"button\" data-epoch-tab=\"{}\" aria-selected=\"false\">epoch {}</button>",
          e.index, e.index);
    out += "</nav>";
    sink.write(out);
    out.clear();
    digests = {};
    epochs([&](const EpochSummary& e) {
      out = epoch_panel(e, env);
      sink.write(out);
    });
    out.clear();
  }
  if (!env.not_measured.empty()) {
    out += "<h2>Not measured in this run</h2><ul>";
    for (const Unmeasured& u : env.not_measured)
      fmt::format_to(std::back_inserter(out), "<li><b>{}</b>: {}</li>", escape(u.what),
                     escape(u.why));
    out += "</ul>";
  }
  fmt::format_to(
      std::back_inserter(out),
      "<p class=\"muted\">Report schema {}. Numbers are measured; what was not measured says "
      "so.</p></main><script>{}</script></body></html>\n",
      r.schema_version, kScript);
  sink.write(out);
}

}  // namespace detail

std::string format_html_report(const RunReport& r) {
  std::string out;
  StringSink sink(out);
  detail::write_html_report(
      r,
      [&](const std::function<void(const EpochSummary&)>& each) {
        for (const EpochSummary& e : r.epochs) each(e);
      },
      sink);
  return out;
}

}  // namespace fathom
