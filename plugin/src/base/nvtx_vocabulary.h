#pragma once
// The names fathom's NVTX ranges carry in Nsight Systems: one domain, one category per kind.
// Shared by the writer (collect/nvtx) and the reader of Nsight exports (formats/nsight), so a
// range fathom wrote is recognised by the numbers it was written with.
#include <cstdint>

namespace fathom::nvtx {

inline constexpr const char* kDomainName = "fathom";

enum class Kind : std::uint32_t { Epoch = 1, Step = 2, Phase = 3, Module = 4, Op = 5, Finding = 6 };

}  // namespace fathom::nvtx
