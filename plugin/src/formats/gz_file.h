#pragma once
// Files that may be gzip-compressed: profiler traces (.json.gz) and replay files (.jsonl.gz).
// Reading sees through gzip whatever the name says; writing compresses when the name ends in
// .gz. Every failure is a fathom::Error naming the file and what is wrong with it.
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace fathom::detail {

bool has_gz_suffix(std::string_view path) noexcept;

// The most an input may hold, uncompressed: a trace or report past it is refused with a clear
// error rather than exhausting memory (a small .gz can expand a thousandfold).
inline constexpr std::int64_t kMaxInputBytes = std::int64_t{2} << 30;  // 2 GiB: traces
inline constexpr std::int64_t kMaxReportBytes = std::int64_t{256} << 20;
// The longest line read_line returns: far above any record fathom writes (a few KiB), so a file
// of one endless line cannot double read_line's buffer up to twice the input limit.
inline constexpr std::size_t kMaxLineBytes = std::size_t{64} << 20;

// What an input must start with. Every JSON reader (traces, reports, analyses, activity files)
// says Json: a file whose first byte past whitespace is not '{' or '[' is refused at that byte,
// not after gigabytes of a gzip bomb have been read into memory.
enum class Content : std::uint8_t { Any, Json };

// Opens regular files only (a device such as /dev/zero, a pipe or a folder is a clear error).
// Memory is bounded by max_bytes: no more than max_bytes + 1 bytes are ever read, and read_all
// holds the file once (in blocks, joined into one string as they are freed), never a doubled
// buffer.
class InputFile {
 public:
  explicit InputFile(std::string path, std::int64_t max_bytes = kMaxInputBytes,
                     Content content = Content::Any);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // The next line without its newline; false at the end of the file. A line longer than
  // kMaxLineBytes is a fathom::Error.
  bool read_line(std::string& line);
  // Everything from here to the end.
  std::string read_all();
  // Up to n bytes from here, without consuming them.
  std::string peek(std::size_t n);
  // The next bytes, as many as one read gives (what peek() buffered first); empty at the end.
  // Valid until the next call: a reader that parses as it reads (the Kineto trace's) holds one
  // block of the file at a time, never the whole of it.
  std::string_view read_block();
  const std::string& path() const noexcept { return path_; }

 private:
  bool fill();  // reads more into buffer_; false at the end
  // Up to n bytes of the file into out, within max_bytes_ (past it: fathom::Error); 0 at the end.
  std::size_t read_some(char* out, std::size_t n);
  void check_content(std::string_view fresh);  // Content::Json: the first byte that is not space

  std::string path_;
  void* handle_ = nullptr;  // gzFile, or FILE* without zlib
  std::string buffer_;
  std::size_t pos_ = 0;
  bool eof_ = false;
  std::int64_t max_bytes_;
  std::int64_t read_bytes_ = 0;
  Content content_;
  bool content_checked_ = false;
};

class OutputFile {
 public:
  explicit OutputFile(std::string path);
  ~OutputFile();  // closes; never throws (call close() to see errors)
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(std::string_view text);
  // Hands everything written so far to the system: a reader (or a kill) sees it whole, and a
  // gzip stream so far decodes.
  void flush();
  void close();

 private:
  std::string path_;
  void* handle_ = nullptr;
  bool gzip_ = false;
};

}  // namespace fathom::detail
