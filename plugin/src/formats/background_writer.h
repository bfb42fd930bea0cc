#pragma once
// One thread that runs file writes in the order they were posted, so that the thread posting them
// (the training thread, at an epoch's end) never waits for a disk: not for a write, not for an
// fsync. The queue is bounded: a disk that stalls cannot make the run's memory grow; the poster
// learns the task was refused and decides what that loses (report_journal_file.h).
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace fathom::detail {

class BackgroundWriter {
 public:
  using Task = std::function<void()>;  // must not throw (the writer swallows and counts it)

  explicit BackgroundWriter(std::size_t capacity) noexcept : capacity_(capacity) {}
  ~BackgroundWriter();  // runs every task still queued, then joins the thread
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;

  // Queues task and returns at once; false (task dropped) when `capacity` tasks wait already or
  // the thread could not start. The thread starts with the first task: a session that never
  // ends an epoch starts none.
  bool try_post(Task task) noexcept;
  // Returns once every task posted before the call has run.
  void flush() noexcept;
  // Tasks queued behind the one running (a task may leave to the last of a burst what they all
  // need, one fdatasync for many lines).
  std::size_t waiting() noexcept;

 private:
  void run() noexcept;

  const std::size_t capacity_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<Task> queue_;
  std::uint64_t posted_ = 0, finished_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace fathom::detail
