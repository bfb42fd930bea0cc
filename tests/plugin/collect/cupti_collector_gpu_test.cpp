// A real capture: the collector with the real libcupti, around work issued through the CUDA
// driver (loaded with dlopen, so this builds without a GPU or CUDA libraries). Label gpu: each
// test skips, saying why, where there is no driver or device.
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "collect/cupti/cupti_collector.h"

namespace fathom {
namespace {

// A kernel that needs no compiler here: PTX the driver compiles for whatever GPU it finds.
constexpr const char* kPtx = R"(
.version 7.0
.target sm_70
.address_size 64
.visible .entry fathom_test_kernel(.param .u64 out) {
  .reg .b64 %rd<3>;
  .reg .b32 %r<2>;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd2, %rd1;
  mov.u32 %r1, 7;
  st.global.u32 [%rd2], %r1;
  ret;
}
)";

struct Driver {
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*device_get_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*primary_ctx_release)(CUdevice) = nullptr;
  CUresult (*ctx_set_current)(CUcontext) = nullptr;
  CUresult (*ctx_synchronize)() = nullptr;
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, CUstream, void**, void**) = nullptr;
  CUresult (*mem_alloc)(CUdeviceptr*, std::size_t) = nullptr;
  CUresult (*mem_free)(CUdeviceptr) = nullptr;
  CUresult (*mem_alloc_host)(void**, std::size_t) = nullptr;
  CUresult (*mem_free_host)(void*) = nullptr;
  CUresult (*memcpy_htod)(CUdeviceptr, const void*, std::size_t) = nullptr;
  CUresult (*memcpy_htod_async)(CUdeviceptr, const void*, std::size_t, CUstream) = nullptr;
  CUresult (*memset_d8)(CUdeviceptr, unsigned char, std::size_t) = nullptr;

  std::string why;  // empty when usable
  CUdevice device = 0;
  CUcontext context = nullptr;

  template <typename Fn>
  void get(void* lib, const char* name, Fn& f) {
    f = reinterpret_cast<Fn>(dlsym(lib, name));
    if (!f && why.empty()) why = std::string("libcuda.so.1 lacks ") + name;
  }

  Driver() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      why = "no CUDA driver (libcuda.so.1 not found)";
      return;
    }
    get(lib, "cuInit", init);
    get(lib, "cuDeviceGetCount", device_get_count);
    get(lib, "cuDeviceGet", device_get);
    get(lib, "cuDevicePrimaryCtxRetain", primary_ctx_retain);
    get(lib, "cuDevicePrimaryCtxRelease_v2", primary_ctx_release);
    get(lib, "cuCtxSetCurrent", ctx_set_current);
    get(lib, "cuCtxSynchronize", ctx_synchronize);
    get(lib, "cuModuleLoadData", module_load_data);
    get(lib, "cuModuleGetFunction", module_get_function);
    get(lib, "cuLaunchKernel", launch_kernel);
    get(lib, "cuMemAlloc_v2", mem_alloc);
    get(lib, "cuMemFree_v2", mem_free);
    get(lib, "cuMemAllocHost_v2", mem_alloc_host);
    get(lib, "cuMemFreeHost", mem_free_host);
    get(lib, "cuMemcpyHtoD_v2", memcpy_htod);
    get(lib, "cuMemcpyHtoDAsync_v2", memcpy_htod_async);
    get(lib, "cuMemsetD8_v2", memset_d8);
    if (!why.empty()) return;
    int count = 0;
    if (init(0) != CUDA_SUCCESS || device_get_count(&count) != CUDA_SUCCESS || count == 0) {
      why = "no CUDA device (cuInit / cuDeviceGetCount)";
      return;
    }
    if (device_get(&device, 0) != CUDA_SUCCESS ||
        primary_ctx_retain(&context, device) != CUDA_SUCCESS ||
        ctx_set_current(context) != CUDA_SUCCESS) {
      why = "could not make a context on device 0";
    }
  }
};

Driver& driver() {
  static Driver d;
  return d;
}

#define SKIP_WITHOUT_GPU()                                   \
  do {                                                       \
    if (!driver().why.empty()) GTEST_SKIP() << driver().why; \
  } while (0)

#define CU(call) ASSERT_EQ((call), CUDA_SUCCESS) << #call

class CuptiCaptureTest : public ::testing::Test {
 protected:
  void start() {
    collector = CuptiCollector::start([this](GpuActivity&& a) { batches.push_back(std::move(a)); });
    ASSERT_EQ(collector->state(), CuptiState::Collecting)
        << (collector->not_measured().empty() ? "" : collector->not_measured()[0].why);
  }
  GpuActivity merged() const {
    GpuActivity all;
    for (const GpuActivity& b : batches) {
      all.kernels.insert(all.kernels.end(), b.kernels.begin(), b.kernels.end());
      all.memcpys.insert(all.memcpys.end(), b.memcpys.begin(), b.memcpys.end());
      all.memsets.insert(all.memsets.end(), b.memsets.begin(), b.memsets.end());
      all.runtime_calls.insert(all.runtime_calls.end(), b.runtime_calls.begin(),
                               b.runtime_calls.end());
      all.dropped_records += b.dropped_records;
    }
    return all;
  }
  std::unique_ptr<CuptiCollector> collector;
  std::vector<GpuActivity> batches;
};

TEST_F(CuptiCaptureTest, PageableAndPinnedCopiesAreToldApartWithTheirBytes) {
  SKIP_WITHOUT_GPU();
  Driver& d = driver();
  start();
  constexpr std::size_t kPageable = 3 << 20, kPinned = 5 << 20, kSet = 1 << 20;
  std::vector<std::uint8_t> pageable(kPageable, 1);
  void* pinned = nullptr;
  CUdeviceptr dev = 0;
  CU(d.mem_alloc(&dev, kPinned));
  CU(d.mem_alloc_host(&pinned, kPinned));
  std::memset(pinned, 2, kPinned);
  CU(d.memcpy_htod(dev, pageable.data(), kPageable));
  CU(d.memcpy_htod_async(dev, pinned, kPinned, nullptr));
  CU(d.memset_d8(dev, 0, kSet));
  CU(d.ctx_synchronize());
  collector->flush(true);
  GpuActivity a = merged();
  EXPECT_EQ(a.dropped_records, 0);
  const MemcpyRecord* from_pageable = nullptr;
  const MemcpyRecord* from_pinned = nullptr;
  for (const MemcpyRecord& m : a.memcpys) {
    if (m.kind != MemcpyKind::HostToDevice) continue;
    if (m.src == MemoryKind::Pageable) from_pageable = &m;
    if (m.src == MemoryKind::Pinned) from_pinned = &m;
  }
  ASSERT_NE(from_pageable, nullptr);
  ASSERT_NE(from_pinned, nullptr);
  EXPECT_EQ(from_pageable->bytes, static_cast<std::int64_t>(kPageable));
  EXPECT_EQ(from_pageable->dst, MemoryKind::Device);
  EXPECT_FALSE(from_pageable->async);
  EXPECT_EQ(from_pinned->bytes, static_cast<std::int64_t>(kPinned));
  EXPECT_TRUE(from_pinned->async);
  EXPECT_GT(from_pinned->end_ns, from_pinned->start_ns);
  ASSERT_FALSE(a.memsets.empty());
  EXPECT_EQ(a.memsets.back().bytes, static_cast<std::int64_t>(kSet));
  collector->stop();
  d.mem_free_host(pinned);
  d.mem_free(dev);
}

TEST_F(CuptiCaptureTest, AKernelIsAttributedToTheOpAndPhaseAroundItsLaunch) {
  SKIP_WITHOUT_GPU();
  Driver& d = driver();
  start();
  CUmodule module = nullptr;
  CUfunction fn = nullptr;
  CU(d.module_load_data(&module, kPtx));
  CU(d.module_get_function(&fn, module, "fathom_test_kernel"));
  CUdeviceptr out = 0;
  CU(d.mem_alloc(&out, 4));
  void* args[] = {&out};
  push_external_id(ExternalIdKind::Phase, phase_external_id(Phase::Forward));
  push_external_id(ExternalIdKind::Op, 4242);
  CU(d.launch_kernel(fn, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
  pop_external_id(ExternalIdKind::Op);
  pop_external_id(ExternalIdKind::Phase);
  collector->flush(false);  // a step end: whatever completed
  CU(d.ctx_synchronize());
  collector->flush(true);  // the epoch end
  GpuActivity a = merged();
  const KernelRecord* k = nullptr;
  for (const KernelRecord& r : a.kernels) {
    if (r.name.find("fathom_test_kernel") != std::string::npos) k = &r;
  }
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->external_id, 4242u);
  EXPECT_EQ(k->phase, Phase::Forward);
  EXPECT_EQ(k->grid_x, 1);
  EXPECT_EQ(k->block_x, 32);
  EXPECT_GT(k->end_ns, k->start_ns);
  bool launch = false;
  for (const RuntimeCallRecord& c : a.runtime_calls) {
    launch = launch || (c.name == "cuLaunchKernel" && c.external_id == 4242u);
  }
  EXPECT_TRUE(launch) << "the driver launch is counted and attributed";
  collector->stop();
  d.mem_free(out);
}

TEST_F(CuptiCaptureTest, FathomHoldsNoSubscriptionAndANamelessHolderIsAnotherClient) {
  SKIP_WITHOUT_GPU();
  auto first = CuptiCollector::start([](GpuActivity&&) {});
  ASSERT_EQ(first->state(), CuptiState::Collecting);
  void* lib = dlopen(first->library().c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr) << first->library();
  using Subscribe = CUptiResult (*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*);
  using Unsubscribe = CUptiResult (*)(CUpti_SubscriberHandle);
  auto subscribe = reinterpret_cast<Subscribe>(dlsym(lib, "cuptiSubscribe"));
  auto unsubscribe = reinterpret_cast<Unsubscribe>(dlsym(lib, "cuptiUnsubscribe"));
  ASSERT_TRUE(subscribe && unsubscribe);
  auto ignore = [](void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {};
  // Stand in for torch.profiler's Kineto at its first profile, while fathom collects: the
  // subscription must be free.
  CUpti_SubscriberHandle other = nullptr;
  ASSERT_EQ(subscribe(&other, ignore, nullptr), CUPTI_SUCCESS)
      << "fathom holds CUPTI's only subscription while it collects";
  first.reset();
  // A subscriber fathom knows nothing of (no known client is configured here): fathom backs off.
  auto c = CuptiCollector::start([](GpuActivity&&) {});
  EXPECT_EQ(c->state(), CuptiState::Busy);
  ASSERT_FALSE(c->not_measured().empty());
  EXPECT_NE(c->not_measured()[0].why.find("holds CUPTI's subscription"), std::string::npos)
      << c->not_measured()[0].why;
  unsubscribe(other);
}

}  // namespace
}  // namespace fathom
