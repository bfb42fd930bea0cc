#pragma once
// Rebuilds the ranges a program emitted from recorded NVTX events, to check that they are
// balanced and nested. Works on in-process events and on NVTX_RECORDER_OUT dumps alike.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fathom::test {

struct NvtxEvent {
  char kind = 0;  // 'P' push, 'p' pop, 'S' start, 'E' end, 'M' mark
  std::uint64_t thread = 0;
  std::string domain;
  std::uint32_t category = 0;
  std::uint32_t color = 0;
  std::uint64_t id = 0;
  std::string message;
  bool registered = false;              // the message was a registered string handle
  std::optional<std::int64_t> payload;  // an int64 payload (an op's sequence number)
};

// A closed range with the names of the push ranges around it, outermost first.
struct NvtxRange {
  std::string message;
  std::uint32_t category = 0;
  std::uint64_t thread = 0;
  bool process_range = false;  // start/end rather than push/pop
  std::vector<std::string> ancestors;
  bool registered = false;
  std::optional<std::int64_t> payload;
};

struct NvtxTree {
  std::vector<NvtxRange> ranges;
  std::vector<std::string> errors;  // unbalanced pops, unclosed ranges, unknown ends
};

// Events the recorder library (loaded through NVTX_INJECTION64_PATH) holds in this process.
std::vector<NvtxEvent> recorded_events();
void clear_recorded_events();
std::vector<NvtxEvent> read_event_dump(const std::string& path);

// Ranges of one domain; every push must be popped on its thread, every start ended.
NvtxTree build_tree(const std::vector<NvtxEvent>& events, const std::string& domain);

}  // namespace fathom::test
