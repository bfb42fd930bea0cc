#pragma once
// Which kernels ran on Tensor Cores, told from their names. The names are all there is in a
// CUPTI kernel record or a profiler trace, and they change with every architecture and library
// release, so the knowledge lives in one ordered table (kernel_rules()) with one test per row.
// First match wins: communication first, then the rows for kernels that only look like Tensor
// Core kernels (sgemm, ..._ffma_..., FlashAttention's elementwise helpers), then the Tensor Core
// families, then the CUDA-core helpers (elementwise, reductions, indexing).
//
// A name no row claims is Decision::Unknown, not "CUDA cores": a name-only table misses every
// library it has not seen. The aggregator may still decide such a kernel by the ATen op that
// launched it (tensor_core_by_op() in tensor_core_ops.h).
#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace fathom {

// The arithmetic a kernel does, as far as its name says.
enum class Precision : std::uint8_t { Unknown, FP64, FP32, TF32, FP16, BF16, FP8, FP6, FP4, INT8 };
std::string_view precision_name(Precision p) noexcept;  // "fp32", "tf32", ..., "unknown"

// How a kernel's unit (Tensor Cores or CUDA cores) was decided.
enum class Decision : std::uint8_t {
  ByName,   // a row of the table (or a low-bit float type in the name) says
  ByOp,     // the name says nothing; the launching op's input types and the device decide
  Unknown,  // neither: the kernel is counted apart, not as CUDA cores
};
std::string_view decision_name(Decision d) noexcept;  // "name", "op", "unknown"

// The device's compute capability, where the source gives it (0.0: unknown).
struct ComputeCapability {
  int major = 0;
  int minor = 0;
  constexpr bool known() const noexcept { return major > 0; }
  constexpr int sm() const noexcept { return major * 10 + minor; }  // 8.0 -> 80
};

struct KernelClass {
  bool tensor_core = false;           // false with Decision::Unknown means "not known"
  bool communication = false;         // NCCL and other collectives: time on the wire
  std::string_view family = "other";  // the id of the table row that matched
  Precision precision = Precision::Unknown;
  Decision decision = Decision::ByName;
  // The row's answer depends on the architecture (fused attention), which neither the name
  // (sm80, Sm90...) nor the caller gave: decision is Unknown for that reason.
  bool needs_capability = false;
};

// What a row says about the kernels it matches.
enum class RuleUnit : std::uint8_t {
  CudaCores,
  TensorCores,
  Communication,
  // Fused attention (cuDNN SDPA, CUTLASS / memory-efficient FMHA): mma-based from sm_80 (and
  // for fp16 from Volta); SIMT before Volta. The architecture comes from the name's sm_XY, else
  // from the device; fp32 / ffma names stay undecided.
  FusedAttention,
};

// A token of a row, matched ignoring case. A whole-word token must start and end where the
// name's words do (a non-alphanumeric character, or a change between lower case, upper case and
// digits other than a capital starting a word): "umma" matches "TmaUmmaWarp" and "UMMA::", not
// "summation".
struct NameToken {
  std::string_view text;
  bool whole_word = false;
  constexpr NameToken() = default;
  constexpr NameToken(const char* t) noexcept : text(t) {}  // NOLINT(google-explicit-constructor)
  constexpr NameToken(std::string_view t, bool word) noexcept : text(t), whole_word(word) {}
};
constexpr NameToken word(const char* t) noexcept { return NameToken(t, true); }

// One row of the table. A name matches when it contains every non-empty token of all_of and,
// when any_of has a non-empty token, at least one of those.
struct KernelRule {
  std::string_view family;
  std::array<NameToken, 2> all_of;
  std::array<NameToken, 14> any_of;
  RuleUnit unit;
  Precision precision;       // Unknown: read from the name's type tokens (bf16, tf32, f16, e4m3...)
  std::string_view example;  // a real name this row exists for; the table test classifies it
};

std::span<const KernelRule> kernel_rules() noexcept;

// Sources without a device (a trace without deviceProperties) call the first; a row that needs
// the architecture then reads it from the name or leaves the kernel undecided (needs_capability).
KernelClass classify_kernel(std::string_view name) noexcept;
KernelClass classify_kernel(std::string_view name, ComputeCapability device) noexcept;

// The precision a name's type tokens give (e2m1, e4m3, bf16, tf32, f16/fp16/half, int8/s8s8,
// f64, f32/float, double...) in its template arguments (without_parameters()), Unknown when it
// names none. C++ double counts only where no other type is named: those are scalar arguments.
Precision precision_from_name(std::string_view name) noexcept;

// The architecture a name was built for (sm80, _sm90_, Sm100...), 0 when it names none.
int sm_from_name(std::string_view name) noexcept;

}  // namespace fathom
