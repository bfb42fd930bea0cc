#pragma once
// torch.profiler as a test starts it from C++, the way Python's torch.profiler.profile does.
#include <torch/csrc/autograd/profiler_kineto.h>

#include <set>

namespace fathom::test {

inline void start_torch_profiler(bool cuda) {
  using namespace torch::profiler::impl;
  const ProfilerConfig config(ProfilerState::KINETO);
  std::set<ActivityType> activities{ActivityType::CPU};
  if (cuda) activities.insert(ActivityType::CUDA);
  torch::autograd::profiler::prepareProfiler(config, activities);
  torch::autograd::profiler::enableProfiler(config, activities);
}

}  // namespace fathom::test
