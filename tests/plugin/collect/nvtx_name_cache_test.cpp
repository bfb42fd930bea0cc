// Runs with the recorder attached (NVTX_INJECTION64_PATH, set by CTest): what the op callback's
// ranges deliver, a registered name and the sequence number as the payload.
#include "collect/nvtx_name_cache.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "nvtx_tree.h"

namespace fathom {
namespace {

TEST(NvtxNameCache, TheSameTextFindsTheSameHandleWhereverItLives) {
  ASSERT_NE(std::getenv("NVTX_INJECTION64_PATH"), nullptr) << "run through ctest";
  nvtx::NameCache cache;
  const nvtx::Name a = cache.find("aten::mul");
  ASSERT_NE(a.handle, nullptr);
  // Another buffer with the same text (RecordFunction's per-call std::string for autograd nodes).
  std::string copy = "aten::mul";
  EXPECT_EQ(cache.find(copy).handle, a.handle);
  // The same buffer holding another text later must not find the first one's handle.
  char buf[32] = "MulBackward0";
  const nvtx::Name m = cache.find(buf);
  std::snprintf(buf, sizeof buf, "AddBackward0");
  const nvtx::Name add = cache.find(buf);
  EXPECT_NE(m.handle, add.handle);
  EXPECT_EQ(cache.size(), 3u);
}

TEST(NvtxNameCache, RangesCarryTheRegisteredNameAndThePayload) {
  nvtx::NameCache cache;
  test::clear_recorded_events();
  nvtx::push(nvtx::Kind::Op, cache.find("aten::addmm"), nvtx::Payload{12});
  nvtx::pop();
  nvtx::end(nvtx::start(nvtx::Kind::Op, cache.find("AddmmBackward0"), nvtx::Payload{12}));
  nvtx::push(nvtx::Kind::Op, "aten::empty", nvtx::Payload{-1});
  nvtx::pop();
  auto tree = test::build_tree(test::recorded_events(), "fathom");
  EXPECT_TRUE(tree.errors.empty());
  ASSERT_EQ(tree.ranges.size(), 3u);
  EXPECT_EQ(tree.ranges[0].message, "aten::addmm");
  EXPECT_TRUE(tree.ranges[0].registered);
  EXPECT_EQ(tree.ranges[0].payload, 12);
  EXPECT_EQ(tree.ranges[0].category, static_cast<std::uint32_t>(nvtx::Kind::Op));
  EXPECT_EQ(tree.ranges[1].message, "AddmmBackward0");
  EXPECT_TRUE(tree.ranges[1].process_range);
  EXPECT_EQ(tree.ranges[1].payload, 12);
  EXPECT_FALSE(tree.ranges[2].registered);
  EXPECT_EQ(tree.ranges[2].payload, -1);
}

TEST(NvtxNameCache, PastItsCapacityTextsGoUnregistered) {
  auto cache = std::make_unique<nvtx::NameCache>();
  for (std::size_t i = 0; i < nvtx::NameCache::kCapacity; ++i)
    ASSERT_NE(cache->find("op" + std::to_string(i)).handle, nullptr) << i;
  EXPECT_EQ(cache->find("one too many").handle, nullptr);
  EXPECT_NE(cache->find("op7").handle, nullptr) << "names already in stay found";
  EXPECT_EQ(cache->size(), nvtx::NameCache::kCapacity);
}

TEST(NvtxNameCache, ThreadsRacingOnNewNamesAgreeOnOneHandleEach) {
  nvtx::NameCache cache;
  constexpr int kThreads = 4, kNames = 200;
  std::vector<std::vector<const void*>> seen(kThreads, std::vector<const void*>(kNames));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kNames; ++i)
        seen[t][i] = cache.find("aten::op" + std::to_string(i)).handle;
    });
  for (auto& th : threads) th.join();
  for (int t = 1; t < kThreads; ++t) EXPECT_EQ(seen[t], seen[0]);
  EXPECT_EQ(cache.size(), static_cast<std::size_t>(kNames));
}

}  // namespace
}  // namespace fathom
