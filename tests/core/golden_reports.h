#pragma once
// The recorded runs under tests/core/golden, read for the writer tests.
#include <fathom/report_writers.h>

#include <fstream>
#include <sstream>
#include <string>

namespace fathom::test {

inline std::string golden_path(const std::string& name) {
  return std::string(FATHOM_GOLDEN_DIR) + "/" + name;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline RunReport golden_report(const std::string& name) {
  return parse_json_report(read_text(golden_path(name)), name);
}

}  // namespace fathom::test
