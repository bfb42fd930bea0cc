// How many CUPTI records a step costs: the CUDA runtime calls of a real PyTorch profiler trace,
// replayed through the CUPTI stand-in, once with every runtime, driver and synchronization call
// recorded (what fathom enabled before issue 12) and once with fathom's selection.
//
//   cupti_volume_bench [trace.json.gz ...]   (default: tests/data/traces' ResNet-50 and AlexNet)
//
// The traces were recorded by Kineto, which leaves cudaGetDevice and a few driver calls out, so
// the "every call" column is a lower bound of what recording whole domains costs.
#include <fathom/replay.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "collect/cupti/activity_parser.h"
#include "collect/cupti/cupti_collector.h"
#include "standin.h"

namespace {

using fathom::standin::Control;

std::map<std::string, std::uint32_t> runtime_cbids(Control& c) {
  std::map<std::string, std::uint32_t> out;
  for (std::uint32_t cbid = 1; cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE; ++cbid) {
    const char* name = nullptr;
    if (c.api.get_callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name) == CUPTI_SUCCESS && name)
      out.emplace(fathom::cupti::api_display_name(name), cbid);
  }
  return out;
}

// The trace's runtime calls, in order, as the stand-in's simulated program.
std::size_t replay(Control& c, const std::vector<std::string>& calls,
                   const std::map<std::string, std::uint32_t>& cbids) {
  std::size_t launches = 0;
  for (const std::string& n : calls) {
    if (n == "cudaLaunchKernel") {
      c.launch_kernel("kernel", 7, 2'000, false);
      ++launches;
    } else if (n == "cudaMemcpyAsync") {
      c.memcpy(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
               CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 4096, 7, 1'000, true);
    } else if (n == "cudaStreamSynchronize") {
      c.stream_synchronize(7);
    } else if (n == "cudaEventQuery") {
      c.event_query(7);
    } else if (auto it = cbids.find(n); it != cbids.end()) {
      c.runtime_call(it->second);
    }
  }
  return launches;
}

void CUPTIAPI count_request(std::uint8_t** b, std::size_t* size, std::size_t* max) {
  *b = static_cast<std::uint8_t*>(std::aligned_alloc(8, 1 << 20));
  *size = 1 << 20;
  *max = 0;
}
void CUPTIAPI count_complete(CUcontext, std::uint32_t, std::uint8_t* b, std::size_t, std::size_t) {
  std::free(b);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> traces;
  for (int i = 1; i < argc; ++i) traces.push_back(argv[i]);
  if (traces.empty()) {
    traces = {FATHOM_TEST_TRACES "/tbplugin_v100_resnet50_workers0.json.gz",
              FATHOM_TEST_TRACES "/hta_a100_alexnet.json.gz"};
  }
  Control& c = fathom::standin::load();
  const auto cbids = runtime_cbids(c);
  std::printf("%-44s %9s %14s %14s %8s\n", "trace", "launches", "every call", "fathom's", "ratio");
  for (const std::string& path : traces) {
    std::vector<std::string> calls;
    try {
      const fathom::GpuActivity a = fathom::read_kineto_trace(path);
      for (const fathom::RuntimeCallRecord& r : a.runtime_calls) calls.push_back(r.name);
    } catch (const std::exception& e) {
      std::printf("%s: %s\n", path.c_str(), e.what());
      continue;
    }
    // Before: whole domains and every synchronization record.
    c.reset();
    c.api.activity_register_callbacks(count_request, count_complete);
    for (CUpti_ActivityKind k :
         {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
          CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
          CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
          CUPTI_ACTIVITY_KIND_MEMCPY2})
      c.api.activity_enable(k);
    const std::size_t launches = replay(c, calls, cbids);
    c.wait_gpu();
    c.api.activity_flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    const auto before = c.stats();
    // After: fathom's collector.
    c.reset();
    fathom::CuptiConfig config;
    config.getenv = [](const char*) -> const char* { return nullptr; };
    {
      auto collector = fathom::CuptiCollector::start(
          c.api, [](fathom::GpuActivity&&) {}, config);
      replay(c, calls, cbids);
      c.wait_gpu();
      collector->flush(true);
    }
    const auto after = c.stats();
    const auto host = [](const fathom::standin::Stats& s) {
      return s.runtime_records + s.driver_records + s.sync_records + s.correlation_records;
    };
    std::string name = path.substr(path.find_last_of('/') + 1);
    std::printf("%-44s %9zu %8llu (%4.2f) %8llu (%4.2f) %7.2fx\n", name.c_str(), launches,
                static_cast<unsigned long long>(host(before)),
                static_cast<double>(host(before)) / static_cast<double>(launches),
                static_cast<unsigned long long>(host(after)),
                static_cast<double>(host(after)) / static_cast<double>(launches),
                static_cast<double>(host(before)) / static_cast<double>(host(after)));
  }
  std::printf(
      "(host-side records: API calls, synchronizations, external correlations; per launch "
      "in parentheses)\n");
  return 0;
}
