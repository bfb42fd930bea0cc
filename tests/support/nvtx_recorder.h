#pragma once
// A test NVTX tool. Loaded by NVTX through NVTX_INJECTION64_PATH, it records every domain
// push/pop/start/end/mark with its domain, message (registered strings resolved), category,
// thread and int64 payload. Tests read the events
// in-process (fathom_nvtx_recorder_* below); with NVTX_RECORDER_OUT set it also writes them to
// that file at exit, one event a line: kind<TAB>thread<TAB>domain<TAB>category<TAB>id<TAB>message.
#include <cstddef>
#include <cstdint>

extern "C" {

struct FathomNvtxEvent {
  char kind;  // 'P' push, 'p' pop, 'S' start, 'E' end, 'M' mark
  std::uint64_t thread;
  const char* domain;
  std::uint32_t category;
  std::uint32_t color;
  std::uint64_t id;  // start/end ranges
  const char* message;
  bool registered;   // the message came as a registered string handle
  bool has_payload;  // an NVTX_PAYLOAD_TYPE_INT64 payload came with it
  std::int64_t payload;
};

std::size_t fathom_nvtx_recorder_count();
// Copies event i into out; false when i is out of range. Strings live until clear().
bool fathom_nvtx_recorder_event(std::size_t i, FathomNvtxEvent* out);
void fathom_nvtx_recorder_clear();
}
