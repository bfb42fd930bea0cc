#pragma once
// fathom's NVTX ranges, all in the "fathom" domain, with one category and color per kind.
// The NVTX headers stay inside the core: users of this header need no NVTX include path.
// Every function is noexcept and costs a null-pointer check when no tool is attached.
#include <cstdint>
#include <string_view>

#include "base/nvtx_vocabulary.h"

namespace fathom::nvtx {

std::string_view kind_name(Kind k) noexcept;
// ARGB color of a kind's ranges.
std::uint32_t kind_color(Kind k) noexcept;

// A string registered once with the domain; passing it costs no string copy in the tool.
// Register fixed names once (per call site), never per range.
struct Name {
  const void* handle = nullptr;
};
Name register_name(std::string_view text) noexcept;

// A number a range carries beside its name (an op's autograd sequence number): tools show it next
// to the name and Nsight Systems exports it (NVTX_EVENTS.int64Value), so the name can stay a
// registered string instead of a text formatted per range.
struct Payload {
  std::int64_t value = 0;
};

// Thread-local ranges: push and pop on the same thread.
void push(Kind kind, Name name, std::uint32_t argb = 0) noexcept;
void push(Kind kind, Name name, Payload payload) noexcept;
void push(Kind kind, const char* message, Payload payload) noexcept;
void push(Kind kind, const char* message, std::uint32_t argb = 0) noexcept;
void pop() noexcept;

// Process ranges: may end on another thread than the one that started them (autograd).
using RangeId = std::uint64_t;
RangeId start(Kind kind, Name name, std::uint32_t argb = 0) noexcept;
RangeId start(Kind kind, const char* message, std::uint32_t argb = 0) noexcept;
RangeId start(Kind kind, Name name, Payload payload) noexcept;
RangeId start(Kind kind, const char* message, Payload payload) noexcept;
void end(RangeId id) noexcept;

void mark(Kind kind, const char* message) noexcept;

// Whether a tool (Nsight Systems, Nsight Compute, an NVTX_INJECTION64_PATH library) receives
// ranges. NVTX loads its tool once, at its first call, so the answer never changes afterwards;
// work done only to name a range (formatting an op's name and shapes) can be skipped when false.
bool tool_attached() noexcept;

}  // namespace fathom::nvtx
