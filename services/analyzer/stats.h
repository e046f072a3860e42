// The analyzer's names for lib/stats (the two-sample statistics it shares
// with farmctl compare), as store.h names lib/storage's rows.
#ifndef SERVICES_ANALYZER_STATS_H_
#define SERVICES_ANALYZER_STATS_H_

#include "lib/stats/stats.h"

namespace farm::analyzer {

using stats::BenjaminiHochberg;
using stats::BenjaminiHochbergThreshold;
using stats::ContrastFromSummary;
using stats::DecideWithRepeats;
using stats::Interval;
using stats::JudgeMagnitude;
using stats::kFromZero;
using stats::MagnitudeCall;
using stats::MannWhitneyTest;
using stats::Mean;
using stats::RelativeChangeInterval;
using stats::SampleDecision;
using stats::SampleDecisionName;
using stats::TwoSampleResult;
using stats::Variance;
using stats::WelchFromSummary;
using stats::WelchTTest;

}  // namespace farm::analyzer

#endif  // SERVICES_ANALYZER_STATS_H_
