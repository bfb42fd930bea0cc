// The rank summary's wire format (docs/distributed.md): what a rank sends rank 0 at each epoch
// end, in a fixed little-endian layout of at most kMaxRankSummaryBytes.
#include "formats/rank_summary_bytes.h"

#include <fathom/error.h>
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>

namespace fathom {
namespace {

constexpr std::array<std::uint8_t, 4> kMagic{'F', 'T', 'R', 'S'};
constexpr std::uint8_t kVersion = 1;

enum Flag : std::uint8_t {
  kHasDeviceAllocated = 1 << 0,
  kHasDeviceReserved = 1 << 1,
  kHasPeakRss = 1 << 2,
  kEndedByException = 1 << 3,
  kHasWorkMedian = 1 << 4,
};

class Writer {
 public:
  explicit Writer(std::vector<std::uint8_t>& out) : out_(out) {}
  void u8(std::uint8_t v) { out_.push_back(v); }
  template <typename T>
  void le(T v) {
    static_assert(std::is_integral_v<T>);
    using U = std::make_unsigned_t<T>;
    const U u = static_cast<U>(v);
    for (std::size_t i = 0; i < sizeof(T); ++i)
      out_.push_back(static_cast<std::uint8_t>(u >> (8 * i)));
  }
  void f64(double v) { le(std::bit_cast<std::uint64_t>(v)); }
  void text(const std::string& s, std::size_t max) {
    const std::size_t n = std::min(s.size(), max);
    u8(static_cast<std::uint8_t>(n));
    out_.insert(out_.end(), s.begin(), s.begin() + static_cast<std::ptrdiff_t>(n));
  }

 private:
  std::vector<std::uint8_t>& out_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> in) : in_(in) {}
  std::uint8_t u8() { return take(1)[0]; }
  template <typename T>
  T le() {
    using U = std::make_unsigned_t<T>;
    auto b = take(sizeof(T));
    U u = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i)
      u |= static_cast<U>(static_cast<U>(b[i]) << (8 * i));
    return static_cast<T>(u);
  }
  double f64() { return std::bit_cast<double>(le<std::uint64_t>()); }
  std::string text(std::size_t max, const char* field) {
    const std::size_t n = u8();
    if (n > max)
      throw Error(fmt::format("rank summary: {} is {} bytes, more than {}", field, n, max));
    auto b = take(n);
    return std::string(b.begin(), b.end());
  }
  std::size_t left() const noexcept { return in_.size() - at_; }

 private:
  std::span<const std::uint8_t> take(std::size_t n) {
    if (left() < n)
      throw Error(fmt::format("rank summary: truncated at byte {} of {} (needed {} more)", at_,
                              in_.size(), n));
    auto b = in_.subspan(at_, n);
    at_ += n;
    return b;
  }
  std::span<const std::uint8_t> in_;
  std::size_t at_ = 0;
};

}  // namespace

std::vector<std::uint8_t> serialize_rank_summary(const RankSummary& s) {
  std::vector<std::uint8_t> out;
  out.reserve(kMaxRankSummaryBytes);
  Writer w(out);
  for (auto b : kMagic) w.u8(b);
  w.u8(kVersion);
  std::uint8_t flags = 0;
  if (s.device_peak_allocated_bytes) flags |= kHasDeviceAllocated;
  if (s.device_peak_reserved_bytes) flags |= kHasDeviceReserved;
  if (s.peak_rss_bytes) flags |= kHasPeakRss;
  if (s.ended_by_exception) flags |= kEndedByException;
  if (s.work_ms_median) flags |= kHasWorkMedian;
  w.u8(flags);
  w.le<std::int32_t>(s.rank.rank);
  w.le<std::int32_t>(s.rank.local_rank);
  w.le<std::int32_t>(s.rank.world_size);
  w.le<std::int64_t>(s.epoch);
  w.le<std::int64_t>(s.pid);
  w.le<std::int64_t>(s.steps);
  w.le<std::int64_t>(s.failed_steps);
  w.le<std::int64_t>(s.samples);
  w.f64(s.wall_ms);
  w.f64(s.step_ms_total);
  w.f64(s.step_ms_max);
  for (double v : s.phase_ms) w.f64(v);
  w.u8(static_cast<std::uint8_t>(s.comm.source));
  w.le<std::int64_t>(s.comm.collectives);
  w.le<std::int64_t>(s.comm.bytes);
  w.f64(s.comm.busy_ms);
  w.f64(s.comm.exposed_ms);
  w.f64(s.work_ms_median.value_or(0.0));
  // Absent optionals travel as zeros so the layout stays fixed; the flags say which are real.
  w.le<std::int64_t>(s.device_peak_allocated_bytes.value_or(0));
  w.le<std::int64_t>(s.device_peak_reserved_bytes.value_or(0));
  w.le<std::int64_t>(s.peak_rss_bytes.value_or(0));
  w.text(s.host, kRankSummaryHostBytes);
  const std::size_t n = std::min(s.top_findings.size(), kRankSummaryTopFindings);
  w.u8(static_cast<std::uint8_t>(n));
  for (std::size_t i = 0; i < n; ++i) {
    w.u8(static_cast<std::uint8_t>(s.top_findings[i].severity));
    w.text(s.top_findings[i].id, kRankSummaryFindingIdBytes);
  }
  return out;
}

RankSummary parse_rank_summary(std::span<const std::uint8_t> bytes) {
  Reader r(bytes);
  for (auto b : kMagic)
    if (r.u8() != b) throw Error("rank summary: not a fathom rank summary (bad magic)");
  const std::uint8_t version = r.u8();
  if (version != kVersion)
    throw Error(
        fmt::format("rank summary: version {} (this fathom reads version {}); run the same "
                    "fathom build on every rank",
                    version, kVersion));
  const std::uint8_t flags = r.u8();
  RankSummary s;
  s.rank.rank = r.le<std::int32_t>();
  s.rank.local_rank = r.le<std::int32_t>();
  s.rank.world_size = r.le<std::int32_t>();
  s.epoch = r.le<std::int64_t>();
  s.pid = r.le<std::int64_t>();
  s.steps = r.le<std::int64_t>();
  s.failed_steps = r.le<std::int64_t>();
  s.samples = r.le<std::int64_t>();
  s.wall_ms = r.f64();
  s.step_ms_total = r.f64();
  s.step_ms_max = r.f64();
  for (double& v : s.phase_ms) v = r.f64();
  const std::uint8_t source = r.u8();
  if (source > static_cast<std::uint8_t>(CommSource::Gpu))
    throw Error(fmt::format("rank summary: unknown communication source {}", source));
  s.comm.source = static_cast<CommSource>(source);
  s.comm.collectives = r.le<std::int64_t>();
  s.comm.bytes = r.le<std::int64_t>();
  s.comm.busy_ms = r.f64();
  s.comm.exposed_ms = r.f64();
  const double work_median = r.f64();
  if (flags & kHasWorkMedian) s.work_ms_median = work_median;
  const auto allocated = r.le<std::int64_t>();
  const auto reserved = r.le<std::int64_t>();
  const auto rss = r.le<std::int64_t>();
  if (flags & kHasDeviceAllocated) s.device_peak_allocated_bytes = allocated;
  if (flags & kHasDeviceReserved) s.device_peak_reserved_bytes = reserved;
  if (flags & kHasPeakRss) s.peak_rss_bytes = rss;
  s.ended_by_exception = flags & kEndedByException;
  s.host = r.text(kRankSummaryHostBytes, "host name");
  const std::size_t n = r.u8();
  if (n > kRankSummaryTopFindings)
    throw Error(fmt::format("rank summary: {} findings, more than {}", n, kRankSummaryTopFindings));
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t sev = r.u8();
    if (sev > static_cast<std::uint8_t>(Severity::Critical))
      throw Error(fmt::format("rank summary: unknown severity {}", sev));
    RankFinding f;
    f.severity = static_cast<Severity>(sev);
    f.id = r.text(kRankSummaryFindingIdBytes, "finding id");
    s.top_findings.push_back(std::move(f));
  }
  if (r.left() != 0)
    throw Error(fmt::format("rank summary: {} unexpected bytes at the end", r.left()));
  if (s.rank.world_size < 1 || s.rank.rank < 0 || s.rank.rank >= s.rank.world_size)
    throw Error(fmt::format("rank summary: rank {} of world size {} is impossible", s.rank.rank,
                            s.rank.world_size));
  return s;
}

}  // namespace fathom
