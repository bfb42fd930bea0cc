#include "formats/gz_file.h"

#include <fathom/error.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "base/file_system.h"

#ifdef FATHOM_HAVE_ZLIB
#include <zlib.h>
#endif

namespace fathom::detail {
namespace {

constexpr std::size_t kChunk = std::size_t{1} << 16;

std::string system_reason() { return std::strerror(errno); }

std::string bytes_limit_text(std::int64_t bytes) { return fmt::format("{} MiB", bytes >> 20); }

#ifdef FATHOM_HAVE_ZLIB
gzFile gz(void* h) { return static_cast<gzFile>(h); }

// zlib's own words for what went wrong (without the path it puts first), and what they mean.
std::string gz_problem(gzFile f, int code, const std::string& path) {
  int err = Z_OK;
  const char* msg = gzerror(f, &err);
  if (code == 0) code = err;
  std::string text = msg && *msg ? msg : "read error";
  if (text.rfind(path + ": ", 0) == 0) text.erase(0, path.size() + 2);
  if (code == Z_BUF_ERROR) return "the gzip stream is truncated (" + text + ")";
  if (code == Z_DATA_ERROR) return "the gzip data is corrupted (" + text + ")";
  if (code == Z_ERRNO) return system_reason();
  return text;
}
#else
bool starts_with_gzip_magic(std::FILE* f) {
  unsigned char magic[2] = {0, 0};
  const std::size_t n = std::fread(magic, 1, 2, f);
  std::rewind(f);
  return n == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}
#endif

Error not_a_plain_file(const std::string& path) {
  return Error(
      fmt::format("cannot create {}: it is not a plain file of its own (a device, a pipe or a "
                  "hard link); remove it or choose another name",
                  path));
}

// The file at path, emptied, for writing. A link at path is refused rather than followed, and so
// is a file with other names (a hard link): emptying it would empty a file someone else named.
int open_for_replacing(const std::string& path) {
  // O_NONBLOCK: the open of a FIFO waits for a reader, forever (a FIFO at FATHOM_TRACE held the
  // session's constructor); without one it fails at once (ENXIO), with one it is refused below.
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0 && errno == ENXIO) throw not_a_plain_file(path);
  if (fd < 0) {
    if (errno == ELOOP)
      throw Error(
          fmt::format("cannot create {}: it is a symbolic link; fathom writes no file "
                      "through a link: remove it or choose another name",
                      path));
    throw Error(fmt::format("cannot create {}: {}", path, system_reason()));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink > 1) {
    ::close(fd);
    throw not_a_plain_file(path);
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  if (::ftruncate(fd, 0) != 0) {
    const std::string why = system_reason();
    ::close(fd);
    throw Error(fmt::format("cannot create {}: {}", path, why));
  }
  return fd;
}

}  // namespace

bool has_gz_suffix(std::string_view path) noexcept {
  return path.size() >= 3 && path.substr(path.size() - 3) == ".gz";
}

InputFile::InputFile(std::string path, std::int64_t max_bytes, Content content)
    : path_(std::move(path)), max_bytes_(max_bytes), content_(content) {
  // Checked before anything can wait on it (a FIFO), and only a regular file: a device
  // (/dev/zero), a pipe or a folder has no end, or none worth waiting for.
  std::string why;
  const int fd = fs::open_regular_file(path_, why);
  if (fd < 0) throw Error(why);
#ifdef FATHOM_HAVE_ZLIB
  gzFile f = gzdopen(fd, "rb");
  if (!f) {
    ::close(fd);
    throw Error(fmt::format("cannot open {}: {}", path_, system_reason()));
  }
  gzbuffer(f, kChunk);
  handle_ = f;
#else
  std::FILE* f = ::fdopen(fd, "rb");
  if (!f) {
    ::close(fd);
    throw Error(fmt::format("cannot open {}: {}", path_, system_reason()));
  }
  if (starts_with_gzip_magic(f)) {
    std::fclose(f);
    throw Error(fmt::format(
        "{} is gzip-compressed and this fathom was built without zlib: gunzip it first", path_));
  }
  handle_ = f;
#endif
}

InputFile::~InputFile() {
#ifdef FATHOM_HAVE_ZLIB
  if (handle_) gzclose(gz(handle_));
#else
  if (handle_) std::fclose(static_cast<std::FILE*>(handle_));
#endif
}

std::size_t InputFile::read_some(char* out, std::size_t want) {
  if (eof_) return 0;
  // One byte past the limit is enough to know the file is over it.
  const std::int64_t room = max_bytes_ + 1 - read_bytes_;
  if (room <= 0 || want == 0) return 0;
  want = static_cast<std::size_t>(std::min<std::int64_t>(room, static_cast<std::int64_t>(want)));
#ifdef FATHOM_HAVE_ZLIB
  const int n = gzread(gz(handle_), out, static_cast<unsigned>(want));
  if (n < 0) throw Error(fmt::format("{}: {}", path_, gz_problem(gz(handle_), 0, path_)));
  if (n == 0) {
    eof_ = true;
    // A gzip stream cut short reads as an early end; zlib remembers why.
    int err = Z_OK;
    gzerror(gz(handle_), &err);
    if (err != Z_OK) throw Error(fmt::format("{}: {}", path_, gz_problem(gz(handle_), err, path_)));
    return 0;
  }
  const auto got = static_cast<std::size_t>(n);
#else
  std::FILE* f = static_cast<std::FILE*>(handle_);
  const std::size_t got = std::fread(out, 1, want, f);
  if (got == 0) {
    if (std::ferror(f)) throw Error(fmt::format("{}: read error: {}", path_, system_reason()));
    eof_ = true;
    return 0;
  }
#endif
  read_bytes_ += static_cast<std::int64_t>(got);
  if (read_bytes_ > max_bytes_)
    throw Error(fmt::format(
        "{} holds more than {} (uncompressed), more than fathom reads from one input; cut it "
        "shorter (a profiler schedule with fewer active steps, a shorter run)",
        path_, bytes_limit_text(max_bytes_)));
  check_content({out, got});
  return got;
}

void InputFile::check_content(std::string_view fresh) {
  if (content_ != Content::Json || content_checked_) return;
  const std::size_t at = fresh.find_first_not_of(" \t\r\n");
  if (at == std::string_view::npos) return;  // only whitespace so far
  content_checked_ = true;
  const char c = fresh[at];
  if (c == '{' || c == '[') return;
  const auto byte = static_cast<unsigned char>(c);
  throw Error(fmt::format(
      "{} is not JSON: byte {} is {} where a JSON document starts with '{{' or '['; give a "
      "PyTorch profiler trace, a fathom report, analysis or activity file (.json, .jsonl, "
      "optionally .gz), or an Nsight Systems export (.sqlite)",
      path_, read_bytes_ - static_cast<std::int64_t>(fresh.size() - at) + 1,
      byte >= 0x20 && byte < 0x7f ? fmt::format("'{}'", c) : fmt::format("0x{:02x}", byte)));
}

bool InputFile::fill() {
  if (pos_ > 0) {
    buffer_.erase(0, pos_);
    pos_ = 0;
  }
  const std::size_t old = buffer_.size();
  buffer_.resize(old + kChunk);
  std::size_t n = 0;
  try {
    n = read_some(buffer_.data() + old, kChunk);
  } catch (...) {
    buffer_.resize(old);
    throw;
  }
  buffer_.resize(old + n);
  return n > 0;
}

bool InputFile::read_line(std::string& line) {
  std::size_t scanned = 0;  // of the line so far, without a newline: not searched again
  while (true) {
    const std::size_t nl = buffer_.find('\n', pos_ + scanned);
    const std::size_t held = (nl == std::string::npos ? buffer_.size() : nl) - pos_;
    if (held > kMaxLineBytes)
      throw Error(fmt::format(
          "{}: a line longer than {}, longer than any record fathom writes (corrupted, or not "
          "a fathom file?)",
          path_, bytes_limit_text(static_cast<std::int64_t>(kMaxLineBytes))));
    if (nl != std::string::npos) {
      line.assign(buffer_, pos_, nl - pos_);
      pos_ = nl + 1;
      return true;
    }
    scanned = held;
    if (!fill()) {
      if (pos_ >= buffer_.size()) return false;
      line.assign(buffer_, pos_, std::string::npos);  // a last line without a newline
      pos_ = buffer_.size();
      return true;
    }
  }
}

std::string_view InputFile::read_block() {
  if (pos_ >= buffer_.size()) {
    buffer_.clear();
    pos_ = 0;
    if (!fill()) return {};
  }
  const std::string_view block(buffer_.data() + pos_, buffer_.size() - pos_);
  pos_ = buffer_.size();
  return block;
}

std::string InputFile::peek(std::size_t n) {
  while (buffer_.size() - pos_ < n && fill()) {
  }
  return buffer_.substr(pos_, n);
}

std::string InputFile::read_all() {
  // Blocks of their own, then one string of the exact size filled as the blocks are freed: the
  // peak is the file once plus a block, where a growing string peaks at twice its capacity. A
  // block is never zero-filled (its pages are touched only as data lands in them), and at 32 MiB
  // it is above the allocator's largest mmap threshold, so freeing one gives its memory back.
  constexpr std::size_t kBlock = std::size_t{32} << 20;
  struct Block {
    std::unique_ptr<char[]> data;
    std::size_t size = 0;
  };
  std::vector<Block> blocks;
  std::size_t total = buffer_.size() - pos_;
  while (!eof_) {
    Block b{std::unique_ptr<char[]>(new char[kBlock]), 0};
    while (b.size < kBlock) {
      const std::size_t n = read_some(b.data.get() + b.size, kBlock - b.size);
      if (n == 0) break;
      b.size += n;
    }
    if (b.size == 0) break;
    total += b.size;
    blocks.push_back(std::move(b));
  }
  std::string out;
  out.reserve(total);
  out.append(buffer_, pos_, std::string::npos);
  std::string().swap(buffer_);
  pos_ = 0;
  for (Block& b : blocks) {
    out.append(b.data.get(), b.size);
    b.data.reset();
  }
  return out;
}

OutputFile::OutputFile(std::string path) : path_(std::move(path)), gzip_(has_gz_suffix(path_)) {
#ifndef FATHOM_HAVE_ZLIB
  if (gzip_)
    throw Error(
        fmt::format("cannot write {}: this fathom was built without zlib; drop the .gz", path_));
#endif
  const int fd = open_for_replacing(path_);
#ifdef FATHOM_HAVE_ZLIB
  // "T": plain writing through the same calls when the name does not ask for gzip.
  gzFile f = gzdopen(fd, gzip_ ? "wb6" : "wbT");
  if (!f) {
    ::close(fd);
    throw Error(fmt::format("cannot create {}: {}", path_, system_reason()));
  }
  gzbuffer(f, kChunk);
  handle_ = f;
#else
  std::FILE* f = ::fdopen(fd, "wb");
  if (!f) {
    ::close(fd);
    throw Error(fmt::format("cannot create {}: {}", path_, system_reason()));
  }
  handle_ = f;
#endif
}

OutputFile::~OutputFile() {
  if (!handle_) return;
#ifdef FATHOM_HAVE_ZLIB
  gzclose(gz(handle_));
#else
  std::fclose(static_cast<std::FILE*>(handle_));
#endif
}

void OutputFile::write(std::string_view text) {
  if (!handle_) throw Error(fmt::format("{} is already closed", path_));
  if (text.empty()) return;
#ifdef FATHOM_HAVE_ZLIB
  if (gzwrite(gz(handle_), text.data(), static_cast<unsigned>(text.size())) !=
      static_cast<int>(text.size()))
    throw Error(fmt::format("cannot write {}: {}", path_, gz_problem(gz(handle_), 0, path_)));
#else
  if (std::fwrite(text.data(), 1, text.size(), static_cast<std::FILE*>(handle_)) != text.size())
    throw Error(fmt::format("cannot write {}: {}", path_, system_reason()));
#endif
}

void OutputFile::flush() {
  if (!handle_) throw Error(fmt::format("{} is already closed", path_));
#ifdef FATHOM_HAVE_ZLIB
  if (gzflush(gz(handle_), Z_SYNC_FLUSH) != Z_OK)
    throw Error(fmt::format("cannot write {}: {}", path_, gz_problem(gz(handle_), 0, path_)));
#else
  if (std::fflush(static_cast<std::FILE*>(handle_)) != 0)
    throw Error(fmt::format("cannot write {}: {}", path_, system_reason()));
#endif
}

void OutputFile::close() {
  if (!handle_) return;
  void* h = handle_;
  handle_ = nullptr;
#ifdef FATHOM_HAVE_ZLIB
  if (gzclose(gz(h)) != Z_OK)
    throw Error(fmt::format("cannot finish writing {}: {}", path_, system_reason()));
#else
  if (std::fclose(static_cast<std::FILE*>(h)) != 0)
    throw Error(fmt::format("cannot finish writing {}: {}", path_, system_reason()));
#endif
}

}  // namespace fathom::detail
