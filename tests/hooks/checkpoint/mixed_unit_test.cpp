// Units kept in part (issue 26: keep, recompute or offload per op group): CheckpointOptions::choose
// with offloaded outputs, OffloadOptions::only, the runner of a joint plan's mixed units
// (mixed_unit.h) on a CPU through the CPU copy path, and a session in Auto mode applying a joint
// plan that keeps, recomputes and offloads (with the offload stand-in's link).
#include "checkpoint/mixed_unit.h"

#include <fathom/checkpoint.h>
#include <fathom/fathom.h>
#include <fathom/offload.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "checkpoint/top_level_ops.h"
#include "gradient_compare.h"
#include "gradient_steps.h"
#include "measure/op_flop_callback.h"
#include "measure/saved_tensor_meter.h"
#include "session_fixture.h"

namespace fathom {
namespace {

using test::expect_bitwise_equal;
using test::grads_of;
using test::zero_grads;

constexpr std::int64_t kBatch = 32, kWidth = 64, kHidden = 256;
constexpr std::int64_t kHiddenBytes = kBatch * kHidden * 4;

// fc1 -> GELU -> fc2: top-level ops 0 t, 1 addmm (fc1), 2 gelu, 3 t, 4 addmm (fc2), as
// unit_measure.h numbers them (UnitMeasure.GroupsAnMlpBlockByTheTensorsBackwardSaves).
struct BlockImpl : torch::nn::Module {
  BlockImpl()
      : fc1(register_module("fc1", torch::nn::Linear(kWidth, kHidden))),
        fc2(register_module("fc2", torch::nn::Linear(kHidden, kWidth))) {}
  at::Tensor forward(const at::Tensor& x) { return fc2->forward(torch::gelu(fc1->forward(x))); }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Block);

struct Flops {
  std::int64_t forward = 0, backward = 0;
};

// Gradients and FLOPs by phase (fathom's counter: 0 the forward, 1 the backward and its
// recompute) of one step of f.
Flops step(torch::nn::Module& m, const std::function<at::Tensor()>& f) {
  zero_grads(m);
  detail::FlopTally tally;
  {
    detail::OpFlopCallback callback(tally);
    tally.set_phase(0);
    const at::Tensor loss = f().pow(2).sum();
    tally.set_phase(1);
    loss.backward();
  }
  Flops out;
  for (const auto& e : tally.take()) (e.phase == 0 ? out.forward : out.backward) += e.flops;
  return out;
}

TEST(MixedUnit, ChooseOffloadsTheChosenOutputsAndRecomputesNone) {
  ASSERT_TRUE(detail::SavedTensorCapture::available());
  torch::manual_seed(5);
  Block block;
  const at::Tensor x = torch::randn({kBatch, kWidth});
  const Flops plain = step(*block, [&] { return block->forward(x); });
  const auto want = grads_of(*block);
  OffloadMeter meter;
  std::vector<int> indexes;
  const Flops mixed = step(*block, [&] {
    return checkpoint(
        [&](const at::Tensor& in) { return block->forward(in); }, x,
        CheckpointOptions()
            .module(block)
            .choose([&](const CheckpointedOp& op) {
              indexes.push_back(op.index);
              return op.name == "aten::addmm" ? OpChoice::Offload : OpChoice::Recompute;
            })
            .offload_options(OffloadOptions().cpu_copy(true).min_bytes(0).meter(meter)));
  });
  expect_bitwise_equal(want, grads_of(*block), "offloaded");
  EXPECT_EQ(mixed.backward, plain.backward) << "no product ran again in the recompute";
  const OffloadSummary s = meter.summary();
  EXPECT_EQ(s.offloaded_tensors, 2);  // both products' outputs; the input stays
  EXPECT_EQ(s.offloaded_bytes, kHiddenBytes + kBatch * kWidth * 4);
  // The policy is asked about the ops that can be kept, numbered among all the ops that left
  // autograd (0 and 3 are weight.t(), views): fc1's product, GELU, fc2's product.
  EXPECT_EQ(indexes, (std::vector<int>{1, 2, 4}));
}

TEST(MixedUnit, OnlyOffloadsTheTensorsThePredicateAccepts) {
  ASSERT_TRUE(detail::SavedTensorCapture::available());
  torch::manual_seed(6);
  Block block;
  const at::Tensor x = torch::randn({kBatch, kWidth});
  step(*block, [&] { return block->forward(x); });
  const auto want = grads_of(*block);
  OffloadMeter meter;
  step(*block, [&] {
    return offload([&](const at::Tensor& in) { return block->forward(in); }, x,
                   OffloadOptions().cpu_copy(true).min_bytes(0).meter(meter).only(
                       [](const at::Tensor& t) { return t.size(-1) == kHidden; }));
  });
  expect_bitwise_equal(want, grads_of(*block), "offloaded");
  const OffloadSummary s = meter.summary();
  // GELU's input and fc2's input (kHidden wide); fc1's input (the unit's, kWidth) stays.
  EXPECT_EQ(s.offloaded_tensors, 2);
  EXPECT_EQ(s.offloaded_bytes, 2 * kHiddenBytes);
  EXPECT_EQ(s.kept_tensors, 0) << "the tensors not chosen are left to autograd, not counted";
}

TEST(MixedUnit, TopLevelOpsAreCountedAsTheMeasurementCountsThem) {
  torch::manual_seed(7);
  Block block;
  const at::Tensor x = torch::randn({kBatch, kWidth});
  std::vector<int> seen;
  int charged_input = 0, charged_hidden = -2;
  {
    detail::TopLevelOps ops(x);
    ASSERT_TRUE(ops.counting());
    EXPECT_EQ(detail::TopLevelOps::on_this_thread(), &ops);
    const at::Tensor h = block->fc1->forward(x);
    seen.push_back(ops.current());
    const at::Tensor g = torch::gelu(h);
    charged_input = ops.charged(x);
    charged_hidden = ops.charged(h);
    block->fc2->forward(g);
  }
  EXPECT_EQ(detail::TopLevelOps::on_this_thread(), nullptr);
  EXPECT_EQ(seen, std::vector<int>{-1}) << "between ops";
  EXPECT_EQ(charged_input, -1) << "the unit's input is made before it";
  EXPECT_EQ(charged_hidden, 1) << "fc1's output, made by its addmm (op 1; op 0 is weight.t())";
}

// The runner as Auto runs a unit: fc1's output offloaded, GELU's recomputed from it, fc2's kept.
TEST(MixedUnit, ARunKeepsOffloadsAndRecomputesByTopLevelOp) {
  ASSERT_TRUE(detail::SavedTensorCapture::available());
  torch::manual_seed(8);
  Block block;
  const at::Tensor x = torch::randn({kBatch, kWidth});
  const Flops plain = step(*block, [&] { return block->forward(x); });
  const auto want = grads_of(*block);
  OffloadMeter meter;
  detail::MixedUnitRun run;
  run.kept = {4};
  run.offloaded = {1};
  run.recompute = true;
  run.offload.cpu_copy(true).meter(meter);
  const Flops mixed = step(*block, [&] {
    return detail::run_mixed_unit([&](const at::Tensor& in) { return block->forward(in); }, x, run,
                                  {block.ptr()});
  });
  expect_bitwise_equal(want, grads_of(*block), "mixed");
  EXPECT_EQ(mixed.backward, plain.backward) << "neither product ran again";
  EXPECT_EQ(meter.summary().offloaded_bytes, kHiddenBytes) << "fc1's output only";
  // Without the kept product, the recompute runs fc2's product again.
  run.kept.clear();
  const Flops fc2_recomputed = step(*block, [&] {
    return detail::run_mixed_unit([&](const at::Tensor& in) { return block->forward(in); }, x, run,
                                  {block.ptr()});
  });
  expect_bitwise_equal(want, grads_of(*block), "mixed");
  EXPECT_EQ(fc2_recomputed.backward - plain.backward, 2 * kBatch * kHidden * kWidth);
}

// Without a group to recompute: a plain forward whose saved storages charged to the offloaded ops
// go to host memory.
TEST(MixedUnit, ARunWithoutRecomputeOffloadsWhatItsOpsMade) {
  ASSERT_TRUE(detail::SavedTensorCapture::available());
  torch::manual_seed(9);
  Block block;
  const at::Tensor x = torch::randn({kBatch, kWidth});
  const Flops plain = step(*block, [&] { return block->forward(x); });
  const auto want = grads_of(*block);
  OffloadMeter meter;
  detail::MixedUnitRun run;
  run.kept = {1};
  run.offloaded = {2};  // GELU's output, saved by fc2
  run.offload.cpu_copy(true).meter(meter);
  const Flops mixed = step(*block, [&] {
    return detail::run_mixed_unit([&](const at::Tensor& in) { return block->forward(in); }, x, run,
                                  {block.ptr()});
  });
  expect_bitwise_equal(want, grads_of(*block), "offloaded");
  EXPECT_EQ(mixed.backward, plain.backward);
  const OffloadSummary s = meter.summary();
  EXPECT_EQ(s.offloaded_tensors, 1);
  EXPECT_EQ(s.offloaded_bytes, kHiddenBytes);
  // The unit's input too (fc1 saves it): the plan offloads what the unit holds of its input.
  OffloadMeter with_input;
  run.offload_input = true;
  run.offload.meter(with_input);
  step(*block, [&] {
    return detail::run_mixed_unit([&](const at::Tensor& in) { return block->forward(in); }, x, run,
                                  {block.ptr()});
  });
  expect_bitwise_equal(want, grads_of(*block), "offloaded");
  EXPECT_EQ(with_input.summary().offloaded_bytes, kHiddenBytes + kBatch * kWidth * 4);
}

TEST(MixedUnit, ACheckpointOffloadsItsInputsWhenAsked) {
  ASSERT_TRUE(detail::SavedTensorCapture::available());
  torch::manual_seed(10);
  Block block;
  const at::Tensor x = torch::randn({kBatch, kWidth});
  step(*block, [&] { return block->forward(x); });
  const auto want = grads_of(*block);
  OffloadMeter meter;
  step(*block, [&] {
    return checkpoint([&](const at::Tensor& in) { return block->forward(in); }, x,
                      CheckpointOptions().module(block).offload_inputs(true).offload_options(
                          OffloadOptions().cpu_copy(true).min_bytes(0).meter(meter)));
  });
  expect_bitwise_equal(want, grads_of(*block), "checkpointed");
  const OffloadSummary s = meter.summary();
  EXPECT_EQ(s.offloaded_tensors, 1);
  EXPECT_EQ(s.offloaded_bytes, kBatch * kWidth * 4);
}

// Auto mode applies a joint plan that keeps part of its units, with offloading through the
// stand-in's link, and the steps it runs have the plain run's gradients.
class JointAutoTest : public test::SessionTest {
 protected:
  void TearDown() override {
    detail::set_cpu_offload_stand_in(0);
    test::SessionTest::TearDown();
  }
};

torch::nn::Sequential chain_of(int blocks) {
  torch::manual_seed(26);
  torch::nn::Sequential s;
  for (int i = 0; i < blocks; ++i) s->push_back(Block());
  return s;
}

TEST_F(JointAutoTest, AutoAppliesAJointPlanThatOffloadsWithTheSameGradients) {
  ASSERT_TRUE(detail::SavedTensorCapture::available());
  detail::set_cpu_offload_stand_in(25e9);
  Session session(Options()
                      .report_dir(dir())
                      .print_report(false)
                      .mode(Mode::Auto)
                      .checkpoint_budget(MemoryBudget::fraction(0.4)));
  configure_amp(session, AmpOptions().when(AmpOptions::When::Never));
  auto model = chain_of(4);
  auto reference = chain_of(4);
  session.watch(*model);
  const at::Tensor x = torch::randn({kBatch, kWidth});
  test::run_gradient_steps(session, model, x, 4);  // step 0 measures, the rest run the plan
  const EpochSummary& e = session.report().epochs.at(0);
  ASSERT_TRUE(e.modules.has_value());
  ASSERT_EQ(e.modules->activation_plans.size(), 1u);
  const ActivationPlanReport& p = e.modules->activation_plans[0];
  EXPECT_TRUE(p.applied) << p.message;
  EXPECT_TRUE(p.feasible) << p.message;
  EXPECT_GT(p.link_bytes_per_second, 0.0);
  std::int64_t offloaded = 0;
  for (const ActivationModuleRow& row : p.modules) offloaded += row.offloaded_bytes;
  EXPECT_GT(offloaded, 0) << "a link that hides every transfer: the plan offloads";
  EXPECT_EQ(p.message.find("cannot run selective"), std::string::npos) << p.message;
  // The last step ran with the plan: its gradients are the plain model's, bit for bit.
  reference->forward(x).pow(2).mean().backward();
  expect_bitwise_equal(grads_of(*reference), grads_of(*model), "planned");
}

}  // namespace
}  // namespace fathom
