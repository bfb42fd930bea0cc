#pragma once
// One call of fathom::offload (a unit): the storages its forward saved, each copied to host
// memory, and their way back in backward (offload.h says what the user sees). On a CUDA device
// the copies run on two side streams (out, back) fenced by events: out waits for the compute
// stream at the save, compute waits for back at the unpack. The CPU path (cpu_copy) copies to a
// separate buffer and back with the same bookkeeping, synchronously.
#include <c10/core/Event.h>
#include <c10/cuda/CUDAStream.h>
#include <fathom/offload.h>

#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "measure/saved_tensor_meter.h"

namespace fathom::detail {

struct OffloadMeterState {
  enum class Copy { ToHost, ToDevice, Wait };
  std::mutex mu;
  OffloadSummary totals;  // the timed sums include only resolved events
  struct Timing {
    Copy kind;
    c10::Event start, stop;
  };
  std::deque<Timing> pending;

  void add_timing(Copy kind, c10::Event start, c10::Event stop);
  // Sums the events that have completed (all of them when wait).
  void resolve(bool wait) noexcept;  // mu held
  void fell_back(const std::string& why);
};

// One saved storage on its way to host memory and back.
struct OffloadEntry {
  explicit OffloadEntry(c10::Device d) : device(d) {}
  c10::Device device;
  std::int64_t nbytes = 0;
  // The storage, weakly: its memory is the allocator's once the forward's references go, and the
  // StorageImpl's address cannot be reused for another storage while the unit looks it up.
  std::optional<c10::weak_intrusive_ptr<c10::StorageImpl>> storage;
  at::Tensor host;                      // bytes, pinned on a GPU
  std::optional<c10::Event> out_done;   // GPU: host is complete when it passes
  at::Tensor restored;                  // bytes on the device, between return and last unpack
  std::optional<c10::Event> back_done;  // GPU: restored is complete when it passes
  int users = 0;                        // saved variables holding this storage
  int unpacks_left = 0;                 // of this trip back
  bool used = false;                    // this backward unpacked it for the last time
};

class OffloadUnit : public std::enable_shared_from_this<OffloadUnit> {
 public:
  OffloadUnit(const OffloadOptions& options, std::shared_ptr<OffloadMeterState> meter,
              std::weak_ptr<OffloadUnit> previous);

  // Forward: the tensor's packed form, or null to keep it (too small, not strided, a fallback).
  // Never throws: a failing copy is a fallback.
  std::unique_ptr<SavedTensorPacker::Packed> pack(const at::Tensor& t) noexcept;
  void end_forward() noexcept;
  void fall_back(const std::string& why) noexcept;

  // Backward: this unit's tensors and those of the unit before it start coming back.
  void on_backward_begin() noexcept;
  // The bytes of entry on the device, complete on the current stream.
  at::Tensor bring_back(const std::shared_ptr<OffloadEntry>& entry);

 private:
  void prefetch(bool ahead) noexcept;
  // OffloadOptions::fetch_ahead >= 0: brings back the next tensors backward will use, up to
  // that many beyond `in_use` (none: the first one backward needs, and that many after it).
  // Returns how many copies it started.
  int fetch_window(const OffloadEntry* in_use);         // mu_ held
  void copy_out(OffloadEntry& e, const at::Tensor& t);  // mu_ held
  void copy_back(OffloadEntry& e);                      // mu_ held
  void count_kept(std::int64_t bytes) noexcept;
  // Copies back started one unit ahead (OffloadSummary::prefetched) or at the unit's own
  // backward (fetched_late).
  void count_fetched(bool ahead, std::int64_t copies);

  OffloadOptions options_;
  std::shared_ptr<OffloadMeterState> meter_;
  std::weak_ptr<OffloadUnit> previous_;
  std::mutex mu_;
  std::vector<std::weak_ptr<OffloadEntry>> entries_;
  std::unordered_map<const c10::StorageImpl*, std::weak_ptr<OffloadEntry>> by_storage_;
  std::optional<c10::cuda::CUDAStream> out_stream_, back_stream_;
  bool fell_back_ = false;
};

// One unit's offloading on this thread, from its forward's first save to its outputs: the unit
// (chained to the one before it on this thread, whose tensors come back one unit ahead) and the
// packer that hands it the saved tensors. fathom::offload runs a function inside one; a selective
// checkpoint runs its autograd function inside one for the outputs it offloads.
class OffloadScope {
 public:
  explicit OffloadScope(const OffloadOptions& options);
  ~OffloadScope();
  OffloadScope(const OffloadScope&) = delete;
  OffloadScope& operator=(const OffloadScope&) = delete;

  // After the forward: the unit lets the forward's storages go, and its backward begins when the
  // gradient of one of outputs is ready.
  void finish(const std::vector<at::Tensor>& outputs);

 private:
  class Packer;
  std::shared_ptr<OffloadUnit> unit_;
  std::unique_ptr<Packer> packer_;
};

}  // namespace fathom::detail
