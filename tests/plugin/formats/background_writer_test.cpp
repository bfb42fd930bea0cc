// The report writer's thread: tasks run in order away from the poster, a full queue refuses
// rather than blocks, flush waits for what was posted, and the end runs what is left.
#include "formats/background_writer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

namespace fathom::detail {
namespace {

using namespace std::chrono_literals;

TEST(BackgroundWriter, RunsTasksInOrderOnItsOwnThread) {
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  {
    BackgroundWriter w(8);
    for (int i = 0; i < 5; ++i)
      ASSERT_TRUE(w.try_post([&, i]() noexcept {
        order.push_back(i);
        threads.push_back(std::this_thread::get_id());
      }));
    w.flush();
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  }
  for (auto id : threads) EXPECT_NE(id, std::this_thread::get_id());
}

TEST(BackgroundWriter, AStalledDiskFillsTheQueueWhichRefusesInsteadOfBlocking) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> ran{0};
  BackgroundWriter w(2);
  // The first task stalls like a hung disk; two more wait; the fourth is refused at once.
  ASSERT_TRUE(w.try_post([&]() noexcept {
    released.wait();
    ++ran;
  }));
  // Until the writer took the first task off the queue, it still counts against the bound.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  bool second = false;
  while (!(second = w.try_post([&]() noexcept { ++ran; })) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(second);
  int accepted = 1 + 1;
  while (w.try_post([&]() noexcept { ++ran; })) ++accepted;
  EXPECT_LE(accepted, 1 + 2);  // the stalled task plus at most the queue's two
  EXPECT_EQ(ran.load(), 0);
  release.set_value();
  w.flush();
  EXPECT_EQ(ran.load(), accepted);
}

TEST(BackgroundWriter, TheEndRunsWhatIsStillQueued) {
  std::atomic<int> ran{0};
  {
    BackgroundWriter w(16);
    for (int i = 0; i < 10; ++i)
      ASSERT_TRUE(w.try_post([&]() noexcept {
        std::this_thread::sleep_for(1ms);
        ++ran;
      }));
  }
  EXPECT_EQ(ran.load(), 10);
}

TEST(BackgroundWriter, AThrowingTaskIsCountedAndTheNextOneRuns) {
  std::atomic<bool> next{false};
  BackgroundWriter w(4);
  ASSERT_TRUE(w.try_post([] { throw std::runtime_error("disk"); }));
  ASSERT_TRUE(w.try_post([&]() noexcept { next = true; }));
  w.flush();
  EXPECT_TRUE(next.load());
}

}  // namespace
}  // namespace fathom::detail
