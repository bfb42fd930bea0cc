#include "formats/background_writer.h"

#include <utility>

#include "base/warning_sink.h"

namespace fathom::detail {

BackgroundWriter::~BackgroundWriter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

bool BackgroundWriter::try_post(Task task) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.size() >= capacity_) return false;
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    queue_.push_back(std::move(task));
    ++posted_;
  } catch (...) {
    // No memory for the task, or no thread: the caller's warning says what was not written.
    return false;
  }
  wake_.notify_one();
  return true;
}

void BackgroundWriter::flush() noexcept {
  std::unique_lock<std::mutex> lock(mutex_);
  const std::uint64_t target = posted_;
  done_.wait(lock, [&] { return finished_ >= target; });
}

std::size_t BackgroundWriter::waiting() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

void BackgroundWriter::run() noexcept {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing is left to write
    Task task = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    try {
      task();
    } catch (...) {
      swallowed("formats/background_writer.cpp: a report write");
    }
    task = nullptr;  // what it captured goes before the lock is taken again
    lock.lock();
    ++finished_;
    done_.notify_all();
  }
}

}  // namespace fathom::detail
