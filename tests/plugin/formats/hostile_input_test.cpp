// Every reader turns any input into a result or one fathom::Error naming the file and the
// problem (issue 17). The inputs are tests/data/regressions/<reader>/: the crashes a mutation
// fuzzer found on main (an nlohmann type_error escaping as an abort, a std::out_of_range, signed
// overflow and float-to-integer conversions out of range on extreme numbers) and the fuzz
// targets' crashes since. They are the fuzz targets' seeds too (fuzz/). Each case below failed
// on the code before the fix (a foreign exception, or a result where an error belongs), except
// start_ns_string and run_name_array, which were already errors and stay here as seeds.
#include <fathom/error.h>
#include <fathom/replay.h>
#include <fathom/report_writers.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "formats/gz_file.h"
#include "report/trace_event_stream.h"

namespace fathom {
namespace {

std::string regression(const std::string& name) {
  return std::string(FATHOM_TEST_REGRESSIONS) + "/" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// "" when the reader gave a result; the fathom::Error's text otherwise. Any other exception is
// a test failure: that is the crash.
template <typename Read>
std::string outcome(const std::string& path, Read read) {
  try {
    read(path);
    return "";
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << path << ": a foreign exception escaped the reader: " << e.what();
    return "crash";
  }
}

void expect_outcomes(const std::map<std::string, std::string>& cases,
                     void (*read)(const std::string&)) {
  for (const auto& [name, wanted] : cases) {
    const std::string path = regression(name);
    ASSERT_TRUE(std::ifstream(path).good()) << "missing regression input " << path;
    const std::string got = outcome(path, read);
    if (wanted.empty()) {
      EXPECT_EQ(got, "") << name;
    } else {
      EXPECT_NE(got.find(wanted), std::string::npos) << name << ": " << got;
      EXPECT_NE(got.find(path), std::string::npos) << name << " (the file is named): " << got;
    }
  }
}

TEST(HostileInput, KinetoTraces) {
  expect_outcomes(
      {{"kineto/ts_near_int64_min.json", "\"ts\": -9223372036854776 us is outside 0 to 2^62 ns"},
       {"kineto/dur_past_int64_max.json", "ends past 2^62 ns"},
       {"kineto/device_float_out_of_range.json", "\"device\": 1e+300 does not fit"},
       {"kineto/tid_too_many_digits.json", ""}},
      [](const std::string& p) { (void)analyze_activity(load_trace(p), {}); });
}

TEST(HostileInput, ActivityFiles) {
  expect_outcomes({{"activity/header_version_string.jsonl", "is activity file version -1"},
                   {"activity/header_format_number.jsonl", "is not valid JSON"},
                   {"activity/start_ns_string.jsonl", "line 2: expected an integer, found string"},
                   {"activity/start_ns_float_out_of_range.jsonl", "line 2: 1e+300 does not fit"},
                   {"activity/start_ns_near_int64_min.jsonl",
                    "line 2: start_ns -9223372036854775807 ns is "
                    "outside 0 to 2^62 ns"},
                   {"activity/grid_float_out_of_range.jsonl", "line 2: 1e+300 does not fit"}},
                  [](const std::string& p) { (void)analyze_activity(load_trace(p), {}); });
}

TEST(HostileInput, Reports) {
  expect_outcomes({{"report/schema_array.json", "is not a fathom report"},
                   {"report/schema_version_string.json", "has report schema version -1"},
                   {"report/run_name_array.json", "is not a valid fathom report"},
                   {"report/pid_float_out_of_range.json", "1e+300 does not fit"},
                   {"report/steps_float_out_of_range.json", "epochs[0]: -1e+300 does not fit"},
                   {"report/escape_sequences_in_names.json", ""}},
                  [](const std::string& p) { (void)parse_json_report(slurp(p), p); });
}

TEST(HostileInput, NonRegularFilesAreRefused) {
  for (const char* path : {"/dev/zero", "/dev/null", "/"}) {
    try {
      detail::InputFile in(path);
      FAIL() << path << " was opened";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("is not a regular file"), std::string::npos) << e.what();
    }
  }
}

// What open_it threw (its fathom::Error's text), on another thread: an open that waits on the
// FIFO is a failure, and is released by opening the FIFO's other end with release_flags.
template <typename Open>
std::string error_without_waiting(const std::string& fifo, int release_flags, Open open_it) {
  auto result = std::async(std::launch::async, [&]() -> std::string {
    try {
      open_it();
      return "opened";
    } catch (const Error& e) {
      return e.what();
    }
  });
  if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "waits on the FIFO " << fifo;
    // A reader may open it more than once: released until it is done.
    do {
      const int other_end = ::open(fifo.c_str(), release_flags | O_CLOEXEC);
      if (other_end >= 0) ::close(other_end);
    } while (result.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready);
  }
  return result.get();
}

// Issue 25: a FIFO at FATHOM_TRACE held the Session's constructor forever (the trace was opened
// before it was checked), and `fathom analyze FIFO` the same: each open now refuses it at once.
TEST(HostileInput, AFifoIsRefusedBeforeAnyOpenCanWaitOnIt) {
  const std::string fifo = testing::TempDir() + "/fathom_fifo_" + std::to_string(::getpid());
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int to_a_reader = O_WRONLY | O_NONBLOCK, to_a_writer = O_RDONLY | O_NONBLOCK;
  EXPECT_NE(error_without_waiting(fifo, to_a_writer, [&] { TraceEventStream t(fifo, 0, "run"); })
                .find("is not a plain file"),
            std::string::npos);
  for (const auto& [reader, read] : std::vector<std::pair<const char*, std::function<void()>>>{
           {"InputFile", [&] { detail::InputFile in(fifo); }},
           {"is_sqlite_file", [&] { (void)is_sqlite_file(fifo); }},
           {"load_trace", [&] { (void)load_trace(fifo); }}}) {
    EXPECT_NE(error_without_waiting(fifo, to_a_reader, read).find("is not a regular file"),
              std::string::npos)
        << reader;
  }
  ::unlink(fifo.c_str());
}

TEST(HostileInput, InputsHaveASizeLimitUncompressedToo) {
  // 4 MiB of zeros in about 4 KiB of gzip: the limit counts what comes out, not what is on disk.
  const std::string path = testing::TempDir() + "/fathom_zeros.json.gz";
  {
    detail::OutputFile out(path);
    out.write(std::string(4 << 20, '0'));
    out.close();
  }
  try {
    detail::InputFile in(path, std::int64_t{1} << 20);
    (void)in.read_all();
    FAIL() << "read past the limit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds more than 1 MiB (uncompressed)"), std::string::npos)
        << e.what();
  }
  std::remove(path.c_str());
}

// Issue 25: a gzip bomb of zero bytes is refused at its first byte, before the rest is inflated:
// the stream here is cut in half, and the error is "not JSON", never the truncation it would
// reach after reading everything. Every JSON reader shares the rule (Content::Json).
TEST(HostileInput, NonJsonIsRefusedAtTheFirstByteBeforeTheRestIsRead) {
  const std::string path = testing::TempDir() + "/fathom_zero_bomb.json.gz";
  {
    detail::OutputFile out(path);
    for (int i = 0; i < 64; ++i) out.write(std::string(1 << 20, '\0'));
    out.close();
  }
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  for (const auto& read : std::vector<std::function<void()>>{
           [&] { (void)read_kineto_trace(path); }, [&] { (void)load_trace(path); },
           [&] { (void)read_report_file(path); }}) {
    try {
      read();
      FAIL() << "read";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("is not JSON: byte 1 is 0x00"), std::string::npos)
          << e.what();
    }
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace fathom
