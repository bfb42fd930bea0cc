#pragma once
// The cross-rank rules: what merge_rank_summaries (job_merge.h) finds in a merged epoch.
#include <fathom/job_report.h>

#include <string>
#include <vector>

namespace fathom {

// The cross-rank findings of a merged epoch (merge_rank_summaries calls it).
std::vector<Finding> find_cross_rank_issues(const JobEpoch& e);
// "median per step of step time less communication wait": what ranks were compared on.
std::string work_basis(const JobEpoch& e);

}  // namespace fathom
