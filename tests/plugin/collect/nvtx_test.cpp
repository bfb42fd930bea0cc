// Runs with the recorder attached (NVTX_INJECTION64_PATH, set by CTest).
#include "collect/nvtx.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "nvtx_tree.h"

namespace fathom {
namespace {

TEST(Nvtx, RangesLandInTheFathomDomainWithKindCategory) {
  ASSERT_NE(std::getenv("NVTX_INJECTION64_PATH"), nullptr) << "run through ctest";
  test::clear_recorded_events();
  nvtx::Name fwd = nvtx::register_name("forward");
  nvtx::push(nvtx::Kind::Step, "step 0");
  nvtx::push(nvtx::Kind::Phase, fwd);
  nvtx::pop();
  nvtx::pop();
  auto tree = test::build_tree(test::recorded_events(), "fathom");
  EXPECT_TRUE(tree.errors.empty());
  ASSERT_EQ(tree.ranges.size(), 2u);
  EXPECT_EQ(tree.ranges[0].message, "forward");
  EXPECT_EQ(tree.ranges[0].category, static_cast<std::uint32_t>(nvtx::Kind::Phase));
  EXPECT_EQ(tree.ranges[0].ancestors, std::vector<std::string>{"step 0"});
  EXPECT_EQ(tree.ranges[1].message, "step 0");
}

TEST(Nvtx, ProcessRangeMayEndOnAnotherThread) {
  test::clear_recorded_events();
  nvtx::RangeId id = nvtx::start(nvtx::Kind::Op, "aten::mm");
  std::thread([id] { nvtx::end(id); }).join();
  auto tree = test::build_tree(test::recorded_events(), "fathom");
  EXPECT_TRUE(tree.errors.empty());
  ASSERT_EQ(tree.ranges.size(), 1u);
  EXPECT_TRUE(tree.ranges[0].process_range);
}

TEST(Nvtx, UnbalancedPopIsDetectedByTheChecker) {
  // The checker itself must be able to fail.
  test::clear_recorded_events();
  nvtx::pop();
  nvtx::push(nvtx::Kind::Phase, "left open");
  auto tree = test::build_tree(test::recorded_events(), "fathom");
  EXPECT_EQ(tree.errors.size(), 2u);
  nvtx::pop();
}

// ctest runs this twice: with the recorder attached, and as plugin.nvtx_without_a_tool without it.
TEST(Nvtx, ToolAttachedOnlyWithAnInjectionLibrary) {
  const bool injected = std::getenv("NVTX_INJECTION64_PATH") != nullptr;
  EXPECT_EQ(nvtx::tool_attached(), injected);
  EXPECT_EQ(nvtx::tool_attached(), injected);  // NVTX loads its tool once: the answer holds
}

TEST(Nvtx, KindColorsDiffer) {
  EXPECT_NE(nvtx::kind_color(nvtx::Kind::Epoch), nvtx::kind_color(nvtx::Kind::Step));
  EXPECT_EQ(nvtx::kind_name(nvtx::Kind::Module), "module");
}

}  // namespace
}  // namespace fathom
