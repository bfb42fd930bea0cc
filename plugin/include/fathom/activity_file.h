#pragma once
// Record and replay: GPU activity records saved to a file and read back, so the analyses can run
// again later, elsewhere, or on a fixture captured on a real GPU. The format is JSON lines,
// versioned (docs/report-schema.md, "activity file"): a header line, one record per line, an end
// line that counts the records, so a truncated file is told from a complete one. A name ending
// in .gz is written gzip-compressed; reading sees through gzip either way.
#include <fathom/gpu_records.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace fathom {

class GpuAggregator;

inline constexpr int kActivityFileVersion = 1;

// Writes records as they come (a collector's batches); close() writes the end line.
class ActivityFileWriter {
 public:
  explicit ActivityFileWriter(const std::string& path);  // throws fathom::Error naming the path
  ~ActivityFileWriter();  // closes if close() was not called; never throws
  ActivityFileWriter(const ActivityFileWriter&) = delete;
  ActivityFileWriter& operator=(const ActivityFileWriter&) = delete;

  void write(const GpuActivity& batch);  // throws fathom::Error on I/O failure
  void close();
  std::int64_t records() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

void save_activity(const GpuActivity& activity, const std::string& path);

// Reads a whole file. Throws fathom::Error naming the file and the problem: not an activity
// file, another format version, a line that is not a record, or truncated (no end line).
GpuActivity load_activity(const std::string& path);

// Streams a file into sink, at most batch_records records a batch (bounded memory).
void read_activity(const std::string& path, const std::function<void(GpuActivity&&)>& sink,
                   std::size_t batch_records = 65536);

// Streams a file through an aggregator.
void replay_activity(const std::string& path, GpuAggregator& into);

// True when the file starts with an activity file header; false for anything else. Throws
// fathom::Error only when the file cannot be read at all.
bool is_activity_file(const std::string& path);

}  // namespace fathom
