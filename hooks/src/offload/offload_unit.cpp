#include "offload/offload_unit.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <fathom/error.h>

#include <algorithm>
#include <cstdlib>
#include <new>

#include "base/warning_sink.h"

namespace fathom::detail {
namespace {

constexpr auto kTimed = c10::EventFlag::BACKEND_DEFAULT;
constexpr auto kUntimed = c10::EventFlag::PYTORCH_DEFAULT;
constexpr std::size_t kResolveAfter = 64;  // pending timings, before the finished are summed

// The storage's bytes, as a uint8 tensor: what is copied, whatever the dtype and views on it.
at::Tensor bytes_of(const c10::Storage& storage, c10::Device device, std::int64_t nbytes) {
  at::Tensor b = at::empty({0}, at::TensorOptions().dtype(at::kByte).device(device));
  b.set_(storage, 0, {nbytes}, {1});
  return b;
}

// The CPU path's "host memory": bytes from malloc, outside LibTorch's CPU allocator, as pinned
// host memory is outside the CUDA caching allocator. So what the CPU allocator counts on the CPU
// path is what a device would hold (the benchmark's peaks), not the copies.
at::Tensor host_buffer(std::int64_t nbytes) {
  void* p = std::malloc(static_cast<std::size_t>(std::max<std::int64_t>(nbytes, 1)));
  if (!p) throw std::bad_alloc();
  return at::from_blob(
      p, {nbytes}, [](void* q) { std::free(q); }, at::TensorOptions().dtype(at::kByte));
}

// A saved tensor as the unit holds it: its storage's entry and where in the storage it lies.
class OffloadedTensor final : public SavedTensorPacker::Packed {
 public:
  OffloadedTensor(std::shared_ptr<OffloadUnit> unit, std::shared_ptr<OffloadEntry> entry,
                  const at::Tensor& t)
      : unit_(std::move(unit)),
        entry_(std::move(entry)),
        dtype_(t.scalar_type()),
        sizes_(t.sizes().vec()),
        strides_(t.strides().vec()),
        offset_(t.storage_offset()) {}
  at::Tensor unpack() override {
    const at::Tensor bytes = unit_->bring_back(entry_);
    at::NoGradGuard no_grad;
    at::Tensor out = at::empty({0}, at::TensorOptions().dtype(dtype_).device(bytes.device()));
    out.set_(bytes.storage(), offset_, sizes_, strides_);
    return out;
  }

 private:
  std::shared_ptr<OffloadUnit> unit_;
  std::shared_ptr<OffloadEntry> entry_;
  at::ScalarType dtype_;
  std::vector<std::int64_t> sizes_, strides_;
  std::int64_t offset_;
};

}  // namespace

void OffloadMeterState::add_timing(Copy kind, c10::Event start, c10::Event stop) {
  std::lock_guard<std::mutex> lock(mu);
  pending.push_back(Timing{kind, std::move(start), std::move(stop)});
  if (pending.size() > kResolveAfter) resolve(/*wait=*/false);
}

void OffloadMeterState::resolve(bool wait) noexcept {
  // In order of recording per stream, not across streams: look at every pending timing.
  for (auto it = pending.begin(); it != pending.end();) {
    try {
      if (wait) {
        it->stop.synchronize();
      } else if (!it->stop.query()) {
        ++it;
        continue;
      }
      const double ms = it->start.elapsedTime(it->stop);
      switch (it->kind) {
        case Copy::ToHost:
          totals.to_host_ms += ms;
          ++totals.timed_copies;
          break;
        case Copy::ToDevice:
          totals.to_device_ms += ms;
          ++totals.timed_copies;
          break;
        case Copy::Wait:
          totals.backward_wait_ms += ms;
          break;
      }
    } catch (const std::exception& e) {
      detail::warn("fathom::offload: a copy's device timing failed: ", e.what());
    }
    it = pending.erase(it);
  }
}

void OffloadMeterState::fell_back(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu);
  if (totals.fallback.empty()) totals.fallback = why;
}

OffloadUnit::OffloadUnit(const OffloadOptions& options, std::shared_ptr<OffloadMeterState> meter,
                         std::weak_ptr<OffloadUnit> previous)
    : options_(options), meter_(std::move(meter)), previous_(std::move(previous)) {}

void OffloadUnit::fall_back(const std::string& why) noexcept {
  try {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (fell_back_) return;
      fell_back_ = true;
    }
    const std::string text = why + "; its saved tensors are kept as autograd keeps them";
    meter_->fell_back(text);
    detail::warn("fathom::offload", options_.name().empty() ? "" : " (" + options_.name() + ")",
                 ": ", text);
  } catch (...) {
    detail::swallowed("offload/offload_unit.cpp");
  }
}

void OffloadUnit::count_fetched(bool ahead, std::int64_t copies) {
  if (copies == 0) return;
  std::lock_guard<std::mutex> lock(meter_->mu);
  (ahead ? meter_->totals.prefetched : meter_->totals.fetched_late) += copies;
}

void OffloadUnit::count_kept(std::int64_t bytes) noexcept {
  std::lock_guard<std::mutex> lock(meter_->mu);
  ++meter_->totals.kept_tensors;
  meter_->totals.kept_bytes += bytes;
}

std::unique_ptr<SavedTensorPacker::Packed> OffloadUnit::pack(const at::Tensor& t) noexcept {
  try {
    // Not chosen: left to the packers outside this unit's, not counted as kept here.
    if (options_.only() && !options_.only()(t)) return nullptr;
    // Only plain strided storages come back as they left: a conjugate or negative view's bit, a
    // sparse or nested layout would be lost by copying bytes.
    if (!t.has_storage() || t.layout() != at::kStrided || t.is_conj() || t.is_neg() ||
        t.is_meta() || t.unsafeGetTensorImpl()->is_wrapped_number()) {
      count_kept(t.has_storage() ? static_cast<std::int64_t>(t.storage().nbytes()) : 0);
      return nullptr;
    }
    const c10::Storage& storage = t.storage();
    const auto nbytes = static_cast<std::int64_t>(storage.nbytes());
    if (nbytes < options_.min_bytes() || nbytes == 0) {
      count_kept(nbytes);
      return nullptr;
    }
    const c10::Device device = t.device();
    if (device.is_cpu() && !options_.cpu_copy()) {
      fall_back(
          "the saved tensors are on the CPU, where offloading frees no device memory "
          "(OffloadOptions().cpu_copy(true) runs the copy path anyway, for tests)");
      count_kept(nbytes);
      return nullptr;
    }
    if (!device.is_cpu() && !device.is_cuda()) {
      fall_back("offloading needs a CUDA device, and a saved tensor is on " + device.str());
      count_kept(nbytes);
      return nullptr;
    }
    std::shared_ptr<OffloadEntry> entry;
    std::string failed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!fell_back_) {
        const c10::StorageImpl* key = storage.unsafeGetStorageImpl();
        if (auto it = by_storage_.find(key); it != by_storage_.end()) entry = it->second.lock();
        if (!entry) {
          auto fresh = std::make_shared<OffloadEntry>(device);
          fresh->nbytes = nbytes;
          fresh->storage.emplace(storage.getWeakStorageImpl());
          try {
            copy_out(*fresh, t);
            by_storage_[key] = fresh;
            entries_.push_back(fresh);
            entry = std::move(fresh);
            std::lock_guard<std::mutex> m(meter_->mu);
            ++meter_->totals.offloaded_tensors;
            meter_->totals.offloaded_bytes += nbytes;
          } catch (const std::exception& e) {
            const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
            failed = c10_error ? c10_error->what_without_backtrace() : e.what();
            failed = failed.substr(0, failed.find('\n'));
          }
        }
        if (entry) ++entry->users;
      }
    }
    if (!entry) {
      // Kept from here on: a unit half offloaded is still correct, and it says so once.
      if (!failed.empty())
        fall_back("copying a saved tensor to host memory failed (" + failed + ")");
      count_kept(nbytes);
      return nullptr;
    }
    return std::make_unique<OffloadedTensor>(shared_from_this(), std::move(entry), t);
  } catch (...) {
    detail::swallowed("offload/offload_unit.cpp");
    return nullptr;
  }
}

void OffloadUnit::copy_out(OffloadEntry& e, const at::Tensor& t) {
  at::NoGradGuard no_grad;
  const at::Tensor bytes = bytes_of(t.storage(), e.device, e.nbytes);
  if (e.device.is_cpu()) {
    e.host = host_buffer(e.nbytes);
    e.host.copy_(bytes);
    return;
  }
  const c10::DeviceIndex index = e.device.index();
  c10::cuda::CUDAGuard device_guard(index);
  if (!out_stream_) out_stream_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, index);
  if (!back_stream_) back_stream_ = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, index);
  const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(index);
  at::Tensor host = at::empty({e.nbytes}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
  // The copy reads what the compute stream has written by now.
  c10::Event ready(c10::DeviceType::CUDA, kUntimed);
  ready.record(compute);
  ready.block(*out_stream_);
  c10::Event start(c10::DeviceType::CUDA, kTimed), stop(c10::DeviceType::CUDA, kTimed);
  start.record(*out_stream_);
  {
    c10::cuda::CUDAStreamGuard on_side(*out_stream_);
    host.copy_(bytes, /*non_blocking=*/true);
  }
  stop.record(*out_stream_);
  e.out_done.emplace(c10::DeviceType::CUDA, kUntimed);
  e.out_done->record(*out_stream_);
  // The forward's references go when it returns; the allocator then holds the block until the
  // side stream has read it (the device copy released once the copy is done).
  c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), *out_stream_);
  e.host = std::move(host);
  meter_->add_timing(OffloadMeterState::Copy::ToHost, std::move(start), std::move(stop));
}

void OffloadUnit::copy_back(OffloadEntry& e) {
  at::NoGradGuard no_grad;
  if (e.device.is_cpu()) {
    e.restored = at::empty({e.nbytes}, at::TensorOptions().dtype(at::kByte));
    e.restored.copy_(e.host);
    e.unpacks_left = e.users;
    return;
  }
  const c10::DeviceIndex index = e.device.index();
  c10::cuda::CUDAGuard device_guard(index);
  const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(index);
  // Allocated for the compute stream, which reads it; written on the side stream once the
  // compute stream is past this point (the block may be one it just freed) and the copy out is
  // complete.
  at::Tensor restored =
      at::empty({e.nbytes}, at::TensorOptions().dtype(at::kByte).device(e.device));
  c10::Event ready(c10::DeviceType::CUDA, kUntimed);
  ready.record(compute);
  ready.block(*back_stream_);
  if (e.out_done) e.out_done->block(*back_stream_);
  c10::Event start(c10::DeviceType::CUDA, kTimed), stop(c10::DeviceType::CUDA, kTimed);
  start.record(*back_stream_);
  {
    c10::cuda::CUDAStreamGuard on_side(*back_stream_);
    restored.copy_(e.host, /*non_blocking=*/true);
  }
  stop.record(*back_stream_);
  e.back_done.emplace(c10::DeviceType::CUDA, kUntimed);
  e.back_done->record(*back_stream_);
  // Should backward fail before the compute stream reads it, its free must not hand the block
  // out while the side stream still writes.
  c10::cuda::CUDACachingAllocator::recordStream(restored.storage().data_ptr(), *back_stream_);
  e.restored = std::move(restored);
  e.unpacks_left = e.users;
  meter_->add_timing(OffloadMeterState::Copy::ToDevice, std::move(start), std::move(stop));
}

void OffloadUnit::end_forward() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  by_storage_.clear();  // the weak storages, so their StorageImpls can go
}

void OffloadUnit::prefetch(bool ahead) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(entries_, [](const std::weak_ptr<OffloadEntry>& w) {
      return w.expired();  // its saved variables are gone (backward ran, or the graph was freed)
    });
    if (!ahead) {
      // A new trip back (retain_graph brings a second): nothing of it used yet.
      for (const auto& w : entries_)
        if (auto e = w.lock()) e->used = false;
      if (options_.fetch_ahead() >= 0) {
        count_fetched(/*ahead=*/false, fetch_window(nullptr));
        return;
      }
    }
    // Ahead, within the limit: the last saved first, as backward needs them (with a fetch
    // window, no more than it holds when backward begins).
    const std::int64_t limit = ahead ? options_.prefetch_ahead_bytes() : -1;
    const std::int64_t max_count =
        ahead && options_.fetch_ahead() >= 0 ? std::int64_t{options_.fetch_ahead()} + 1 : -1;
    std::int64_t started = 0, bytes = 0;
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
      if (max_count >= 0 && started >= max_count) break;
      std::shared_ptr<OffloadEntry> e = it->lock();
      if (!e || e->restored.defined()) continue;
      if (limit >= 0 && bytes + e->nbytes > limit) break;
      copy_back(*e);
      bytes += e->nbytes;
      ++started;
    }
    count_fetched(ahead, started);
  } catch (const std::exception& e) {
    // The tensors come back at their unpack instead, where a failure is backward's error.
    detail::warn("fathom::offload: prefetching saved tensors failed: ", e.what());
  }
}

int OffloadUnit::fetch_window(const OffloadEntry* in_use) {
  const int ahead = options_.fetch_ahead();
  // Nothing in use yet: the first one backward needs is fetched too.
  int room = in_use ? ahead : ahead + 1, started = 0;
  for (auto it = entries_.rbegin(); it != entries_.rend() && room > 0; ++it) {
    std::shared_ptr<OffloadEntry> e = it->lock();
    if (!e || e->used || e.get() == in_use) continue;
    if (!e->restored.defined()) {
      copy_back(*e);
      ++started;
    }
    --room;
  }
  return started;
}

void OffloadUnit::on_backward_begin() noexcept {
  prefetch(/*ahead=*/false);
  if (auto before = previous_.lock()) before->prefetch(/*ahead=*/true);
}

at::Tensor OffloadUnit::bring_back(const std::shared_ptr<OffloadEntry>& entry) {
  std::lock_guard<std::mutex> lock(mu_);
  OffloadEntry& e = *entry;
  if (!e.restored.defined()) {
    copy_back(e);
    count_fetched(/*ahead=*/false, 1);
  }
  at::Tensor bytes = e.restored;
  if (e.back_done) {
    const c10::DeviceIndex index = e.device.index();
    const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(index);
    c10::Event before(c10::DeviceType::CUDA, kTimed), after(c10::DeviceType::CUDA, kTimed);
    before.record(compute);
    e.back_done->block(compute);  // the fence: compute never reads a half copy
    after.record(compute);
    meter_->add_timing(OffloadMeterState::Copy::Wait, std::move(before), std::move(after));
  }
  // The last saved variable of this trip has it: the unit lets go, and the memory goes back to
  // the allocator when backward is done with it (retain_graph brings it back again).
  if (--e.unpacks_left <= 0) {
    e.restored = at::Tensor();
    e.back_done.reset();
    e.used = true;
  }
  if (options_.fetch_ahead() >= 0) {
    // The next ones start now, behind this tensor's backward; a failure leaves them to their own
    // unpack, where it is backward's error.
    try {
      count_fetched(/*ahead=*/false, fetch_window(&e));
    } catch (const std::exception& x) {
      detail::warn("fathom::offload: fetching the next saved tensors failed: ", x.what());
    }
  }
  return bytes;
}

}  // namespace fathom::detail
