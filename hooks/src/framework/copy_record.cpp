#include "framework/copy_record.h"

namespace fathom::detail {

std::optional<CopyRecord> copy_record_of(const at::Tensor& in, const at::Tensor& out,
                                         bool non_blocking, std::int64_t begin_ns,
                                         std::int64_t end_ns, std::int64_t step) {
  if (out.is_same(in)) return std::nullopt;
  const c10::Device from = in.device();
  const c10::Device to = out.device();
  CopyRecord r;
  if (from.is_cpu())
    r.direction = to.is_cpu() ? CopyDirection::HostToHost : CopyDirection::HostToDevice;
  else
    r.direction = to.is_cpu() ? CopyDirection::DeviceToHost : CopyDirection::DeviceToDevice;
  r.bytes = static_cast<std::int64_t>(in.nbytes());
  // Pinned-ness is a property of the host side of the copy.
  const at::Tensor& host = from.is_cpu() ? in : out;
  r.pinned = host.device().is_cpu() && host.is_pinned();
  r.non_blocking = non_blocking;
  r.begin_ns = begin_ns;
  r.end_ns = end_ns;
  r.step = step;
  return r;
}

}  // namespace fathom::detail
