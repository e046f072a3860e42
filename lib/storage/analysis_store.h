// AnalysisStore: the analyzer's regressions and bisects, read and triaged
// through the scheduler (the analyzer writes them: services/analyzer).
//
// The conventions of every repository interface (thread-safety, error
// codes, the database's clock) are stated once, in repositories.h.
#ifndef LIB_STORAGE_ANALYSIS_STORE_H_
#define LIB_STORAGE_ANALYSIS_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::storage {

namespace pb = ::iommufarm::v1;

// The id a ListRegressions page starts after: req.page_token as a decimal
// id; 0 (from the first) when it is empty or not one.
inline int64_t RegressionPageAfter(const pb::ListRegressionsRequest& req) {
  int64_t after = 0;
  if (!absl::SimpleAtoi(req.page_token(), &after) || after < 0) return 0;
  return after;
}

class AnalysisStore {
 public:
  virtual ~AnalysisStore() = default;
  // In id order, filtered as the request says. Paging: only ids above the
  // decimal id in req.page_token (empty: from the first), and at most
  // req.page_size of them (0: no bound). The service checks the token.
  virtual absl::StatusOr<std::vector<pb::Regression>> ListRegressions(
      const pb::ListRegressionsRequest& req) = 0;
  virtual absl::StatusOr<pb::Regression> GetRegression(int64_t id) = 0;
  // By bisect id, or by regression id (its latest bisect) when bisect_id == 0.
  virtual absl::StatusOr<pb::Bisect> GetBisect(int64_t bisect_id, int64_t regression_id) = 0;
  virtual absl::StatusOr<pb::Regression> UpdateRegression(int64_t id, pb::RegressionState state,
                                                          const std::string& note) = 0;
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_ANALYSIS_STORE_H_
