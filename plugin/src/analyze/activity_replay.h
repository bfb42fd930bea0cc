#pragma once
// An activity file streamed through an aggregator, in bounded memory (benchmarks, tests): what
// load_trace + analyze_activity do at once, batch by batch.
#include <string>

#include "aggregate/gpu_aggregator.h"

namespace fathom {

void replay_activity(const std::string& path, GpuAggregator& into);

}  // namespace fathom
