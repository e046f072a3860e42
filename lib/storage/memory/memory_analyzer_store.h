// MemoryAnalyzerStore: AnalyzerStore over a MemoryDatabase, with the
// semantics of the PostgreSQL one (lib/storage/pg/pg_analyzer_store.cc), for
// hermetic tests of the analyzer. It reads what the memory repositories wrote
// (matrices, jobs, results, catalogs, agents) and writes the analyzer's rows
// (regressions, bisects, alerts, analyzer_state), which MemoryAnalysisStore
// then reads back as the scheduler does.
//
// JSON values are kept as given (PostgreSQL normalises its jsonb); one that
// is not JSON fails the call as the cast would. bisect_steps.matrix_id is
// not kept: nothing reads it back.
//
// Contract: thread-safe (each call is one MemoryDatabase transaction); does
// not own the database, which must outlive it.
#ifndef LIB_STORAGE_MEMORY_MEMORY_ANALYZER_STORE_H_
#define LIB_STORAGE_MEMORY_MEMORY_ANALYZER_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "lib/storage/analyzer_store.h"
#include "lib/storage/memory/memory_database.h"

namespace farm::storage {

class MemoryAnalyzerStore final : public AnalyzerStore {
 public:
  explicit MemoryAnalyzerStore(MemoryDatabase* db) : db_(db) {}
  MemoryAnalyzerStore(const MemoryAnalyzerStore&) = delete;
  MemoryAnalyzerStore& operator=(const MemoryAnalyzerStore&) = delete;

  absl::StatusOr<std::vector<MatrixInfo>> MatricesToAnalyze() override;
  absl::StatusOr<std::vector<MatrixInfo>> LatestAnalysedMatrices() override;
  absl::StatusOr<std::vector<SampleRow>> Samples(const std::vector<int64_t>& matrices) override;
  absl::StatusOr<std::vector<SampleRow>> HistorySamples(const std::string& catalog,
                                                        pb::Executor executor,
                                                        const std::vector<HistoryCell>& cells,
                                                        int64_t except_matrix,
                                                        int max_matrices) override;
  absl::StatusOr<bool> MatricesTerminal(const std::vector<int64_t>& matrices) override;
  absl::StatusOr<std::vector<std::string>> FailureReasons(
      const std::vector<int64_t>& matrices) override;
  absl::StatusOr<std::vector<CommitRow>> Commits(const std::string& catalog, int lo,
                                                 int hi) override;
  absl::StatusOr<SeriesSpec> Cell(int64_t matrix_id, const std::string& platform,
                                  const std::string& workload, const std::string& params) override;
  absl::StatusOr<std::vector<int64_t>> RecordAnalysis(
      int64_t matrix_id, const std::string& catalog, const std::vector<NewRegression>& found,
      const std::vector<std::string>& skipped_series) override;
  absl::Status RecordAnalysisFailure(int64_t matrix_id, const std::string& reason) override;
  absl::StatusOr<std::vector<ActiveBisect>> ActiveBisects() override;
  absl::Status SaveBisect(const BisectUpdate& update) override;
  absl::StatusOr<std::vector<AlertWork>> AlertCandidates(absl::Duration resolved_window) override;
  absl::Status SetSilence(int64_t regression_id, const std::string& silence_id) override;
  absl::Status MarkAlertSent(int64_t regression_id, bool firing, const std::string& labels_json,
                             const std::string& annotations_json) override;
  absl::StatusOr<OpenCounts> CountOpenRegressions() override;
  absl::StatusOr<std::vector<FixCheckWork>> FixChecks() override;
  absl::StatusOr<CommitRow> LatestCommit(const std::string& catalog) override;
  absl::StatusOr<std::vector<iommufarm::v1::KernelOffer>> LiveOffers(
      iommufarm::v1::Executor executor, absl::Duration live) override;
  absl::StatusOr<std::vector<std::vector<iommufarm::v1::Capability>>> AgentCapabilities() override;
  absl::Status SaveFixCheck(int64_t regression_id, const std::string& fix_check,
                            const std::string& commit, double change, const std::string& state_json,
                            const std::string& reopen_note) override;
  absl::StatusOr<std::vector<RegressionGroup>> OpenGroups(const std::string& catalog,
                                                          absl::Duration window) override;
  absl::StatusOr<RegressionGroup> GroupOf(int64_t regression_id) override;
  absl::Status SaveGroup(int64_t group_id, int64_t leader_id, const std::string& state,
                         const std::string& culprit_id) override;
  absl::StatusOr<int64_t> SplitFromGroup(int64_t regression_id) override;

 private:
  MemoryDatabase* const db_;  // not owned
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_MEMORY_MEMORY_ANALYZER_STORE_H_
