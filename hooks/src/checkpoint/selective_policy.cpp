// Which ops a selective checkpoint keeps: the names users give (checked against what the
// dispatcher really runs below autograd, op_interception.h) and the default list.
#include <fathom/checkpoint.h>
#include <fathom/error.h>

#include <algorithm>

#include "checkpoint/op_interception.h"

namespace fathom {

const std::vector<std::string>& expensive_ops() {
  // The products FLOP counters count (analyze/flop_formulas.cpp), as autograd sees them: linear
  // and matmul decompose into mm/addmm/bmm, conv2d into convolution,
  // scaled_dot_product_attention into one of the fused kernels (the CPU one included).
  static const std::vector<std::string> ops{
      "aten::mm",
      "aten::addmm",
      "aten::bmm",
      "aten::baddbmm",
      "aten::convolution",
      "aten::_scaled_dot_product_flash_attention",
      "aten::_scaled_dot_product_flash_attention_for_cpu",
      "aten::_scaled_dot_product_efficient_attention",
      "aten::_scaled_dot_product_cudnn_attention",
  };
  return ops;
}

CheckpointOptions& CheckpointOptions::keep(const std::vector<std::string>& ops) {
  for (const std::string& op : ops) {
    const std::string problem = detail::keepable_op_problem(op);
    if (!problem.empty())
      throw Error("fathom::CheckpointOptions::keep: " + problem +
                  "; fathom::expensive_ops() lists the ops worth keeping");
    if (std::find(keep_.begin(), keep_.end(), op) == keep_.end()) keep_.push_back(op);
  }
  return *this;
}

CheckpointOptions& CheckpointOptions::keep_if(KeepPolicy policy) {
  if (!policy) throw Error("fathom::CheckpointOptions::keep_if: the policy is empty");
  keep_if_ = std::move(policy);
  return *this;
}

CheckpointOptions& CheckpointOptions::choose(OpChoicePolicy policy) {
  if (!policy) throw Error("fathom::CheckpointOptions::choose: the policy is empty");
  choose_ = std::move(policy);
  return *this;
}

OpChoice CheckpointOptions::choice(const CheckpointedOp& op) const {
  for (const std::string& k : keep_) {
    // "aten::mm" names every overload; "aten::add.Tensor" one.
    if (k.size() == op.name.size()
            ? k == op.name
            : k.size() == op.name.size() + 1 + op.overload.size() &&
                  k.compare(0, op.name.size(), op.name) == 0 && k[op.name.size()] == '.' &&
                  k.compare(op.name.size() + 1, std::string::npos, op.overload) == 0)
      return OpChoice::Keep;
  }
  if (keep_if_ && keep_if_(op)) return OpChoice::Keep;
  return choose_ ? choose_(op) : OpChoice::Recompute;
}

}  // namespace fathom
