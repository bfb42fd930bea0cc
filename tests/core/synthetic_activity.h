#pragma once
// One step of synthetic GPU activity with every number known, for the aggregator and analysis
// tests. Times in microseconds (us()), one device, thread 1 launches everything.
//
//   step             [0, 1000)
//   data             [0, 200)   forward [200, 600)   backward [600, 900)   optimizer [900, 1000)
//   memcpy HtoD      [220, 300)  pageable, async, 8000 B, launched at 210
//   k1 xmma bf16 TC  [300, 400)  launched 250, op aten::addmm (external id 101)
//   k2 sgemm         [400, 500)  launched 260, op aten::mm [30,64]x[64,128] (external id 100)
//   k3 xmma bf16 TC  [650, 750)  launched 640, op found by time: aten::mm [638, 642] (no id)
//   k4 elementwise   [750, 755)  launched 645: tiny
//   k5 NCCL          [700, 800)  launched 645, stream 2
//   cudaStreamSynchronize [780, 810]
//   k6 elementwise   [850, 900)  launched 805
//
// Busy 480 of 1000. Idle 520: data wait 200 (leading gap [0,220) inside data [0,200)),
// late launches 20 ([200,220), memcpy launched at 210) + 150 ([500,650), k3 launched at 640),
// synchronization 50 ([800,850), host in cudaStreamSynchronize at 800), other 100 ([900,1000)).
#include <fathom/gpu_records.h>

#include "records/annotation_roles.h"

namespace fathom::test {

constexpr std::int64_t us(std::int64_t v) { return v * 1000; }

inline const char* kXmmaBf16 =
    "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_"
    "tensor16x8x16_"
    "execute_kernel";
inline const char* kSgemm = "volta_sgemm_64x64_nt";
inline const char* kElementwise =
    "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float> >";
inline const char* kNccl =
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)";

inline KernelRecord kernel(const char* name, std::int64_t b, std::int64_t e, std::uint64_t corr,
                           std::uint64_t ext = 0, std::int32_t stream = 7) {
  KernelRecord k;
  k.name = name;
  k.stream = stream;
  k.start_ns = us(b);
  k.end_ns = us(e);
  k.correlation_id = corr;
  k.external_id = ext;
  return k;
}

inline RuntimeCallRecord call(const char* name, std::int64_t b, std::int64_t e,
                              std::uint64_t corr) {
  RuntimeCallRecord r;
  r.name = name;
  r.thread = 1;
  r.start_ns = us(b);
  r.end_ns = us(e);
  r.correlation_id = corr;
  return r;
}

inline AnnotationRecord annotation(const char* name, std::int64_t b, std::int64_t e) {
  return classified_annotation(name, 1, us(b), us(e));  // as a trace reader would
}

inline OpRecord op(const char* name, std::int64_t b, std::int64_t e, std::uint64_t ext,
                   std::vector<std::vector<std::int64_t>> shapes, std::vector<std::string> dtypes) {
  OpRecord o;
  o.name = name;
  o.thread = 1;
  o.start_ns = us(b);
  o.end_ns = us(e);
  o.external_id = ext;
  o.input_shapes = std::move(shapes);
  o.input_dtypes = std::move(dtypes);
  return o;
}

inline GpuActivity one_step() {
  GpuActivity a;
  a.devices.push_back(DeviceProperties{0, "NVIDIA A100-SXM4-80GB", 8, 0, 80LL << 30});
  a.annotations = {
      annotation("ProfilerStep#1", 0, 1000),
      annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 0, 200),
      annotation("forward", 200, 600), annotation("backward", 600, 900),
      annotation("Optimizer.step#SGD.step", 900, 1000)};
  a.ops = {op("aten::addmm", 248, 252, 101, {{128}, {64, 64}, {64, 128}},
              {"c10::BFloat16", "c10::BFloat16", "c10::BFloat16"}),
           op("aten::mm", 255, 270, 100, {{30, 64}, {64, 128}}, {"float", "float"}),
           op("aten::mm", 638, 642, 0, {{64, 64}, {64, 64}}, {"c10::BFloat16", "c10::BFloat16"}),
           op("aten::add", 644, 646, 102, {{64}}, {"float"})};
  a.runtime_calls = {
      call("cudaMemcpyAsync", 210, 215, 7),       call("cudaLaunchKernel", 250, 251, 1),
      call("cudaLaunchKernel", 260, 261, 2),      call("cudaLaunchKernel", 640, 641, 3),
      call("cudaLaunchKernel", 645, 646, 4),      call("cudaLaunchKernel", 645, 646, 5),
      call("cudaStreamSynchronize", 780, 810, 0), call("cudaLaunchKernel", 805, 806, 6)};
  a.kernels = {kernel(kXmmaBf16, 300, 400, 1, 101), kernel(kSgemm, 400, 500, 2, 100),
               kernel(kXmmaBf16, 650, 750, 3),      kernel(kElementwise, 750, 755, 4, 102),
               kernel(kNccl, 700, 800, 5, 0, 2),    kernel(kElementwise, 850, 900, 6)};
  MemcpyRecord m;
  m.kind = MemcpyKind::HostToDevice;
  m.src = MemoryKind::Pageable;
  m.dst = MemoryKind::Device;
  m.bytes = 8000;
  m.stream = 7;
  m.start_ns = us(220);
  m.end_ns = us(300);
  m.async = true;
  m.correlation_id = 7;
  a.memcpys.push_back(m);
  return a;
}

}  // namespace fathom::test
