#pragma once
// Record and replay: GPU activity records saved to a file and read back, so the analyses can run
// again later, elsewhere, or on a fixture captured on a real GPU. The format is JSON lines,
// versioned (docs/report-schema.md, "activity file"): a header line, one record per line, an end
// line that counts the records, so a truncated file is told from a complete one. A name ending
// in .gz is written gzip-compressed; reading sees through gzip either way.
#include <fathom/gpu_records.h>
#include <fathom/trace_files.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace fathom {

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

// Streams a file into sink, at most batch_records records a batch (bounded memory).
void read_activity(const std::string& path, const std::function<void(GpuActivity&&)>& sink,
                   std::size_t batch_records = 65536);

}  // namespace fathom
