#include "collect/host_info.h"

#include <fmt/format.h>
#include <unistd.h>

#include <ctime>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

namespace fathom {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown CPU";
}

std::vector<std::string> cpu_bf16_units(std::string_view cpuinfo) {
  // The first "flags" line speaks for every core: the kernel lists the same flags on each.
  std::istringstream lines{std::string(cpuinfo)};
  std::string line;
  while (std::getline(lines, line) && line.rfind("flags", 0) != 0) {
  }
  std::vector<std::string> found;
  const std::size_t colon = line.find(':');
  if (line.rfind("flags", 0) != 0 || colon == std::string::npos) return found;
  std::istringstream words(line.substr(colon + 1));
  const std::set<std::string> flags{std::istream_iterator<std::string>(words), {}};
  for (const char* unit : {"amx_bf16", "avx512_bf16"})
    if (flags.count(unit)) found.emplace_back(unit);
  return found;
}

std::vector<std::string> cpu_bf16_units() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) return cpu_bf16_units(line);
  return {};
}

namespace {
std::tm utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  return tm;
}
}  // namespace

std::string utc_timestamp_iso8601() {
  std::tm tm = utc_now();
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

std::string default_run_name() {
  std::tm tm = utc_now();
  return fmt::format("fathom-{:04}{:02}{:02}-{:02}{:02}{:02}-{}", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ::getpid());
}

}  // namespace fathom
