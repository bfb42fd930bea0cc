// gz_file: plain files always work; gzip goes through zlib where fathom has it, and is otherwise
// refused with an error that names the file and the missing support. tests/CMakeLists.txt builds
// this file twice, against the core as configured and against gz_file.cpp compiled without zlib,
// so both branches are tested on every machine (the GPU machine may have no zlib headers).
#include "formats/gz_file.h"

#include <fathom/error.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace fathom::detail {
namespace {

// "hello\n", gzip-compressed (Python's gzip module, mtime 0).
const std::string kGzipHello(
    "\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff\xcb\x48\xcd\xc9\xc9\xe7\x02\x00\x20\x30\x3a\x36"
    "\x06\x00\x00\x00",
    26);

class GzFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/fathom_gz_file_test_XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    for (const auto& f : made_) std::remove(f.c_str());
    ::rmdir(dir_.c_str());
  }
  std::string path(const std::string& name) {
    made_.push_back(dir_ + "/" + name);
    return made_.back();
  }
  static std::string raw(const std::string& p) {
    std::string bytes;
    if (std::FILE* f = std::fopen(p.c_str(), "rb")) {
      char buf[4096];
      std::size_t n = 0;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
      std::fclose(f);
    }
    return bytes;
  }
  static void spit(const std::string& p, const std::string& bytes) {
    std::FILE* f = std::fopen(p.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
    std::fclose(f);
  }
  template <typename F>
  static std::string error_of(F&& body) {
    try {
      body();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

 private:
  std::string dir_;
  std::vector<std::string> made_;
};

TEST(GzSuffix, OnlyTheEndOfTheNameCounts) {
  EXPECT_TRUE(has_gz_suffix("run.jsonl.gz"));
  EXPECT_TRUE(has_gz_suffix(".gz"));
  EXPECT_FALSE(has_gz_suffix("run.gz.jsonl"));
  EXPECT_FALSE(has_gz_suffix("gz"));
  EXPECT_FALSE(has_gz_suffix(""));
}

TEST_F(GzFile, PlainFilesRoundTripLineByLine) {
  const std::string p = path("plain.jsonl");
  {
    OutputFile out(p);
    out.write("one\ntwo\n");
    out.write("three");
    out.close();
  }
  EXPECT_EQ(raw(p), "one\ntwo\nthree");  // a plain name is written plain, zlib or not
  InputFile in(p);
  EXPECT_EQ(in.peek(3), "one");
  std::string line;
  ASSERT_TRUE(in.read_line(line));
  EXPECT_EQ(line, "one");
  ASSERT_TRUE(in.read_line(line));
  EXPECT_EQ(line, "two");
  EXPECT_EQ(in.read_all(), "three");
  EXPECT_FALSE(in.read_line(line));
}

TEST_F(GzFile, MissingFileNamesThePath) {
  const std::string p = path("absent.jsonl.gz");
  const std::string e = error_of([&] { InputFile in(p); });
  EXPECT_NE(e.find("cannot open " + p), std::string::npos) << e;
}

// Issue 25: a JSON reader refuses a file at its first byte that is not whitespace and cannot
// start a JSON document, with the byte's place and value; it reads no further.
TEST_F(GzFile, JsonInputIsRefusedAtItsFirstNonJsonByte) {
  const std::string zeros = path("zeros.json");
  spit(zeros, std::string(1 << 20, '\0'));
  std::string e = error_of([&] { InputFile(zeros, kMaxInputBytes, Content::Json).read_all(); });
  EXPECT_NE(e.find(zeros + " is not JSON: byte 1 is 0x00"), std::string::npos) << e;
  const std::string text = path("text.json");
  spit(text, " \n\t x{}");
  e = error_of([&] { InputFile(text, kMaxInputBytes, Content::Json).read_all(); });
  EXPECT_NE(e.find("byte 5 is 'x'"), std::string::npos) << e;
  const std::string ok = path("ok.json");
  spit(ok, "  [1]");
  EXPECT_EQ(InputFile(ok, kMaxInputBytes, Content::Json).read_all(), "  [1]");
  EXPECT_EQ(InputFile(zeros).read_all().size(), std::size_t{1} << 20) << "Content::Any reads all";
}

// A file of one endless line is refused past kMaxLineBytes, not buffered up to the input limit
// (the buffer doubling on the way).
TEST_F(GzFile, AnEndlessLineIsRefused) {
  const std::string p = path("one_line.jsonl");
  spit(p, "{" + std::string(kMaxLineBytes + 1, 'x') + "}\n");
  InputFile in(p);
  std::string line;
  const std::string e = error_of([&] { in.read_line(line); });
  EXPECT_NE(e.find("a line longer than 64 MiB"), std::string::npos) << e;
}

// The limit is exact: max_bytes is read, max_bytes + 1 is refused, and never more is read.
TEST_F(GzFile, TheLimitIsExact) {
  const std::string p = path("limit.json");
  spit(p, std::string(1000, ' '));
  EXPECT_EQ(InputFile(p, 1000).read_all().size(), 1000u);
  const std::string e = error_of([&] { InputFile(p, 999).read_all(); });
  EXPECT_NE(e.find("holds more than"), std::string::npos) << e;
}

#ifdef FATHOM_HAVE_ZLIB

TEST_F(GzFile, GzNamesAreCompressedAndReadBack) {
  const std::string p = path("run.jsonl.gz");
  {
    OutputFile out(p);
    out.write("a\nb\n");
    out.close();
  }
  const std::string bytes = raw(p);
  ASSERT_GE(bytes.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(bytes[1]), 0x8b);
  InputFile in(p);
  EXPECT_EQ(in.read_all(), "a\nb\n");
}

TEST_F(GzFile, ReadingSeesThroughGzipWhateverTheName) {
  const std::string p = path("hello.json");
  spit(p, kGzipHello);
  InputFile in(p);
  EXPECT_EQ(in.read_all(), "hello\n");
}

// Issue 25: read_all holds the file once, not a buffer that doubles (a 128 MiB input peaked at
// 256 MiB and more): the process's peak resident memory, reset before the read (clear_refs 5),
// grows by the input and one block, well under 1.6 times the input.
std::int64_t status_kib(const char* field) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  std::int64_t v = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, field, std::strlen(field)) == 0)
      v = std::atoll(line + std::strlen(field));
  std::fclose(f);
  return v;
}

// Resident size under AddressSanitizer counts its shadow and its quarantine (a freed block stays
// mapped), not the reader's buffers: the number says nothing there.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kUnderAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kUnderAsan = true;
#else
constexpr bool kUnderAsan = false;
#endif
#else
constexpr bool kUnderAsan = false;
#endif

TEST_F(GzFile, ReadAllHoldsTheFileOnceNotADoubledBuffer) {
  if (kUnderAsan)
    GTEST_SKIP() << "AddressSanitizer's shadow and quarantine are in the resident size";
  constexpr std::size_t kSize = std::size_t{128} << 20;
  const std::string p = path("big.json.gz");
  {
    OutputFile out(p);
    const std::string chunk(std::size_t{1} << 20, ' ');
    for (std::size_t i = 0; i < kSize / chunk.size(); ++i) out.write(chunk);
    out.close();
  }
  std::FILE* reset = std::fopen("/proc/self/clear_refs", "w");
  if (!reset || std::fputs("5", reset) < 0 || std::fclose(reset) != 0)
    GTEST_SKIP() << "this kernel cannot reset the peak resident size";
  const std::int64_t before = status_kib("VmRSS:");
  std::int64_t grown = 0;
  {
    const std::string all = InputFile(p).read_all();
    ASSERT_EQ(all.size(), kSize);
    grown = (status_kib("VmHWM:") - before) * 1024;
  }
  EXPECT_LT(static_cast<double>(grown), 1.6 * kSize) << grown / (1 << 20) << " MiB for 128 MiB";
}

#else

TEST_F(GzFile, WritingAGzNameSaysZlibIsMissing) {
  const std::string p = path("run.jsonl.gz");
  const std::string e = error_of([&] { OutputFile out(p); });
  EXPECT_NE(e.find("cannot write " + p), std::string::npos) << e;
  EXPECT_NE(e.find("built without zlib"), std::string::npos) << e;
  EXPECT_NE(e.find("drop the .gz"), std::string::npos) << e;
  EXPECT_NE(::access(p.c_str(), F_OK), 0) << "nothing is created";
}

TEST_F(GzFile, ReadingGzipDataSaysZlibIsMissingWhateverTheName) {
  for (const char* name : {"trace.json.gz", "trace.json"}) {
    const std::string p = path(name);
    spit(p, kGzipHello);
    const std::string e = error_of([&] { InputFile in(p); });
    EXPECT_NE(e.find(p + " is gzip-compressed"), std::string::npos) << e;
    EXPECT_NE(e.find("built without zlib"), std::string::npos) << e;
    EXPECT_NE(e.find("gunzip it first"), std::string::npos) << e;
  }
}

#endif

}  // namespace
}  // namespace fathom::detail
