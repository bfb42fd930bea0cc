#pragma once
// Everything in fathom's torch-free core.
#include <fathom/advisor.h>
#include <fathom/atomic_file.h>
#include <fathom/clock.h>
#include <fathom/epoch_accumulator.h>
#include <fathom/host_info.h>
#include <fathom/error.h>
#include <fathom/file_system.h>
#include <fathom/nvtx.h>
#include <fathom/options.h>
#include <fathom/phase.h>
#include <fathom/process_memory.h>
#include <fathom/records.h>
#include <fathom/report.h>
#include <fathom/report_writers.h>
#include <fathom/thresholds.h>
#include <fathom/version.h>
