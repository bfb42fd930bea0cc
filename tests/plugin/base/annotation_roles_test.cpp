#include "base/annotation_roles.h"

#include <gtest/gtest.h>

namespace fathom {
namespace {

void expect_phase(const char* name, Phase p) {
  const AnnotationMeaning m = annotation_meaning(name);
  EXPECT_EQ(m.role, AnnotationRole::Phase) << name;
  EXPECT_EQ(m.phase, p) << name;
}

TEST(AnnotationRoles, Steps) {
  for (const char* n : {"ProfilerStep#5", "step", "step 12", "step#3"})
    EXPECT_EQ(annotation_meaning(n).role, AnnotationRole::Step) << n;
}

TEST(AnnotationRoles, FathomPhases) {
  expect_phase("data", Phase::Data);
  expect_phase("copy", Phase::Copy);
  expect_phase("forward", Phase::Forward);
  expect_phase("backward", Phase::Backward);
  expect_phase("optimizer", Phase::Optimizer);
}

TEST(AnnotationRoles, PyTorchProfilerNames) {
  expect_phase("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", Phase::Data);
  expect_phase("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", Phase::Data);
  expect_phase("## data_load ##", Phase::Data);
  expect_phase("Optimizer.step#SGD.step", Phase::Optimizer);
  expect_phase("Optimizer.zero_grad#SGD.zero_grad", Phase::Optimizer);
  expect_phase("## forward ##", Phase::Forward);
  expect_phase("autograd::engine::evaluate_function: ConvolutionBackward0", Phase::Backward);
}

// 2021 traces have no evaluate_function wrapper: the autograd nodes themselves mark backward.
TEST(AnnotationRoles, AutogradNodesAreBackward) {
  for (const char* n : {"CudnnConvolutionBackward", "ReluBackward1", "MmBackward0", "AddBackward0",
                        "torch::autograd::AccumulateGrad"})
    expect_phase(n, Phase::Backward);
  for (const char* n : {"aten::cudnn_convolution_backward", "Backward", "backward0",
                        "aten::threshold_backward", "my Backward"})
    EXPECT_NE(annotation_meaning(n).phase == Phase::Backward &&
                  annotation_meaning(n).role == AnnotationRole::Phase,
              true)
        << n;
}

TEST(AnnotationRoles, OthersMeanNothing) {
  for (const char* n :
       {"nccl:all_reduce", "[param|cuda]", "aten::mm", "stepper", "Forward", "Backward", ""})
    EXPECT_EQ(annotation_meaning(n).role, AnnotationRole::None) << n;
}

}  // namespace
}  // namespace fathom
