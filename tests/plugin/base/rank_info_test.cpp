#include <fathom/error.h>
#include <fathom/rank_info.h>
#include <gtest/gtest.h>

#include <cstdlib>

namespace fathom {
namespace {

TEST(RankInfo, NoVariablesMeansOneProcess) {
  RankInfo r = parse_rank_info(nullptr, nullptr, nullptr);
  EXPECT_EQ(r, (RankInfo{0, 0, 1}));
  EXPECT_FALSE(r.distributed());
  EXPECT_EQ(rank_file_suffix(r), "");
  EXPECT_EQ(rank_range_suffix(r), "");
}

TEST(RankInfo, ReadsTorchrunVariables) {
  RankInfo r = parse_rank_info("5", "1", "8");
  EXPECT_EQ(r, (RankInfo{5, 1, 8}));
  EXPECT_TRUE(r.distributed());
  EXPECT_EQ(rank_file_suffix(r), ".rank5");
  EXPECT_EQ(rank_range_suffix(r), " [rank 5]");
}

TEST(RankInfo, LocalRankDefaultsToRank) {
  EXPECT_EQ(parse_rank_info("3", nullptr, "4").local_rank, 3);
}

void expect_error(const char* rank, const char* local, const char* world, const std::string& part) {
  try {
    parse_rank_info(rank, local, world);
    FAIL() << "no error for RANK=" << (rank ? rank : "-")
           << " WORLD_SIZE=" << (world ? world : "-");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(RankInfo, BadValuesNameTheVariableAndValue) {
  expect_error("abc", nullptr, "2", "RANK='abc'");
  expect_error("1", nullptr, "two", "WORLD_SIZE='two'");
  expect_error("-1", nullptr, "2", "RANK='-1'");
  expect_error("1", nullptr, "0", "WORLD_SIZE='0'");
  expect_error("1x", nullptr, "2", "RANK='1x'");
  expect_error("2", nullptr, "2", "RANK=2 is not below WORLD_SIZE=2");
  expect_error("0", "9", "2", "LOCAL_RANK=9");
  expect_error("1", nullptr, nullptr, "RANK is set but WORLD_SIZE is not");
  expect_error(nullptr, nullptr, "4", "WORLD_SIZE is set but RANK is not");
}

TEST(RankInfo, ReadsTheEnvironment) {
  ::setenv("RANK", "2", 1);
  ::setenv("WORLD_SIZE", "3", 1);
  ::setenv("LOCAL_RANK", "0", 1);
  const RankInfo r = rank_from_environment();
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  ::unsetenv("LOCAL_RANK");
  EXPECT_EQ(r, (RankInfo{2, 0, 3}));
}

TEST(RankInfo, MergeTimeoutFromEnvironment) {
  using std::chrono::milliseconds;
  ::unsetenv("FATHOM_MERGE_TIMEOUT");
  EXPECT_EQ(merge_timeout_from_environment(milliseconds(7)), milliseconds(7));
  ::setenv("FATHOM_MERGE_TIMEOUT", "2.5", 1);
  EXPECT_EQ(merge_timeout_from_environment(milliseconds(7)), milliseconds(2500));
  ::setenv("FATHOM_MERGE_TIMEOUT", "soon", 1);
  EXPECT_THROW(merge_timeout_from_environment(milliseconds(7)), Error);
  ::setenv("FATHOM_MERGE_TIMEOUT", "0", 1);
  EXPECT_THROW(merge_timeout_from_environment(milliseconds(7)), Error);
  ::unsetenv("FATHOM_MERGE_TIMEOUT");
}

}  // namespace
}  // namespace fathom
