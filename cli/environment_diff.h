// farm::cli environment diff: the IOMMU environments (HostFacts.
// iommu_environment, agent/kernels/iommu_environment.h) of the real runs of
// two sides of `farmctl compare`, diffed key by key, so that a change in
// firmware, IOMMU registers (a VT-d caching mode, an SMMUv3 feature) or a
// device's domain type shows beside the figures it may explain.
//
// Runs are grouped by platform, host and requested IOMMU mode: a device's
// domain type follows the mode (strict DMA, lazy DMA-FQ, passthrough
// identity), so only like runs are compared. A group is compared only when
// both sides have runs in it with an environment; emulator runs (whose
// figures do not depend on the agent's host) and results recorded without
// one are left out.
//
// EnvironmentSummary is the one-cell form `farmctl agents` and `farmctl
// results` show of one environment.
//
// Pure functions over results already fetched; thread-safe.
#ifndef CLI_ENVIRONMENT_DIFF_H_
#define CLI_ENVIRONMENT_DIFF_H_

#include <string>
#include <vector>

#include "cli/report.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::cli {

// One fact that differs between the sides in one group.
struct EnvironmentRow {
  std::string platform, host, mode;
  std::string key;  // "unit/dmar0/caching_mode"
  // The side's values for the key, " | "-joined when its runs disagree;
  // "(absent)" when none of its runs has the key.
  std::string a, b;
};

struct EnvironmentDiff {
  int groups = 0;                    // groups with environments on both sides
  std::vector<EnvironmentRow> rows;  // by group, then key
};

EnvironmentDiff CompareEnvironments(const std::vector<iommufarm::v1::Result>& a,
                                    const std::vector<iommufarm::v1::Result>& b);

// The diff as text, CSV (platform,host,mode,key,a,b), a report table (the
// --html page) and JSON rows. The text is empty when no group was compared.
std::string FormatEnvironmentDiffTable(const EnvironmentDiff& diff);
std::string FormatEnvironmentDiffCsv(const EnvironmentDiff& diff);
ReportTable EnvironmentDiffTable(const EnvironmentDiff& diff);

// The series key's share of a digest (its first 12 hex digits, as
// lib/storage/analyzer_rows.h puts it in "iommu-env=..."); "-" when empty.
std::string ShortDigest(const std::string& digest);

// One line of what decides an environment's costs, for a table cell:
// "2 VT-d units (caching mode 1); ATS on 1/3 devices; domains DMA-FQ x3;
// firmware SeaBIOS 1.16.2 2014-04-01; ACPI DMAR; 1 unavailable". Units are
// counted per kind (VT-d: an ecap; SMMUv3: an oas; AMD-Vi: the rest) with
// their distinct caching modes or SMMUv3 features. "-" for an environment
// without facts (a result recorded without one).
std::string EnvironmentSummary(const iommufarm::v1::IommuEnvironment& env);

}  // namespace farm::cli

#endif  // CLI_ENVIRONMENT_DIFF_H_
