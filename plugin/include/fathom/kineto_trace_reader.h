#pragma once
// Reads a PyTorch profiler (Kineto) Chrome trace, .json or .json.gz, into the same records the
// CUPTI collector produces, so every analysis runs offline on a trace from any machine. Both
// the 2021 format (Kernel, Memcpy, Memset, Runtime, Operator; "external id") and the current one
// (kernel, gpu_memcpy, gpu_memset, cuda_runtime, cuda_driver, cuda_sync, cpu_op,
// user_annotation; "External id") are read. Copy kinds come from names such as
// "Memcpy HtoD (Pageable -> Device)"; whether a copy was asynchronous from the runtime call with
// the same correlation id; the GPUs from deviceProperties.
#include <fathom/gpu_records.h>

#include <string>

namespace fathom {

// Throws fathom::Error naming the file and what is wrong: unreadable, truncated or corrupted
// (gzip or JSON), or not a Chrome trace.
GpuActivity read_kineto_trace(const std::string& path);
GpuActivity parse_kineto_trace(const std::string& text, const std::string& source_name);

}  // namespace fathom
