#pragma once
// The text of the live progress line (Options::progress): what a training loop would print for
// itself, from what fathom already measures. Measured over the steps since the line was last
// drawn, so it follows the run rather than averaging it since the start.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fathom {

struct ProgressSample {
  std::int64_t epoch = 0;
  std::int64_t step = 0;                // the last step that ended
  std::optional<double> samples_per_s;  // when the steps said their samples
  double step_ms = 0;                   // the mean over those steps
  std::optional<std::int64_t> memory_bytes;
  std::string_view memory_label = "RSS";  // "GPU" when read from the caching allocator
  std::optional<std::int64_t> findings;   // the last finished epoch's; none before the first ends
  std::int64_t findings_epoch = 0;        // which epoch that was
};

// "fathom  epoch 1  step 340  2,310 samples/s  13.9 ms/step  RSS 1.2 GiB  3 findings (epoch 0)"
std::string progress_line_text(const ProgressSample& s);

}  // namespace fathom
