#include "report/achievement_json.h"

#include "base/json_fields.h"

namespace fathom::detail {

template <typename V>
static void fields(V& v, OpFlops& o) {
  v("phase", o.phase);
  v("op", o.op);
  v("dtype", o.dtype);
  v("calls", o.calls);
  v("flops", o.flops);
}

template <typename V>
static void fields(V& v, PhaseThroughput& p) {
  v("phase", p.phase);
  v("flops_per_step", p.flops_per_step);
  v("seconds_per_step", p.seconds_per_step);
  v("time_source", p.time_source);
  v.since("flops_per_s", p.flops_per_s);
  v.since("mfu", p.mfu);
}

template <typename V>
static void describe(V& v, FlopsSummary& f) {
  v("profiled_steps", f.profiled_steps);
  v("per_step", f.per_step);
  v("forward", f.forward);
  v("backward", f.backward);
  v("dominant_dtype", f.dominant_dtype);
  v("by_op", f.by_op);
  v("achieved", f.achieved);
  v.since("step_flops_per_s", f.step_flops_per_s);
  v.since("peak_flops_per_s", f.peak_flops_per_s);
  v("peak", f.peak);
  v.since("mfu", f.mfu);
  v.since("not_measured", f.not_measured);
}

template <typename V>
static void describe(V& v, EnergySummary& e) {
  v("source", e.source);
  v.since("epoch_j", e.epoch_j);
  v.since("per_step_j", e.per_step_j);
  v.since("per_sample_j", e.per_sample_j);
  v.since("average_w", e.average_w);
  v.since("not_measured", e.not_measured);
}

void fields(JsonWriter& v, FlopsSummary& f) { describe(v, f); }
void fields(JsonReader& v, FlopsSummary& f) { describe(v, f); }
void fields(JsonWriter& v, EnergySummary& e) { describe(v, e); }
void fields(JsonReader& v, EnergySummary& e) { describe(v, e); }

}  // namespace fathom::detail
