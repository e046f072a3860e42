// farmctl report --mail: a regression as the plain-text mail kernel
// developers read, in the form of the 0-day bot's reports: a subject naming
// the culprit and the change, the commit's subject, a before/after table per
// mode and primary metric with 95% intervals, the bisect log, the command
// that reproduces it, and Reported-by / Link trailers. The file is an RFC
// 5322 message that `git send-email` (or any MTA) sends as it is.
//
// Thread-safety: pure functions over sources already fetched, reentrant.
#ifndef CLI_REPORT_MAIL_H_
#define CLI_REPORT_MAIL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/report.h"

namespace farm::cli {

struct MailOptions {
  std::string from = "iommu-farm <iommu-farm@localhost>";
  std::vector<std::string> to, cc;
  // farm-analyzer's --report-url (the report server's base): the Link
  // trailer is <report_url>/regressions/ID. Empty: no Link trailer.
  std::string report_url;
  // RFC 5322 date of the message ("Sat, 05 Dec 2026 18:00:00 +0000").
  std::string date;
};

// The mail of sources.focus_regression (GatherReport with a regression);
// InvalidArgument when sources has no focus regression.
absl::StatusOr<std::string> FormatRegressionMail(const ReportSources& sources,
                                                 const MailOptions& options);

// The spec that measures the regression's one cell at its last good commit
// and its culprit (the first bad commit while no bisect named one), from
// the matrix's spec: `farmctl gate` reproduces the finding with it.
absl::StatusOr<std::string> ReproduceSpecYaml(const ReportSources& sources,
                                              const iommufarm::v1::Regression& regression);

}  // namespace farm::cli

#endif  // CLI_REPORT_MAIL_H_
