// Mode-change findings: a commit whose runs report another effective IOMMU
// mode than the commit measured before it, for the same requested mode and
// cell (platform, workload and params, timing). Upstream such a commit
// (a250c23f15c2, v5.13: AMD-Vi's boot-time default domains strict where
// they had been lazy) showed only as a throughput loss until a user bisected
// it by hand; here it is a finding of its own, named by the modes.
//
// The effective mode is categorical: every run states it exactly (the store's
// storage::kEffectiveModeMetric sample, from the run's HostFacts.iommu_mode),
// so no statistics are involved: a commit's mode is the most common one among
// its runs (ties: the lower IommuMode number), and a change is any
// difference between two consecutive measured commits of a series.
//
// Pure functions over plain rows; thread-safe.
#ifndef SERVICES_ANALYZER_MODE_CHANGE_H_
#define SERVICES_ANALYZER_MODE_CHANGE_H_

#include <span>
#include <string>
#include <vector>

#include "services/analyzer/detect.h"
#include "services/analyzer/series.h"

namespace farm::analyzer {

// The most common value (ties: the lowest); 0 for none.
double ModalValue(std::span<const double> values);

// "lazy" for an IommuMode number (a sample's value), "mode N" otherwise.
std::string EffectiveModeName(double value);

// Every change of effective mode in `samples` (only their
// storage::kEffectiveModeMetric rows are read), as findings of class
// kModeChanged: metric kEffectiveModeMetric, mode the requested one, one
// per_mode entry with the effective modes' numbers before and after, a
// regression of a primary metric (it alerts and is bisected like one), p 0,
// magnitude 0. In catalog commit order per series.
std::vector<Finding> DetectModeChanges(const std::vector<SampleRow>& samples);

}  // namespace farm::analyzer

#endif  // SERVICES_ANALYZER_MODE_CHANGE_H_
