#pragma once
// The activity buffers fathom hands to CUPTI, and the two callbacks CUPTI calls for them.
//
// CUPTI calls its buffer callbacks through plain function pointers on its own threads: the
// request under CUPTI's internal lock, the completion from its worker or from a flushing
// thread. So the callbacks do as little as possible and never call CUPTI: a request takes a
// buffer from the armed owner's pool; a completion hands the buffer to the owner that handed it
// out (found by address, so a buffer that comes back after its collector stood aside, stopped or
// was replaced never touches another collector's counts or sizes), to be parsed later on the
// training thread. Each buffer remembers its own size. The locks here (the registry's, then an
// owner's) are the only ones the callbacks take, and no CUPTI call is ever made under them.
#include <cupti.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace fathom::cupti {

// A buffer CUPTI gave back, waiting to be parsed.
struct CompletedBuffer {
  std::uint8_t* data = nullptr;
  std::size_t size = 0;
  std::size_t valid = 0;
  CUcontext context = nullptr;
  std::uint32_t stream = 0;
};

// One collector's side of the buffers. Shared with the registry, so a buffer may outlive the
// collector that handed it out.
class BufferOwner {
 public:
  BufferOwner(std::size_t buffer_bytes, std::size_t max_buffers);
  ~BufferOwner();
  BufferOwner(const BufferOwner&) = delete;
  BufferOwner& operator=(const BufferOwner&) = delete;

  // The buffers CUPTI gave back since the last call.
  std::vector<CompletedBuffer> take_completed();
  // A parsed buffer goes back to the pool (or is freed).
  void recycle(const CompletedBuffer& b);
  // Called when the collector goes away: later completions free their buffers.
  void retire();

  // Every request or completion CUPTI made for this owner: proof its callbacks still reach it.
  std::uint64_t heartbeat() const noexcept { return heartbeat_.load(std::memory_order_acquire); }
  // Buffers CUPTI holds now.
  std::size_t outstanding() const;
  // Requests declined because max_buffers were out (CUPTI drops and counts those records).
  std::uint64_t declined() const noexcept { return declined_.load(std::memory_order_relaxed); }
  std::size_t buffer_bytes() const noexcept { return buffer_bytes_; }

 private:
  friend class BufferRegistry;
  const std::size_t buffer_bytes_;
  const std::size_t max_buffers_;
  mutable std::mutex mutex_;  // taken after the registry's, never around a CUPTI call
  std::vector<std::uint8_t*> pool_;
  std::vector<CompletedBuffer> completed_;
  std::size_t outstanding_ = 0;
  bool retired_ = false;
  std::atomic<std::uint64_t> heartbeat_{0};
  std::atomic<std::uint64_t> declined_{0};
};

class BufferRegistry {
 public:
  static BufferRegistry& get();

  // The owner CUPTI's requests are served from (nullptr: requests are declined).
  void arm(std::shared_ptr<BufferOwner> owner);
  void disarm(const BufferOwner* owner);
  // The buffers of owner that CUPTI still holds from before generation: they went to another
  // client when it took the callbacks. Written off (no longer counted against max_buffers);
  // returns how many. One that still comes back is parsed as usual.
  std::size_t write_off(const BufferOwner* owner, std::uint64_t before_generation);
  // A new arming generation for owner's future buffers.
  std::uint64_t next_generation() noexcept { return ++generation_; }
  // A new generation for the armed owner's requests from now on, so the buffers handed out
  // before it can be told apart from those CUPTI asks for after (release_unreturned).
  std::uint64_t cut();
  // Frees owner's buffers from before generation that never came back through fathom's
  // callbacks: after a forced flush CUPTI holds none of them, so they went to the callbacks of
  // the client that took CUPTI, which keeps a buffer it did not allocate and never frees it
  // (Kineto logs "unknown buffer"). Returns how many.
  std::size_t release_unreturned(const BufferOwner* owner, std::uint64_t before_generation);
  // Buffers that came back through fathom's callbacks but were never fathom's (another client
  // had handed them to CUPTI before fathom registered): left alone, counted.
  std::uint64_t foreign_buffers() const noexcept { return foreign_.load(); }

  // The functions given to cuptiActivityRegisterCallbacks.
  static void CUPTIAPI on_request(std::uint8_t** buffer, std::size_t* size, std::size_t* max);
  static void CUPTIAPI on_complete(CUcontext context, std::uint32_t stream, std::uint8_t* buffer,
                                   std::size_t size, std::size_t valid);

 private:
  struct Entry;
  BufferRegistry();
  void request(std::uint8_t** buffer, std::size_t* size);
  void complete(CUcontext context, std::uint32_t stream, std::uint8_t* buffer, std::size_t valid);

  std::mutex mutex_;
  std::shared_ptr<BufferOwner> armed_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<std::uint64_t> foreign_{0};
};

}  // namespace fathom::cupti
