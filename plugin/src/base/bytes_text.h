#pragma once
// Byte counts as people read them, the one formatter every writer, rule and message uses:
// "512 B", "3.5 KiB", "20.8 MiB", "1.68 GiB" (powers of 1024, as the caching allocator and
// nvidia-smi count). A negative count (a difference) keeps its sign: "-3.5 KiB".
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fathom::detail {

std::string bytes_text(std::int64_t bytes);
std::string bytes_text(double bytes);
// bytes_text, or `missing` (the reason) when the count is not known.
std::string bytes_text(const std::optional<std::int64_t>& bytes, std::string_view missing);

}  // namespace fathom::detail
