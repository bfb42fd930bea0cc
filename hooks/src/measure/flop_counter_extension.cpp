#include "measure/flop_counter_extension.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <utility>

#include "base/warning_sink.h"

namespace fathom::detail {
namespace {

constexpr const char* kWhat = "FLOPs per step";

std::string phase_label(int phase) {
  return phase == FlopTally::kNoPhase ? std::string("unattributed")
                                      : std::string(phase_name(static_cast<Phase>(phase)));
}

}  // namespace

FlopCounterExtension::FlopCounterExtension(const Options& options)
    : enabled_(options.count_flops()) {}

FlopCounterExtension::~FlopCounterExtension() = default;

void FlopCounterExtension::on_epoch_begin(std::int64_t) noexcept {
  epoch_entries_.clear();
  unfit_.clear();
  uncounted_.clear();
  profiled_steps_ = 0;
  taken_by_another_ = false;
}

void FlopCounterExtension::on_step_begin(std::int64_t) noexcept {
  if (!enabled_ || profiled_steps_ >= kFlopProfiledSteps || callback_) return;
  try {
    tally_.take();  // nothing left from a step that failed
    tally_.set_phase(FlopTally::kNoPhase);
    auto cb = std::make_unique<OpFlopCallback>(tally_);
    if (cb->registered())
      callback_ = std::move(cb);
    else
      taken_by_another_ = true;
  } catch (...) {
    swallowed("measure/flop_counter_extension.cpp: step begin");
  }
}

void FlopCounterExtension::on_phase_begin(Phase phase) noexcept {
  if (callback_) tally_.set_phase(static_cast<int>(phase));
}

void FlopCounterExtension::on_phase_end(Phase, bool) noexcept {
  if (callback_) tally_.set_phase(FlopTally::kNoPhase);
}

void FlopCounterExtension::on_step_end(std::int64_t, bool failed) noexcept {
  if (!callback_) return;
  callback_.reset();  // removes the callback: the next steps run without it
  try {
    std::vector<std::pair<std::string, std::int64_t>> uncounted;
    std::vector<FlopTally::Entry> step = tally_.take(&unfit_, &uncounted);
    if (failed) return;  // a partial step would lower the average; the next step counts instead
    for (auto& [op, calls] : uncounted) {
      auto it = std::find_if(uncounted_.begin(), uncounted_.end(),
                             [&](const auto& u) { return u.first == op; });
      if (it == uncounted_.end())
        uncounted_.emplace_back(std::move(op), calls);
      else
        it->second += calls;
    }
    ++profiled_steps_;
    for (FlopTally::Entry& e : step) {
      auto it = std::find_if(epoch_entries_.begin(), epoch_entries_.end(), [&](const auto& x) {
        return x.phase == e.phase && x.op == e.op && x.dtype == e.dtype;
      });
      if (it == epoch_entries_.end()) {
        epoch_entries_.push_back(std::move(e));
      } else {
        it->calls += e.calls;
        it->flops += e.flops;
      }
    }
  } catch (...) {
    swallowed("measure/flop_counter_extension.cpp: step end");
  }
}

void FlopCounterExtension::on_epoch_measured(EpochSummary& epoch, Environment&) noexcept {
  try {
    FlopsSummary f;
    if (!enabled_) {
      f.not_measured.push_back({kWhat, kFlopsOff});
    } else if (profiled_steps_ == 0) {
      f.not_measured.push_back(
          {kWhat, taken_by_another_
                      ? "another fathom session in this process was counting its own steps"
                      : "no step of this epoch completed, so none was counted"});
    } else {
      f.profiled_steps = profiled_steps_;
      const double n = static_cast<double>(profiled_steps_);
      std::map<std::string, double> by_dtype;
      for (const FlopTally::Entry& e : epoch_entries_) {
        const double per_step = static_cast<double>(e.flops) / n;
        f.per_step += per_step;
        if (e.phase == static_cast<int>(Phase::Forward)) f.forward += per_step;
        if (e.phase == static_cast<int>(Phase::Backward)) f.backward += per_step;
        by_dtype[e.dtype] += per_step;
        f.by_op.push_back(
            {phase_label(e.phase), e.op, e.dtype, static_cast<double>(e.calls) / n, per_step});
      }
      std::stable_sort(f.by_op.begin(), f.by_op.end(),
                       [](const OpFlops& a, const OpFlops& b) { return a.flops > b.flops; });
      double most = 0;
      for (const auto& [dtype, flops] : by_dtype) {
        if (flops > most) {
          most = flops;
          f.dominant_dtype = dtype;
        }
      }
      for (const std::string& op : unfit_)
        f.not_measured.push_back(
            {kWhat + std::string(": calls of ") + op,
             "their arguments did not fit torch.utils.flop_counter's formula for " + op +
                 ", so they are not counted"});
      for (const auto& [op, calls] : uncounted_) {
        std::ostringstream what;
        what << kWhat << ": " << op << " (" << static_cast<double>(calls) / n << " calls per step)";
        f.not_measured.push_back(
            {what.str(),
             "no FLOP formula covers its fused kernel (torch.utils.flop_counter has none either): "
             "FLOPs per step, throughput and MFU leave its products out"});
      }
    }
    epoch.flops = std::move(f);
  } catch (...) {
    swallowed("measure/flop_counter_extension.cpp: the epoch's flops");
  }
}

}  // namespace fathom::detail
