#pragma once
// fathom's torch-free public API in one include: options and errors, the records, the report
// model and its writers, reading and diffing reports, replaying captured activity. The LibTorch
// user's header is <fathom/fathom.h>, which includes this one.
#include <fathom/amp_policy.h>
#include <fathom/checkpoint_planner.h>
#include <fathom/device_telemetry.h>
#include <fathom/error.h>
#include <fathom/gpu_analysis.h>
#include <fathom/gpu_records.h>
#include <fathom/gpu_summary.h>
#include <fathom/hardware_fit.h>
#include <fathom/job_report.h>
#include <fathom/loss_trend.h>
#include <fathom/memory_budget.h>
#include <fathom/mixed_precision.h>
#include <fathom/module_report.h>
#include <fathom/options.h>
#include <fathom/phase.h>
#include <fathom/rank_info.h>
#include <fathom/rank_summary.h>
#include <fathom/records.h>
#include <fathom/replay.h>
#include <fathom/report.h>
#include <fathom/report_diff.h>
#include <fathom/report_writers.h>
#include <fathom/run_main.h>
#include <fathom/unmeasured.h>
#include <fathom/version.h>
