#include "report/html_charts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>

#include "base/terminal_text.h"

namespace fathom::html {
namespace {

constexpr double kWidth = 640;
constexpr double kHeight = 260;
constexpr double kLeft = 60, kRight = 16, kTop = 14, kBottom = 44;

std::string num(double v) {
  if (v == 0) return "0";
  if (std::fabs(v) >= 100) return fmt::format("{:.0f}", v);
  if (std::fabs(v) >= 10) return fmt::format("{:.1f}", v);
  return fmt::format("{:.2f}", v);
}

std::string axis_label(double v) { return fmt::format("{:g}", v); }

void y_axis(std::string& out, double top, double step, std::string_view unit, double plot_w) {
  const double plot_h = kHeight - kTop - kBottom;
  for (double v = 0; v <= top + step / 2; v += step) {
    const double y = kTop + plot_h * (1 - v / top);
    fmt::format_to(std::back_inserter(out),
                   "<line class=\"grid\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/>"
                   "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>",
                   kLeft, kLeft + plot_w, y, y, kLeft - 6, y + 4, axis_label(v));
  }
  fmt::format_to(std::back_inserter(out),
                 "<text class=\"unit\" x=\"12\" y=\"{:.1f}\" transform=\"rotate(-90 12 {:.1f})\" "
                 "text-anchor=\"middle\">{}</text>",
                 kTop + plot_h / 2, kTop + plot_h / 2, escape(unit));
}

std::string svg_open(std::string_view title, double height = kHeight) {
  return fmt::format(
      "<svg class=\"chart\" viewBox=\"0 0 {:.0f} {:.0f}\" role=\"img\" aria-label=\"{}\" "
      "xmlns=\"http://www.w3.org/2000/svg\">",
      kWidth, height, escape(title));
}

std::string legend(const std::vector<std::pair<std::string, std::string>>& items) {
  if (items.empty()) return {};
  std::string out = "<ul class=\"legend\">";
  for (const auto& [name, color] : items)
    fmt::format_to(std::back_inserter(out),
                   "<li><span class=\"swatch\" style=\"background:{}\"></span>{}</li>",
                   escape(color), escape(name));
  return out + "</ul>";
}

std::string figure(std::string_view title, const std::string& svg, const std::string& legend_html,
                   std::string_view caption) {
  std::string out =
      fmt::format("<figure class=\"chart-figure\"><figcaption>{}</figcaption>", escape(title));
  out += svg;
  out += legend_html;
  if (!caption.empty())
    fmt::format_to(std::back_inserter(out), "<p class=\"caption\">{}</p>", escape(caption));
  return out + "</figure>";
}

}  // namespace

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    // A right-to-left override in a kernel or module name would reorder the page around it.
    if (const std::size_t n = detail::bidi_control_at(text, i)) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      i += n - 1;
      continue;
    }
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::pair<double, double> nice_axis(double max) {
  if (!(max > 0) || !std::isfinite(max)) return {1, 0.25};
  const double raw = max / 4;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  return {std::ceil(max / step - 1e-9) * step, step};
}

std::string bar_chart(const BarChart& c, std::string_view caption) {
  const double plot_w = kWidth - kLeft - kRight;
  const double plot_h = kHeight - kTop - kBottom;
  double max = 0;
  for (std::size_t i = 0; i < c.categories.size(); ++i) {
    double stack = 0;
    for (const Series& s : c.series) {
      const double v = i < s.values.size() ? s.values[i].value_or(0) : 0;
      stack = c.stacked ? stack + v : std::max(stack, v);
    }
    max = std::max(max, stack);
  }
  const auto [top, step] = nice_axis(max);
  std::string svg = svg_open(c.title);
  y_axis(svg, top, step, c.unit, plot_w);
  const std::size_t n = std::max<std::size_t>(c.categories.size(), 1);
  const double group_w = plot_w / n;
  const double bar_area = group_w * 0.7;
  const std::size_t per_group = c.stacked ? 1 : std::max<std::size_t>(c.series.size(), 1);
  const double bar_w = bar_area / per_group;
  // Labels a dozen categories at most: more overlap on the axis (each bar keeps its own in its
  // tooltip).
  const std::size_t label_every = std::max<std::size_t>((c.categories.size() + 11) / 12, 1);
  for (std::size_t i = 0; i < c.categories.size(); ++i) {
    const double x0 = kLeft + group_w * i + (group_w - bar_area) / 2;
    double base = 0;
    for (std::size_t k = 0; k < c.series.size(); ++k) {
      const Series& s = c.series[k];
      if (i >= s.values.size() || !s.values[i]) continue;
      const double v = *s.values[i];
      const double h = plot_h * v / top;
      const double x = c.stacked ? x0 : x0 + bar_w * k;
      const double y = kTop + plot_h * (1 - (base + v) / top);
      fmt::format_to(
          std::back_inserter(svg),
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">"
          "<title>{}: {} {} {}</title></rect>",
          x, y, std::max(bar_w - 1, 1.0), std::max(h, 0.0), escape(s.color),
          escape(c.categories[i]), escape(s.name), num(v), escape(c.unit));
      if (c.stacked) base += v;
    }
    if (i % label_every == 0)
      fmt::format_to(
          std::back_inserter(svg),
          "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>",
          kLeft + group_w * (i + 0.5), kHeight - kBottom + 16, escape(c.categories[i]));
  }
  svg += "</svg>";
  std::vector<std::pair<std::string, std::string>> items;
  for (const Series& s : c.series) items.emplace_back(s.name, s.color);
  return figure(c.title, svg, legend(items), caption);
}

std::string hbar_chart(const HBarChart& c, std::string_view caption) {
  constexpr double kLabel = 150, kRow = 30;
  const double height = kTop + kRow * std::max<std::size_t>(c.rows.size(), 1) + kBottom;
  const double plot_w = kWidth - kLabel - kRight;
  double max = c.max.value_or(0);
  if (!c.max) {
    for (const HBarRow& r : c.rows) {
      double stack = 0;
      for (const HBarSegment& s : r.segments) stack += s.value;
      max = std::max({max, stack, r.marker.value_or(0)});
    }
  }
  const auto [top, step] = nice_axis(max);
  std::string svg = svg_open(c.title, height);
  const double plot_bottom = kTop + kRow * std::max<std::size_t>(c.rows.size(), 1);
  for (double v = 0; v <= top + step / 2; v += step) {
    const double x = kLabel + plot_w * v / top;
    fmt::format_to(
        std::back_inserter(svg),
        "<line class=\"grid\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/>"
        "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>",
        x, x, kTop, plot_bottom, x, plot_bottom + 16, axis_label(v));
  }
  fmt::format_to(std::back_inserter(svg),
                 "<text class=\"unit\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>",
                 kLabel + plot_w / 2, plot_bottom + 34, escape(c.unit));
  std::vector<std::pair<std::string, std::string>> items;
  for (std::size_t i = 0; i < c.rows.size(); ++i) {
    const HBarRow& r = c.rows[i];
    const double y = kTop + kRow * i + 5;
    fmt::format_to(std::back_inserter(svg),
                   "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>",
                   kLabel - 8, y + 15, escape(r.label));
    double base = 0;
    for (const HBarSegment& s : r.segments) {
      const double w = plot_w * std::min(s.value, top - base) / top;
      if (w > 0)
        fmt::format_to(std::back_inserter(svg),
                       "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"20\" fill=\"{}\">"
                       "<title>{}: {} {} {}</title></rect>",
                       kLabel + plot_w * base / top, y, w, escape(s.color), escape(r.label),
                       escape(s.name), num(s.value), escape(c.unit));
      base += s.value;
      if (std::find(items.begin(), items.end(), std::pair{s.name, s.color}) == items.end())
        items.emplace_back(s.name, s.color);
    }
    if (r.marker) {
      const double x = kLabel + plot_w * std::min(*r.marker, top) / top;
      fmt::format_to(
          std::back_inserter(svg),
          "<line class=\"marker\" x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\">"
          "<title>{}: {} {}</title></line>",
          x, x, y - 3, y + 23, escape(r.marker_label), num(*r.marker), escape(c.unit));
    }
  }
  svg += "</svg>";
  bool markers = false;
  for (const HBarRow& r : c.rows) markers = markers || r.marker.has_value();
  if (markers) {
    std::string marker_name;
    for (const HBarRow& r : c.rows)
      if (r.marker) marker_name = r.marker_label;
    items.emplace_back(marker_name + " (line)", "#222");
  }
  return figure(c.title, svg, legend(items), caption);
}

std::string line_chart(const LineChart& c, std::string_view caption) {
  const double plot_w = kWidth - kLeft - kRight;
  const double plot_h = kHeight - kTop - kBottom;
  double x_max = 0, y_max = 0;
  for (const LineSeries& s : c.series)
    for (const LinePoint& p : s.points) x_max = std::max(x_max, p.x), y_max = std::max(y_max, p.y);
  const auto [top, step] = nice_axis(c.y_max.value_or(y_max));
  const auto [right, x_step] = nice_axis(x_max);
  std::string svg = svg_open(c.title);
  y_axis(svg, top, step, c.y_unit, plot_w);
  for (double v = 0; v <= right + x_step / 2; v += x_step) {
    fmt::format_to(
        std::back_inserter(svg),
        "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>",
        kLeft + plot_w * v / right, kHeight - kBottom + 16, axis_label(v));
  }
  fmt::format_to(std::back_inserter(svg),
                 "<text class=\"unit\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>",
                 kLeft + plot_w / 2, kHeight - 6, escape(c.x_unit));
  for (const LineSeries& s : c.series) {
    std::string pts;
    for (const LinePoint& p : s.points)
      fmt::format_to(std::back_inserter(pts), "{}{:.1f},{:.1f}", pts.empty() ? "" : " ",
                     kLeft + plot_w * p.x / right, kTop + plot_h * (1 - std::min(p.y, top) / top));
    fmt::format_to(std::back_inserter(svg),
                   "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" "
                   "points=\"{}\"><title>{}</title></polyline>",
                   escape(s.color), pts, escape(s.name));
  }
  svg += "</svg>";
  std::vector<std::pair<std::string, std::string>> items;
  for (const LineSeries& s : c.series) items.emplace_back(s.name, s.color);
  return figure(c.title, svg, legend(items), caption);
}

std::string not_measured_chart(std::string_view title, std::string_view why) {
  return fmt::format(
      "<figure class=\"chart-figure not-measured\"><figcaption>{}</figcaption>"
      "<p class=\"not-measured-text\">not measured: {}</p></figure>",
      escape(title), escape(why));
}

}  // namespace fathom::html
