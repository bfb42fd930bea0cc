#pragma once
// Autocast for LibTorch code: what Python's `with torch.autocast(device_type)` does, as a scope.
//
//   { fathom::AutocastScope autocast(torch::kCUDA);  loss = criterion(model->forward(x), y); }
//
// GEMMs and convolutions run in 16 bits (bf16 where the device has it: CPUs and GPUs from
// compute capability 8.0; fp16 before), ops that need the range (losses, reductions, and on CUDA
// softmax) in fp32, as autocast's own op lists say. The scope saves the thread's autocast state
// and restores it at its end, so scopes nest (an inner AutocastScope(device, {}, false) runs a
// region in fp32), and the outermost one clears autocast's cache of cast weights when it ends:
// one forward's casts are freed before the next (pytorch issue 46649).
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <optional>
#include <string_view>

namespace fathom {

// bf16 on CPU and on CUDA from compute capability 8.0; fp16 on older GPUs. Asks the CUDA driver
// for the current device's compute capability (fp16 when it cannot tell).
c10::ScalarType default_autocast_dtype(c10::DeviceType device_type);
// "bf16", "fp16", "fp32", or the dtype's own name.
std::string_view short_dtype_name(c10::ScalarType dtype) noexcept;

// Whether autocast runs ops in 16 bits for device_type on this thread (false under the fp32
// autocast of Auto mode's fp32 steps, detail::enter_fp32_autocast).
bool autocast_enabled(c10::DeviceType device_type) noexcept;

// The autocast state of one device type on this thread.
struct AutocastState {
  bool enabled = false;
  c10::ScalarType dtype = c10::ScalarType::BFloat16;
  bool cache_enabled = true;
};

namespace detail {
// The two halves of AutocastScope, for the session (whose forward phase begins and ends in
// separate calls). enter() throws fathom::Error on a dtype autocast cannot use on the device;
// leave() never throws.
AutocastState enter_autocast(c10::DeviceType device_type, c10::ScalarType dtype, bool enabled);
void leave_autocast(c10::DeviceType device_type, const AutocastState& saved) noexcept;
// Autocast with fp32 as its target type: each op on autocast's lists casts 16-bit inputs up to
// fp32 and leaves fp32 tensors as they are (results equal plain fp32's, bit for bit). Auto mode
// runs its fp32 forwards so once a 16-bit step has run: a tensor that step left behind (an
// LSTM's hidden state carried to the next step) is cast up instead of failing in a kernel that
// takes one dtype. Undo with leave_autocast().
AutocastState enter_fp32_autocast(c10::DeviceType device_type);
}  // namespace detail

class [[nodiscard]] AutocastScope {
 public:
  // dtype: empty for default_autocast_dtype(device_type). Throws fathom::Error when the dtype is
  // not one autocast can use (CPU: bf16, fp16; CUDA: fp16, and bf16 from compute capability 8.0).
  explicit AutocastScope(c10::DeviceType device_type,
                         std::optional<c10::ScalarType> dtype = std::nullopt, bool enabled = true);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;
  AutocastScope(AutocastScope&&) = delete;
  AutocastScope& operator=(AutocastScope&&) = delete;
  static void* operator new(std::size_t) = delete;
  static void* operator new[](std::size_t) = delete;

  c10::ScalarType dtype() const noexcept { return dtype_; }

 private:
  c10::DeviceType device_type_;
  c10::ScalarType dtype_;
  AutocastState saved_;
};

}  // namespace fathom
