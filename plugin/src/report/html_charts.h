#pragma once
// Inline SVG charts for the HTML report: no script, no network, every label escaped. Internal to
// report_html.cpp (and its tests, through the report).
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fathom::html {

// Text for HTML content and attribute values: & < > " ' escaped.
std::string escape(std::string_view text);

struct Series {
  std::string name;
  std::string color;  // CSS color, from fathom's palette (never report text)
  std::vector<std::optional<double>> values;  // one per category; empty: not measured there
};

// Vertical bars, one group per category; stacked or side by side.
struct BarChart {
  std::string title;
  std::string unit;  // "ms", "GiB"
  std::vector<std::string> categories;
  std::vector<Series> series;
  bool stacked = false;
};

// Horizontal bars: each row a stack of segments, with an optional marker (a peak) drawn as a line.
struct HBarSegment {
  std::string name;
  std::string color;
  double value = 0;
};
struct HBarRow {
  std::string label;
  std::vector<HBarSegment> segments;
  std::optional<double> marker;
  std::string marker_label;
};
struct HBarChart {
  std::string title;
  std::string unit;
  std::vector<HBarRow> rows;
  std::optional<double> max;  // axis end; default: the largest stack or marker
};

struct LinePoint {
  double x = 0;
  double y = 0;
};
struct LineSeries {
  std::string name;
  std::string color;
  std::vector<LinePoint> points;
};
struct LineChart {
  std::string title;
  std::string x_unit;
  std::string y_unit;
  std::vector<LineSeries> series;
  std::optional<double> y_max;
};

// Each returns a <figure class="chart"> with the SVG, a legend and the caption.
std::string bar_chart(const BarChart& c, std::string_view caption = {});
std::string hbar_chart(const HBarChart& c, std::string_view caption = {});
std::string line_chart(const LineChart& c, std::string_view caption = {});
// A chart whose data was not measured: its title and "not measured: <why>".
std::string not_measured_chart(std::string_view title, std::string_view why);

// The axis end and step for values up to max: 1, 2 or 5 times a power of ten.
std::pair<double, double> nice_axis(double max);

}  // namespace fathom::html
