#pragma once
// The short name of a module's C++ type, as the report and NVTX ranges name modules:
// "torch::nn::Conv2dImpl" -> "Conv2d", "demo::BlockImpl<demo::ResidualBlock, 3>" ->
// "Block<ResidualBlock, 3>". Every qualified name inside is shortened, template arguments
// included (issue 16: cutting at the last ':' left "ResidualBlock>").
#include <string>
#include <string_view>

namespace fathom::detail {

std::string short_type_name(std::string_view type_name);

}  // namespace fathom::detail
