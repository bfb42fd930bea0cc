#pragma once
// Replay: the GPU analyses on records captured elsewhere, for tools and `fathom analyze`. Reads a
// fathom activity file (.jsonl, .jsonl.gz: what a session saves with Options::save_activity) or a
// PyTorch profiler (Kineto) Chrome trace (.json, .json.gz) into the records the CUPTI collector
// produces, and runs the same aggregation and analyses a live session runs.
#include <fathom/gpu_records.h>
#include <fathom/gpu_summary.h>

#include <string>

namespace fathom {

inline constexpr int kActivityFileVersion = 1;

// Reads a whole activity file. Throws fathom::Error naming the file and the problem: not an
// activity file, another format version, a line that is not a record, or truncated (no end line).
GpuActivity load_activity(const std::string& path);
void save_activity(const GpuActivity& activity, const std::string& path);
// True when the file starts with an activity file header; false for anything else. Throws
// fathom::Error only when the file cannot be read at all.
bool is_activity_file(const std::string& path);

// A PyTorch profiler trace. Both the 2021 format (Kernel, Memcpy, Memset, Runtime, Operator;
// "external id") and the current one (kernel, gpu_memcpy, gpu_memset, cuda_runtime, cuda_driver,
// cuda_sync, cpu_op, user_annotation; "External id") are read. Throws fathom::Error naming the
// file and what is wrong: unreadable, truncated or corrupted (gzip or JSON), or not a Chrome trace.
GpuActivity read_kineto_trace(const std::string& path);
GpuActivity parse_kineto_trace(const std::string& text, const std::string& source_name);

// Either kind of file, told apart by its content (an activity file header, or else a trace).
GpuActivity load_trace(const std::string& path);

// The aggregation and the analyses of a live session, on records in memory.
GpuSummary analyze_activity(const GpuActivity& activity, const GpuSummaryOptions& options = {});

}  // namespace fathom
