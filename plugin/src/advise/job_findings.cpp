// Findings that only show across ranks. A single rank's report cannot see them: in synchronous
// data-parallel training every rank's step takes as long as the slowest rank's, so the cause
// shows only when the ranks are set side by side.
#include "advise/job_findings.h"

#include <fathom/job_report.h>
#include <fathom/loss_trend.h>  // median
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "advise/advisor.h"  // finding_id
#include "base/thresholds.h"

namespace fathom {
namespace {

// The median of f over every timed rank but `except`.
template <typename F>
double median_of_others(const std::vector<const RankSummary*>& ranks, const RankSummary* except,
                        F f) {
  std::vector<double> v;
  v.reserve(ranks.size());
  for (const RankSummary* s : ranks)
    if (s != except) v.push_back(f(*s));
  return median(std::move(v));
}

std::string rank_list(const std::vector<int>& ranks, std::size_t max = 16) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size() && i < max; ++i)
    out += fmt::format("{}{}", i ? ", " : "", ranks[i]);
  if (ranks.size() > max) out += fmt::format(" and {} more", ranks.size() - max);
  return out;
}

}  // namespace

std::string work_basis(const JobEpoch& e) {
  std::string basis = e.work_from_comm ? "step time less communication wait"
                                       : "step time (communication not measured)";
  return (e.work_is_median ? "median per step of " : "mean per step of ") + basis;
}

namespace {

std::string ms(double v) { return fmt::format("{:.2f} ms", v); }
std::string pct(double share) { return fmt::format("{:.1f} %", 100.0 * share); }

void straggler(const JobEpoch& e, const std::vector<const RankSummary*>& timed,
               std::vector<Finding>& out) {
  if (timed.size() < 2) return;
  const RankSummary* slow = *std::max_element(
      timed.begin(), timed.end(), [](auto* a, auto* b) { return a->work_ms() < b->work_ms(); });
  const double others =
      median_of_others(timed, slow, [](const RankSummary& s) { return s.work_ms(); });
  const double excess = slow->work_ms() - others;
  if (others <= 0 || excess < thresholds::kStragglerMinMs ||
      excess < thresholds::kStragglerShare * others)
    return;
  Finding f;
  f.id = std::string(finding_id::kRankStraggler);
  f.severity = excess > 0.5 * others ? Severity::Critical : Severity::Warning;
  f.title =
      fmt::format("Rank {} is a straggler: {} more work per step than the other ranks ({:+.0f} %)",
                  slow->rank.rank, ms(excess), 100.0 * excess / others);
  f.evidence.push_back(
      {fmt::format("rank {} work per step", slow->rank.rank), ms(slow->work_ms())});
  f.evidence.push_back({"median of the other ranks", ms(others)});
  f.evidence.push_back(
      {"skew (slowest - fastest)", fmt::format("{} ({})", ms(e.skew_ms), pct(e.skew_share))});
  f.evidence.push_back({"work measured as", work_basis(e)});
  if (e.work_from_comm) {
    const double wait = median_of_others(
        timed, slow, [](const RankSummary& s) { return s.comm_exposed_ms_mean(); });
    f.evidence.push_back({"the other ranks' communication wait per step (median)", ms(wait)});
    f.evidence.push_back({fmt::format("rank {} communication wait per step", slow->rank.rank),
                          ms(slow->comm_exposed_ms_mean())});
  }
  // Data wait inside the step counts as work: say how much of the excess it explains.
  const double data_others =
      median_of_others(timed, slow, [](const RankSummary& s) { return s.data_ms_mean(); });
  f.evidence.push_back({fmt::format("rank {} data wait per step (others' median)", slow->rank.rank),
                        fmt::format("{} ({})", ms(slow->data_ms_mean()), ms(data_others))});
  f.evidence.push_back({fmt::format("rank {} host", slow->rank.rank), slow->host});
  f.why =
      "In synchronous data-parallel training every all-reduce waits for the slowest rank, so the "
      "whole job runs at the straggler's pace; the other ranks spend the difference waiting "
      "inside the collective.";
  const double step = slow->step_ms_mean();
  if (step > 0) {
    f.gain_fraction = std::clamp(excess / step, 0.0, 1.0);
    f.estimated_gain =
        fmt::format("up to {:.0f}% of step time on every rank", 100.0 * *f.gain_fraction);
  }
  f.fix = fmt::format(
      "# Find what differs on rank {0} (host {1}):\n"
      "#  - its own report (*.rank{0}.json): which phase is longer than on the other ranks?\n"
      "#  - GPU clocks, temperature, power (nvidia-smi -q -d CLOCK,PERFORMANCE) or a busy CPU\n"
      "#  - its data shard: larger or harder samples, a slower disk or loader\n"
      "# then give the slow rank less work, or move it off the slow host.",
      slow->rank.rank, slow->host);
  out.push_back(std::move(f));
}

void rank_data_wait(const std::vector<const RankSummary*>& timed, std::vector<Finding>& out) {
  if (timed.size() < 2) return;
  const RankSummary* worst = *std::max_element(timed.begin(), timed.end(), [](auto* a, auto* b) {
    return a->data_ms_mean() < b->data_ms_mean();
  });
  const double step = worst->step_ms_mean();
  if (step <= 0) return;
  const double others =
      median_of_others(timed, worst, [](const RankSummary& s) { return s.data_ms_mean(); });
  const double excess = worst->data_ms_mean() - others;
  if (worst->data_ms_mean() < thresholds::kDataShareOfStep * step ||
      excess < thresholds::kRankDataExcessShareOfStep * step)
    return;
  Finding f;
  f.id = std::string(finding_id::kRankDataWait);
  f.severity = Severity::Warning;
  f.title = fmt::format("Rank {} waits on data: {} per step, {} more than the other ranks",
                        worst->rank.rank, ms(worst->data_ms_mean()), ms(excess));
  f.evidence.push_back(
      {fmt::format("rank {} data wait per step", worst->rank.rank), ms(worst->data_ms_mean())});
  f.evidence.push_back({"median of the other ranks", ms(others)});
  f.evidence.push_back({fmt::format("share of rank {}'s step", worst->rank.rank),
                        pct(worst->data_ms_mean() / step)});
  f.why =
      "One rank's loader is slower than the others'; while it waits for its batch, every other "
      "rank "
      "waits for it at the next all-reduce.";
  f.gain_fraction = std::clamp(excess / step, 0.0, 1.0);
  f.estimated_gain =
      fmt::format("up to {:.0f}% of step time on every rank", 100.0 * *f.gain_fraction);
  f.fix = fmt::format(
      "# On rank {0}: more loader workers or prefetch, a local copy of the data, pinned memory;\n"
      "# check that its shard is not larger or slower to decode than the others'.\n"
      "auto loader = torch::data::make_data_loader(dataset, sampler,\n"
      "    torch::data::DataLoaderOptions().batch_size(batch).workers(8));",
      worst->rank.rank);
  out.push_back(std::move(f));
}

void load_imbalance(const std::vector<const RankSummary*>& timed, std::vector<Finding>& out) {
  if (timed.size() < 2) return;
  auto per_step = [](const RankSummary* s) { return static_cast<double>(s->samples) / s->steps; };
  auto [lo, hi] = std::minmax_element(timed.begin(), timed.end(),
                                      [&](auto* a, auto* b) { return per_step(a) < per_step(b); });
  auto [few, many] = std::minmax_element(timed.begin(), timed.end(),
                                         [](auto* a, auto* b) { return a->steps < b->steps; });
  const double sample_spread =
      per_step(*hi) > 0 ? (per_step(*hi) - per_step(*lo)) / per_step(*hi) : 0.0;
  const double step_spread =
      static_cast<double>((*many)->steps - (*few)->steps) / static_cast<double>((*many)->steps);
  if (sample_spread <= thresholds::kLoadImbalanceShare &&
      step_spread <= thresholds::kLoadImbalanceShare)
    return;
  Finding f;
  f.id = std::string(finding_id::kRankLoadImbalance);
  f.severity = Severity::Warning;
  f.title = "The ranks do unequal amounts of work";
  if (sample_spread > thresholds::kLoadImbalanceShare) {
    f.evidence.push_back({fmt::format("samples per step, rank {}", (*hi)->rank.rank),
                          fmt::format("{:.1f}", per_step(*hi))});
    f.evidence.push_back({fmt::format("samples per step, rank {}", (*lo)->rank.rank),
                          fmt::format("{:.1f}", per_step(*lo))});
  }
  if (step_spread > thresholds::kLoadImbalanceShare) {
    f.evidence.push_back(
        {fmt::format("steps, rank {}", (*many)->rank.rank), fmt::format("{}", (*many)->steps)});
    f.evidence.push_back(
        {fmt::format("steps, rank {}", (*few)->rank.rank), fmt::format("{}", (*few)->steps)});
  }
  f.why =
      "Ranks with larger batches or more steps set the pace; the others idle in collectives (or, "
      "with unequal step counts, the job hangs or drops data at the epoch end).";
  const double spread = std::max(sample_spread, step_spread);
  f.gain_fraction = std::clamp(spread, 0.0, 1.0);
  f.estimated_gain = fmt::format("up to {:.0f}% of step time on the lighter ranks", 100.0 * spread);
  f.fix =
      "// Give every rank the same share: a distributed sampler with drop_last, equal batch "
      "sizes.\n"
      "torch::data::samplers::DistributedRandomSampler sampler(dataset.size().value(), "
      "world_size,\n"
      "                                                        rank, /*allow_duplicates=*/false);";
  out.push_back(std::move(f));
}

void exposed_communication(const JobEpoch& e, const std::vector<const RankSummary*>& timed,
                           std::vector<Finding>& out) {
  // With a rank missing, the slowest rank may be the missing one: the rule below needs them all.
  if (!e.missing_ranks.empty()) return;
  // The slowest rank waits least for the others, so its exposed communication is the cost of the
  // collectives themselves, not of a straggler.
  const RankSummary* slow = nullptr;
  for (const RankSummary* s : timed)
    if (s->comm.source != CommSource::None && (!slow || s->work_ms() > slow->work_ms())) slow = s;
  if (!slow || slow->step_ms_mean() <= 0) return;
  const double share = slow->comm_exposed_ms_mean() / slow->step_ms_mean();
  if (share <= thresholds::kCommunicationShareOfStep) return;
  Finding f;
  f.id = std::string(finding_id::kRankCommunicationExposed);
  f.severity = Severity::Warning;
  f.title = fmt::format(
      "Communication not hidden behind compute: {} of the step on the slowest rank", pct(share));
  f.evidence.push_back({fmt::format("rank {} communication wait per step", slow->rank.rank),
                        ms(slow->comm_exposed_ms_mean())});
  f.evidence.push_back({fmt::format("rank {} communication busy per step", slow->rank.rank),
                        ms(slow->per_step(slow->comm.busy_ms))});
  if (slow->comm.busy_ms > 0)
    f.evidence.push_back({"hidden behind compute",
                          pct(1.0 - std::min(1.0, slow->comm.exposed_ms / slow->comm.busy_ms))});
  f.evidence.push_back({"measured from", std::string(comm_source_name(slow->comm.source))});
  f.why =
      "Even the slowest rank, which waits for no one, waits this long for its collectives: the "
      "all-reduce is not overlapped with the backward pass, or there is too little compute per "
      "byte.";
  f.gain_fraction = std::clamp(share, 0.0, 1.0);
  f.estimated_gain = fmt::format("up to {:.0f}% of step time", 100.0 * share);
  f.fix =
      "// Launch each gradient bucket's all-reduce as soon as its gradients are ready (during\n"
      "// backward), use larger buckets, accumulate gradients over several micro-batches, or a\n"
      "// larger batch per rank.";
  out.push_back(std::move(f));
}

void missing(const JobEpoch& e, std::vector<Finding>& out) {
  if (e.missing_ranks.empty()) return;
  Finding f;
  f.id = std::string(finding_id::kRanksMissing);
  f.severity = Severity::Critical;
  f.title = fmt::format("{} of {} ranks did not report epoch {}: rank{} {}", e.missing_ranks.size(),
                        e.world_size, e.index, e.missing_ranks.size() > 1 ? "s" : "",
                        rank_list(e.missing_ranks));
  f.evidence.push_back(
      {"rank 0 waited",
       e.merge_timeout_ms
           ? fmt::format("{:.0f} ms (timeout {} ms)", std::trunc(e.waited_ms), *e.merge_timeout_ms)
           : ms(e.waited_ms)});
  for (const UnreadableRank& u : e.unreadable)
    f.evidence.push_back({fmt::format("rank {} summary unreadable", u.rank), u.why});
  f.why =
      "A rank that died, hung, or is slower than the merge timeout leaves the job report without "
      "its numbers; in a synchronous job it also stalls every other rank.";
  f.fix =
      "# Look at the missing ranks' logs (an out-of-memory kill, an exception, a lost host);\n"
      "# if they are only slow, raise the merge timeout:\n"
      "FATHOM_MERGE_TIMEOUT=300 torchrun ...";
  out.push_back(std::move(f));
}

}  // namespace

std::vector<Finding> find_cross_rank_issues(const JobEpoch& e) {
  std::vector<const RankSummary*> timed;
  for (const RankSummary& s : e.ranks)
    if (s.steps > 0) timed.push_back(&s);
  std::vector<Finding> out;
  missing(e, out);
  straggler(e, timed, out);
  rank_data_wait(timed, out);
  load_imbalance(timed, out);
  exposed_communication(e, timed, out);
  return out;
}

}  // namespace fathom
