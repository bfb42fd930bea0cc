#include <ATen/autocast_mode.h>
#include <ATen/cuda/CUDAContextLight.h>
#include <fathom/autocast.h>
#include <fathom/error.h>

#include <string>

#include "analyze/gpu_throughput.h"
#include "base/warning_sink.h"

namespace fathom {
namespace {

int cuda_compute_major() noexcept {
  try {
    if (!at::cuda::is_available()) return 0;
    return at::cuda::getCurrentDeviceProperties()->major;
  } catch (...) {
    return 0;
  }
}

void check_dtype(c10::DeviceType device_type, c10::ScalarType dtype) {
  const bool sixteen = dtype == c10::ScalarType::BFloat16 || dtype == c10::ScalarType::Half;
  if (device_type == c10::DeviceType::CPU) {
    if (!sixteen)
      throw Error("autocast on cpu runs in bf16 or fp16, not " + std::string(c10::toString(dtype)) +
                  ": pass torch::kBFloat16 (or nothing, for the default)");
    return;
  }
  if (device_type == c10::DeviceType::CUDA) {
    if (!sixteen)
      throw Error("autocast on cuda runs in fp16 or bf16, not " +
                  std::string(c10::toString(dtype)) + ": pass nothing for the device's default");
    const int major = cuda_compute_major();
    if (dtype == c10::ScalarType::BFloat16 && major > 0 && !cuda_supports_bf16(major))
      throw Error(
          "this GPU (compute capability " + std::to_string(major) +
          ".x) has no bf16 Tensor Cores: use torch::kHalf with a fathom::GradScaler, or pass "
          "nothing for the default");
    return;
  }
  throw Error("fathom's autocast supports cpu and cuda, not " +
              c10::DeviceTypeName(device_type, true) +
              ": use at::autocast directly for other devices");
}

}  // namespace

c10::ScalarType default_autocast_dtype(c10::DeviceType device_type) {
  if (device_type == c10::DeviceType::CUDA)
    return cuda_supports_bf16(cuda_compute_major()) ? c10::ScalarType::BFloat16
                                                    : c10::ScalarType::Half;
  return c10::ScalarType::BFloat16;
}

std::string_view short_dtype_name(c10::ScalarType dtype) noexcept {
  switch (dtype) {
    case c10::ScalarType::BFloat16:
      return "bf16";
    case c10::ScalarType::Half:
      return "fp16";
    case c10::ScalarType::Float:
      return "fp32";
    default:
      return c10::toString(dtype);
  }
}

bool autocast_enabled(c10::DeviceType device_type) noexcept {
  try {
    // Auto's fp32 autocast (enter_fp32_autocast) casts nothing down: that is not mixed precision.
    return at::autocast::is_autocast_enabled(device_type) &&
           at::autocast::get_autocast_dtype(device_type) != c10::ScalarType::Float;
  } catch (...) {
    return false;
  }
}

namespace detail {

AutocastState enter_autocast(c10::DeviceType device_type, c10::ScalarType dtype, bool enabled) {
  if (enabled) check_dtype(device_type, dtype);
  AutocastState saved{at::autocast::is_autocast_enabled(device_type),
                      at::autocast::get_autocast_dtype(device_type),
                      at::autocast::is_autocast_cache_enabled()};
  at::autocast::set_autocast_enabled(device_type, enabled);
  if (enabled) at::autocast::set_autocast_dtype(device_type, dtype);
  at::autocast::increment_nesting();
  return saved;
}

AutocastState enter_fp32_autocast(c10::DeviceType device_type) {
  AutocastState saved{at::autocast::is_autocast_enabled(device_type),
                      at::autocast::get_autocast_dtype(device_type),
                      at::autocast::is_autocast_cache_enabled()};
  at::autocast::set_autocast_enabled(device_type, true);
  // Not check_dtype(): fp32 is no 16-bit type, and autocast's casts to it are plain to(kFloat).
  at::autocast::set_autocast_dtype(device_type, c10::ScalarType::Float);
  at::autocast::increment_nesting();
  return saved;
}

void leave_autocast(c10::DeviceType device_type, const AutocastState& saved) noexcept {
  try {
    // Only the outermost scope frees the casts: inner scopes may reuse the outer one's.
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(device_type, saved.enabled);
    at::autocast::set_autocast_dtype(device_type, saved.dtype);
    at::autocast::set_autocast_cache_enabled(saved.cache_enabled);
  } catch (...) {
    // These setters only write thread-local state; nothing to recover.
    detail::swallowed("amp/autocast.cpp");
  }
}

}  // namespace detail

AutocastScope::AutocastScope(c10::DeviceType device_type, std::optional<c10::ScalarType> dtype,
                             bool enabled)
    : device_type_(device_type),
      dtype_(dtype ? *dtype : default_autocast_dtype(device_type)),
      saved_(detail::enter_autocast(device_type_, dtype_, enabled)) {}

AutocastScope::~AutocastScope() { detail::leave_autocast(device_type_, saved_); }

}  // namespace fathom
