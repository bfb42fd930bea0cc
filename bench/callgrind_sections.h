#pragma once
// Instruction counts of measured sections, from callgrind: load-proof where CPU time is not (a
// shared machine) and where perf counters are unavailable (these VMs). Run the program as
//   valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=FILE prog ... FILE
// (bench/instruction_counts.sh does): instrumentation is switched on once setup is done, each
// section zeroes the counters, runs, and dumps them as FILE.<n>, which this reads back. The count
// is every instruction the process ran during the section, on all its threads.
#include <valgrind/callgrind.h>

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>

namespace fathom::bench {

class CallgrindSections {
 public:
  explicit CallgrindSections(std::string out_file) : out_file_(std::move(out_file)) {
    if (!RUNNING_ON_VALGRIND)
      throw std::runtime_error(
          "--instructions needs valgrind: run bench/instruction_counts.sh, or valgrind "
          "--tool=callgrind --instr-atstart=no --callgrind-out-file=" +
          out_file_ + " <this command>");
    CALLGRIND_START_INSTRUMENTATION;
  }
  ~CallgrindSections() { CALLGRIND_STOP_INSTRUMENTATION; }
  CallgrindSections(const CallgrindSections&) = delete;
  CallgrindSections& operator=(const CallgrindSections&) = delete;

  // Instructions body() ran (with the counters' own zero and dump, a few hundred, included).
  template <typename F>
  std::int64_t count(F&& body) {
    CALLGRIND_ZERO_STATS;
    body();
    CALLGRIND_DUMP_STATS_AT("fathom section");
    return read_dump(++dumps_);
  }

 private:
  std::int64_t read_dump(int n) const {
    const std::string path = out_file_ + "." + std::to_string(n);
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("summary: ", 0) == 0) return std::stoll(line.substr(9));
    throw std::runtime_error("no 'summary:' line in callgrind's dump " + path +
                             ": was --callgrind-out-file given the same path?");
  }

  std::string out_file_;
  int dumps_ = 0;
};

}  // namespace fathom::bench
