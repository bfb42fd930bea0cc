#include "collect/telemetry_sampler.h"

#include <fathom/device_telemetry.h>
#include <fathom/error.h>

#include "collect/clock.h"

namespace fathom {

TelemetrySampler::TelemetrySampler(std::unique_ptr<TelemetrySource> source,
                                   std::chrono::milliseconds period)
    : source_(std::move(source)),
      period_(period),
      limits_(source_ ? source_->limits() : DeviceLimits{}),
      acc_(limits_) {
  if (!source_) throw Error("TelemetrySampler needs a source: check open_nvml_telemetry's result");
  if (period_.count() <= 0)
    throw Error("TelemetrySampler period must be positive (100 ms is a good start)");
  thread_ = std::thread([this] { run(); });
}

TelemetrySampler::~TelemetrySampler() {
  {
    std::lock_guard lock(stop_mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void TelemetrySampler::run() {
  std::unique_lock lock(stop_mutex_);
  while (!stop_) {
    lock.unlock();
    sample();
    lock.lock();
    wake_.wait_for(lock, period_, [this] { return stop_; });
  }
}

void TelemetrySampler::sample() {
  std::lock_guard lock(sample_mutex_);
  acc_.add(source_->read(now_ns()));
  ++total_;
}

DeviceTelemetry TelemetrySampler::take() {
  sample();
  std::lock_guard lock(sample_mutex_);
  DeviceTelemetry t = acc_.summary(source_->unsupported());
  acc_ = TelemetryAccumulator(limits_);
  return t;
}

std::int64_t TelemetrySampler::samples_taken() const {
  std::lock_guard lock(sample_mutex_);
  return total_;
}

}  // namespace fathom
