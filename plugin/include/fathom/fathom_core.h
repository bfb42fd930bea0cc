#pragma once
// fathom's torch-free model in one include: options and errors, the records and the trace files
// that hold them, the report and its parts, its writers and readers. Each analysis that runs on
// the model has its own header, implemented by its stage: replay.h, report_diff.h,
// activation_planner.h, checkpoint_planner.h, amp_policy.h, loss_trend.h, device_telemetry.h,
// job_merge.h. The LibTorch user's header, <fathom/fathom.h>, includes this one and all of them.
#include <fathom/achievement.h>
#include <fathom/activation_plan.h>
#include <fathom/checkpoint_plan.h>
#include <fathom/comm_stats.h>
#include <fathom/error.h>
#include <fathom/gpu_analysis.h>
#include <fathom/gpu_records.h>
#include <fathom/gpu_summary.h>
#include <fathom/hardware_fit.h>
#include <fathom/job_report.h>
#include <fathom/memory_budget.h>
#include <fathom/mixed_precision.h>
#include <fathom/module_report.h>
#include <fathom/options.h>
#include <fathom/phase.h>
#include <fathom/rank_info.h>
#include <fathom/rank_summary.h>
#include <fathom/records.h>
#include <fathom/report.h>
#include <fathom/report_writers.h>
#include <fathom/run_main.h>
#include <fathom/step_series.h>
#include <fathom/telemetry.h>
#include <fathom/trace_files.h>
#include <fathom/unmeasured.h>
#include <fathom/version.h>
