#pragma once
// The text of an op's NVTX range, as PyTorch's emit_nvtx writes it ("aten::mm, seq = 12,
// op_id = 40, sizes = [[64, 128], [128, 256]], input_op_ids = [...]") and as fathom's op ranges
// write it ("aten::mm, seq = 12 [[64, 128], [128, 256]]"): the op's name, its autograd sequence
// number and its input shapes, where the text has them.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fathom::detail {

struct OpRangeText {
  std::string name;
  std::int64_t sequence_nr = -1;
  std::vector<std::vector<std::int64_t>> input_shapes;
};

// The name alone: what comes before ", " or " [".
std::string_view op_range_base_name(std::string_view text) noexcept;
// nullopt when the text is not an op's (no "::" in its name, and no seq / op_id / sizes part).
std::optional<OpRangeText> parse_op_range_text(std::string_view text);

}  // namespace fathom::detail
