#include "collect/cupti/buffer_registry.h"

#include <cstdlib>
#include <unordered_map>

#include "base/warning_sink.h"

namespace fathom::cupti {
namespace {

// Buffers kept for reuse by an owner: enough for a step's queues, not a burst's.
constexpr std::size_t kPoolSize = 4;

}  // namespace

struct BufferRegistry::Entry {
  std::shared_ptr<BufferOwner> owner;
  std::size_t size = 0;
  std::uint64_t generation = 0;
  bool written_off = false;
};

struct BufferRegistry::Impl {
  std::unordered_map<std::uint8_t*, Entry> entries;
  std::uint64_t armed_generation = 0;
};

BufferOwner::BufferOwner(std::size_t buffer_bytes, std::size_t max_buffers)
    // CUPTI wants 8-byte aligned buffers; aligned_alloc wants a size that is a multiple of it.
    : buffer_bytes_((buffer_bytes + 7) / 8 * 8), max_buffers_(max_buffers) {}

BufferOwner::~BufferOwner() {
  for (std::uint8_t* b : pool_) std::free(b);
  for (const CompletedBuffer& b : completed_) std::free(b.data);
}

std::vector<CompletedBuffer> BufferOwner::take_completed() {
  std::vector<CompletedBuffer> out;
  std::lock_guard lock(mutex_);
  out.swap(completed_);
  return out;
}

void BufferOwner::recycle(const CompletedBuffer& b) {
  std::lock_guard lock(mutex_);
  if (!retired_ && b.size == buffer_bytes_ && pool_.size() < kPoolSize) {
    pool_.push_back(b.data);
  } else {
    std::free(b.data);
  }
}

void BufferOwner::retire() {
  std::vector<std::uint8_t*> pool;
  std::vector<CompletedBuffer> completed;
  {
    std::lock_guard lock(mutex_);
    retired_ = true;
    pool.swap(pool_);
    completed.swap(completed_);
  }
  for (std::uint8_t* b : pool) std::free(b);
  for (const CompletedBuffer& b : completed) std::free(b.data);
}

std::size_t BufferOwner::outstanding() const {
  std::lock_guard lock(mutex_);
  return outstanding_;
}

BufferRegistry::BufferRegistry() : impl_(std::make_unique<Impl>()) {}

BufferRegistry& BufferRegistry::get() {
  // Never destroyed: CUPTI may call back during static destruction.
  static BufferRegistry* r = new BufferRegistry();
  return *r;
}

void BufferRegistry::arm(std::shared_ptr<BufferOwner> owner) {
  std::lock_guard lock(mutex_);
  armed_ = std::move(owner);
  impl_->armed_generation = generation_.load();
}

void BufferRegistry::disarm(const BufferOwner* owner) {
  std::lock_guard lock(mutex_);
  if (armed_.get() == owner) armed_.reset();
}

std::size_t BufferRegistry::write_off(const BufferOwner* owner, std::uint64_t before) {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (auto& [data, e] : impl_->entries) {
    if (e.owner.get() != owner || e.written_off || e.generation >= before) continue;
    e.written_off = true;
    std::lock_guard olock(e.owner->mutex_);
    if (e.owner->outstanding_ > 0) --e.owner->outstanding_;
    ++n;
  }
  return n;
}

std::uint64_t BufferRegistry::cut() {
  std::lock_guard lock(mutex_);
  impl_->armed_generation = ++generation_;
  return impl_->armed_generation;
}

std::size_t BufferRegistry::release_unreturned(const BufferOwner* owner, std::uint64_t before) {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (auto it = impl_->entries.begin(); it != impl_->entries.end();) {
    Entry& e = it->second;
    if (e.owner.get() != owner || e.generation >= before) {
      ++it;
      continue;
    }
    {
      std::lock_guard olock(e.owner->mutex_);
      if (!e.written_off && e.owner->outstanding_ > 0) --e.owner->outstanding_;
    }
    std::free(it->first);
    it = impl_->entries.erase(it);
    ++n;
  }
  return n;
}

void BufferRegistry::request(std::uint8_t** buffer, std::size_t* size) {
  std::lock_guard lock(mutex_);
  BufferOwner* o = armed_.get();
  if (!o) return;
  std::uint8_t* b = nullptr;
  {
    std::lock_guard olock(o->mutex_);
    o->heartbeat_.fetch_add(1, std::memory_order_acq_rel);
    if (o->retired_) return;
    // Buffers waiting to be parsed count too: a loop that never flushes stays bounded.
    if (o->outstanding_ + o->completed_.size() >= o->max_buffers_) {
      o->declined_.fetch_add(1, std::memory_order_relaxed);
      return;  // CUPTI drops the records that needed it, and counts them
    }
    if (!o->pool_.empty()) {
      b = o->pool_.back();
      o->pool_.pop_back();
    } else {
      b = static_cast<std::uint8_t*>(std::aligned_alloc(8, o->buffer_bytes_));
    }
    if (!b) return;
    ++o->outstanding_;
  }
  try {
    impl_->entries[b] = Entry{armed_, o->buffer_bytes_, impl_->armed_generation, false};
  } catch (...) {
    std::lock_guard olock(o->mutex_);
    --o->outstanding_;
    std::free(b);
    return;
  }
  *buffer = b;
  *size = o->buffer_bytes_;
}

void BufferRegistry::complete(CUcontext context, std::uint32_t stream, std::uint8_t* buffer,
                              std::size_t valid) {
  Entry e;
  {
    std::lock_guard lock(mutex_);
    auto it = impl_->entries.find(buffer);
    if (it == impl_->entries.end()) {
      foreign_.fetch_add(1);  // another client's buffer: not ours to free or read
      return;
    }
    e = std::move(it->second);
    impl_->entries.erase(it);
  }
  BufferOwner& o = *e.owner;
  bool keep = false;
  {
    std::lock_guard olock(o.mutex_);
    o.heartbeat_.fetch_add(1, std::memory_order_acq_rel);
    if (!e.written_off && o.outstanding_ > 0) --o.outstanding_;
    if (!o.retired_) {
      try {
        o.completed_.push_back({buffer, e.size, valid, context, stream});
        keep = true;
      } catch (...) {
        detail::swallowed("collect/cupti/buffer_registry.cpp");
      }
    }
  }
  if (!keep) std::free(buffer);
}

void CUPTIAPI BufferRegistry::on_request(std::uint8_t** buffer, std::size_t* size,
                                         std::size_t* max) {
  *buffer = nullptr;
  *size = 0;
  *max = 0;
  get().request(buffer, size);
}

void CUPTIAPI BufferRegistry::on_complete(CUcontext context, std::uint32_t stream,
                                          std::uint8_t* buffer, std::size_t, std::size_t valid) {
  if (buffer) get().complete(context, stream, buffer, valid);
}

}  // namespace fathom::cupti
