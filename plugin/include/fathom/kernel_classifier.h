#pragma once
// Which kernels ran on Tensor Cores, told from their names. The names are all there is in a
// CUPTI kernel record or a profiler trace, and they change with every architecture and library
// release, so the knowledge lives in one ordered table (kernel_rules()) with one test per row.
// First match wins: rows for kernels that only look like Tensor Core kernels (sgemm, ..._ffma_...,
// xmma f32f32_f32f32) come before the Tensor Core rows.
#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace fathom {

// The arithmetic a kernel does, as far as its name says.
enum class Precision : std::uint8_t { Unknown, FP64, FP32, TF32, FP16, BF16, FP8, FP4, INT8 };
std::string_view precision_name(Precision p) noexcept;  // "fp32", "tf32", ..., "unknown"

struct KernelClass {
  bool tensor_core = false;
  bool communication = false;         // NCCL: time on the wire, not compute
  std::string_view family = "other";  // the id of the table row that matched
  Precision precision = Precision::Unknown;
};

// One row of the table. A name matches when it contains (ignoring case) every non-empty token of
// all_of and, when any_of has a non-empty token, at least one of those.
struct KernelRule {
  std::string_view family;
  std::array<std::string_view, 2> all_of;
  std::array<std::string_view, 6> any_of;
  bool tensor_core;
  bool communication;
  Precision precision;       // Unknown: read from the name's type tokens (bf16, tf32, f16, e4m3...)
  std::string_view example;  // a real name this row exists for; the table test classifies it
};

std::span<const KernelRule> kernel_rules() noexcept;

KernelClass classify_kernel(std::string_view name) noexcept;

// The precision a name's type tokens give (bf16, tf32, f16/fp16/half, e4m3/e5m2, f64, f32/float,
// int8/s8s8...), Unknown when it names none.
Precision precision_from_name(std::string_view name) noexcept;

}  // namespace fathom
