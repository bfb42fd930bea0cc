#pragma once
// The examples' live progress line: step, throughput, loss and memory, rewritten in place on a
// terminal and printed a few times per epoch otherwise (logs, ctest).
//
// The loss is read (a device sync on a GPU) only when the line is printed, a few times a second at
// most, so the display does not add a host sync to every step.
#include <ATen/core/Tensor.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Device.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <string>

namespace examples {

class Progress {
 public:
  // unit: what throughput counts ("img", "tok", "samples").
  Progress(std::string unit, c10::Device device, int epoch, int steps)
      : unit_(std::move(unit)),
        device_(device),
        epoch_(epoch),
        steps_(steps),
        tty_(::isatty(1) == 1) {}

  // After each step: items processed by it, and its loss (not read unless printed).
  void update(int step, std::int64_t items, const at::Tensor& loss) {
    const Clock::time_point now = Clock::now();
    window_.push_back({now, items});
    while (window_.size() > 20) window_.pop_front();
    total_items_ += items;
    const bool last = step + 1 == steps_;
    const bool due = tty_ ? now - last_print_ > std::chrono::milliseconds(250)
                          : (step + 1) % std::max(1, steps_ / 4) == 0;
    if (!due && !last) return;
    last_print_ = now;
    last_loss_ = loss.item<double>();
    print(step + 1, now);
  }

  // Ends the line; call before the epoch scope ends (its report prints next).
  void finish() {
    if (tty_) std::printf("\n");
    std::fflush(stdout);
  }

  double items_per_second() const { return rate_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Tick {
    Clock::time_point at;
    std::int64_t items;
  };

  void print(int done, Clock::time_point now) {
    // Throughput over the recent window: the first steps (allocation, warm-up) fade out of it.
    if (window_.size() >= 2) {
      std::int64_t items = 0;
      for (std::size_t i = 1; i < window_.size(); ++i) items += window_[i].items;
      const double s = std::chrono::duration<double>(now - window_.front().at).count();
      rate_ = s > 0 ? static_cast<double>(items) / s : 0;
    }
    std::printf("%sepoch %d  step %*d/%d  %9.0f %s/s  loss %.4f  %s%s", tty_ ? "\r\033[K" : "",
                epoch_, static_cast<int>(std::to_string(steps_).size()), done, steps_, rate_,
                unit_.c_str(), last_loss_, memory().c_str(), tty_ ? "" : "\n");
    std::fflush(stdout);
  }

  std::string memory() const {
    char buf[96];
    if (!device_.is_cpu()) {
      auto* allocator = c10::getDeviceAllocator(device_.type());
      const auto stats = allocator->getDeviceStats(device_.index() < 0 ? 0 : device_.index());
      constexpr auto kAll = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);
      std::snprintf(buf, sizeof buf, "%s mem %.2f GiB (peak %.2f)", device_.str().c_str(),
                    static_cast<double>(stats.allocated_bytes[kAll].current) / (1 << 30),
                    static_cast<double>(stats.allocated_bytes[kAll].peak) / (1 << 30));
    } else if (rusage u{}; getrusage(RUSAGE_SELF, &u) == 0) {
      // ru_maxrss: the process's peak resident set, KiB on Linux.
      std::snprintf(buf, sizeof buf, "rss peak %.0f MiB", static_cast<double>(u.ru_maxrss) / 1024);
    } else {
      return "rss n/a";
    }
    return buf;
  }

  std::string unit_;
  c10::Device device_;
  int epoch_, steps_;
  bool tty_;
  std::deque<Tick> window_;
  std::int64_t total_items_ = 0;
  double rate_ = 0, last_loss_ = 0;
  Clock::time_point last_print_{};
};

}  // namespace examples
