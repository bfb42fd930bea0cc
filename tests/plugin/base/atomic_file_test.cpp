#include "base/atomic_file.h"

#include <fathom/error.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace fathom {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir() {
  fs::path p = fs::temp_directory_path() / ("fathom-atomic-" + std::to_string(::getpid()));
  fs::create_directories(p);
  return p;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(AtomicFile, WritesAndReplacesLeavingNoTemporary) {
  fs::path dir = temp_dir();
  fs::path file = dir / "r.json";
  write_file_atomically(file.string(), "first");
  write_file_atomically(file.string(), "second");
  EXPECT_EQ(slurp(file), "second");
  int entries = 0;
  for (auto& e : fs::directory_iterator(dir)) entries += e.path().filename() == "r.json" ? 0 : 1;
  EXPECT_EQ(entries, 0);
  fs::remove_all(dir);
}

TEST(AtomicFile, UnwritablePathIsAClearError) {
  fs::path dir = temp_dir();
  fs::path blocker = dir / "not-a-folder";
  std::ofstream(blocker) << "x";
  try {
    write_file_atomically((blocker / "r.json").string(), "x");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not-a-folder"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(AtomicFile, EnsureWritableFolderCreatesParents) {
  fs::path dir = temp_dir() / "a" / "b";
  ensure_writable_folder(dir.string());
  EXPECT_TRUE(fs::is_directory(dir));
  EXPECT_TRUE(fs::is_empty(dir));  // the probe is gone
  fs::remove_all(temp_dir());
}

TEST(AtomicFile, EnsureWritableFolderRejectsAFileInTheWay) {
  // Root may write anywhere, so a file in the path is the portable way to make a folder
  // impossible to create.
  fs::path dir = temp_dir();
  std::ofstream(dir / "file") << "x";
  try {
    ensure_writable_folder((dir / "file" / "reports").string());
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cannot create report folder"), std::string::npos) << msg;
    EXPECT_NE(msg.find("FATHOM_REPORT_DIR"), std::string::npos) << msg;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace fathom
