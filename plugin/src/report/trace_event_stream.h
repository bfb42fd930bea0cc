#pragma once
// A live session's Chrome / Perfetto trace (Options::trace_file, FATHOM_TRACE): Trace Event Format
// in its JSON array form, written as the run goes. The array form is the one whose closing `]` the
// format makes optional, so the file a killed run leaves (everything up to the last flush) still
// opens in ui.perfetto.dev and chrome://tracing; close() writes the bracket. Events are appended in
// the order they happen on the training thread, so the B/E pairs of one thread nest and their
// timestamps never go back.
//
// pid 1 is the host (tid 1: the training thread's epochs, steps, phases and modules; tid 2:
// fathom's findings and alarms), pid 2 + device the GPUs with one tid per stream, as
// format_chrome_trace lays them out (chrome_trace.h). Timestamps are microseconds from the
// session's start, on fathom's clock (GPU records arrive already moved onto it).
#include <fathom/gpu_records.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>

namespace fathom::detail {
class OutputFile;
}

namespace fathom {

class TraceEventStream {
 public:
  static constexpr int kHostPid = 1;
  static constexpr std::int64_t kTrainingTid = 1;
  static constexpr std::int64_t kFindingsTid = 2;

  // Creates (or replaces) path, gzip-compressed when it ends in .gz. origin_ns: fathom's clock at
  // ts 0. Throws fathom::Error naming the path and the reason.
  TraceEventStream(const std::string& path, std::int64_t origin_ns, std::string process_name);
  ~TraceEventStream();  // close()s if not closed; never throws
  TraceEventStream(const TraceEventStream&) = delete;
  TraceEventStream& operator=(const TraceEventStream&) = delete;

  // A duration on the training thread: begin and end pair up, innermost first.
  void begin(std::string_view name, std::string_view category, std::int64_t ns);
  void end(std::int64_t ns);
  // A duration known once it ended (the inferred data gap between steps).
  void complete(std::string_view name, std::string_view category, std::int64_t begin_ns,
                std::int64_t end_ns);
  // A moment on the findings track; args_json: a JSON object, or empty.
  void instant(std::string_view name, std::string_view category, std::int64_t ns,
               std::string_view args_json = {});
  // The batch's kernels, copies and memsets on their devices' stream tracks.
  void gpu(const GpuActivity& batch);

  // Hands what is buffered to the file (whole events only): at epoch ends, and when the buffer
  // passes kFlushBytes.
  void flush();
  // Ends whatever begin() left open at ns, writes the closing bracket and closes the file.
  void close(std::int64_t ns);

  const std::string& path() const noexcept { return path_; }
  std::int64_t events() const noexcept { return events_; }

 private:
  static constexpr std::size_t kFlushBytes = 1 << 20;
  void event_prefix(char ph, int pid, std::int64_t tid, std::int64_t ns);
  void name_track(int pid, std::int64_t tid, std::string_view name);
  void maybe_flush();

  std::string path_;
  std::unique_ptr<detail::OutputFile> file_;
  std::string buffer_;
  std::int64_t origin_ns_;
  std::int64_t last_host_ns_;  // B/E timestamps never go back, even if the clock did
  int open_ = 0;               // begin()s not yet ended
  std::int64_t events_ = 0;
  std::set<std::pair<int, std::int64_t>> named_tracks_;
};

}  // namespace fathom
