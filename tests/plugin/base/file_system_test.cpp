#include "base/file_system.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace fathom {
namespace {

TEST(FileSystem, MakeDirectoriesAndRemoveTree) {
  const std::string root = fs::temp_directory() + "/fathom-fs-" + std::to_string(::getpid());
  EXPECT_EQ(fs::make_directories(root + "/a/b/c"), "");
  EXPECT_TRUE(fs::is_directory(root + "/a/b/c"));
  EXPECT_EQ(fs::make_directories(root + "/a/b/c"), "");  // idempotent
  std::ofstream(root + "/a/b/file") << "x";
  EXPECT_TRUE(fs::exists(root + "/a/b/file"));
  EXPECT_FALSE(fs::is_directory(root + "/a/b/file"));
  EXPECT_NE(fs::make_directories(root + "/a/b/file/d"), "");  // a file is in the way
  fs::remove_tree(root);
  EXPECT_FALSE(fs::exists(root));
  fs::remove_tree(root);  // absent: no error
}

}  // namespace
}  // namespace fathom
