#pragma once
// Gradients of a plain run against a checkpointed, selective or offloaded one: cloned in a fixed
// order, cleared between runs, compared bit for bit (the tests of every strategy share this).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

namespace fathom::test {

// Every parameter's gradient, cloned, in a fixed order.
inline std::vector<at::Tensor> grads_of(const torch::nn::Module& m) {
  std::vector<at::Tensor> out;
  for (const auto& p : m.parameters())
    out.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
  return out;
}

inline void zero_grads(torch::nn::Module& m) {
  for (auto& p : m.parameters()) p.mutable_grad() = at::Tensor();
}

// run: what the second run was ("checkpointed", "offloaded"), for the message.
inline void expect_bitwise_equal(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b,
                                 const char* run = "checkpointed") {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(a[i].defined()) << "gradient " << i << " missing in the plain run";
    ASSERT_TRUE(b[i].defined()) << "gradient " << i << " missing in the " << run << " run";
    EXPECT_TRUE(torch::equal(a[i], b[i])) << "gradient " << i << " differs";
  }
}

}  // namespace fathom::test
