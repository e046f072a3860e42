// The repository contract suite: one set of GoogleTest cases that every
// implementation of the repository interfaces (lib/storage/repositories.h)
// must pass, so the in-memory repositories
// (lib/storage/memory/memory_store.h) used by hermetic tests behave like the
// PostgreSQL ones in production: fencing by (job, attempt, token), the same
// status codes, retry backoff, max attempts, claim order, the eligibility
// hook, catalogs, matrices, results and analysis reads; and the analyzer's
// store (lib/storage/analyzer_store.h) over what they wrote.
//
// The cases live in repository_contract.cc, build_jobs_contract.cc and
// (suite AnalyzerStoreContractTest, so they can be run by name)
// analyzer_store_contract.cc; a test binary links those files and
// instantiates both suites with its backends:
//   INSTANTIATE_TEST_SUITE_P(Memory, RepositoryContractTest,
//                            ::testing::Values(ContractParam{"memory", MakeMine}),
//                            ContractParamName);
//
// Thread-safety: a backend is used by one test at a time; its repositories
// are thread-safe (a case drives them from several threads).
#ifndef LIB_STORAGE_CONTRACT_REPOSITORY_CONTRACT_H_
#define LIB_STORAGE_CONTRACT_REPOSITORY_CONTRACT_H_

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lib/storage/analyzer_store.h"
#include "lib/storage/repositories.h"

namespace farm::storage {

// One fresh, empty database with its repositories, plus the few things a
// test does behind their backs (SQL for PostgreSQL, MemoryDatabase::Write
// in memory).
class ContractBackend {
 public:
  virtual ~ContractBackend() = default;
  virtual CatalogStore& catalogs() = 0;
  virtual MatrixStore& matrices() = 0;
  virtual JobQueue& queue() = 0;
  virtual AnalysisStore& analysis() = 0;
  // The analyzer's store over the same database.
  virtual AnalyzerStore& analyzer() = 0;

  // Every current lease has expired and every queued job is past its
  // backoff (no sleeping in tests).
  virtual void ExpireAllLeases() = 0;
  virtual pb::JobState StateOf(int64_t job_id) = 0;
  virtual std::string FailureReason(int64_t job_id) = 0;
  // The analyzer's writes. A regression is stored with the given id and
  // fields (detected_at = now; an empty metric_rank takes the column
  // default "primary"); a bisect with its steps, its regression must exist.
  virtual void PutRegression(const pb::Regression& g) = 0;
  virtual void PutBisect(const pb::Bisect& b) = 0;
};

struct ContractParam {
  std::string name;  // test name suffix: letters, digits, underscores
  // A new backend over a new empty database; nullptr after reporting a
  // test failure when it cannot be built.
  std::function<std::unique_ptr<ContractBackend>()> make;
};

// gtest prints a parameter of a failed case with this.
inline void PrintTo(const ContractParam& p, std::ostream* os) { *os << p.name; }

inline std::string ContractParamName(const ::testing::TestParamInfo<ContractParam>& info) {
  return info.param.name;
}

class RepositoryContractTest : public ::testing::TestWithParam<ContractParam> {
 protected:
  void SetUp() override;

  CatalogStore& catalogs() { return backend_->catalogs(); }
  MatrixStore& matrices() { return backend_->matrices(); }
  JobQueue& queue() { return backend_->queue(); }
  AnalysisStore& analysis() { return backend_->analysis(); }
  ContractBackend& backend() { return *backend_; }

  // A matrix of `n` jobs of `executor`, priority `prio`, kind `kind`.
  int64_t MakeMatrix(int n, int max_attempts = 3, int prio = 0,
                     pb::Executor executor = pb::EXECUTOR_EMULATOR,
                     pb::JobKind kind = pb::JOB_KIND_BULK);
  pb::RegisterResponse Register(const std::string& name, const std::string& cap = "emulator");
  std::vector<pb::JobLease> Lease(const pb::RegisterResponse& a, int n,
                                  absl::Duration ttl = absl::Seconds(30));
  absl::StatusOr<ReportOutcome> Report(const pb::RegisterResponse& a, const pb::LeaseRef& l,
                                       double value = 1.0);
  absl::StatusOr<int> Release(const pb::RegisterResponse& a, const pb::LeaseRef& l);
  // A heartbeat asking to hold `l` through a reboot for 60 s (the store
  // caps it at 5 min).
  absl::StatusOr<pb::HeartbeatResponse> HoldThroughReboot(const pb::RegisterResponse& a,
                                                          const pb::LeaseRef& l);
  absl::StatusOr<pb::JobState> Fail(const pb::RegisterResponse& a, const pb::LeaseRef& l,
                                    const std::string& reason, bool retryable);

  std::unique_ptr<ContractBackend> backend_;
  RetryPolicy retry_{absl::Milliseconds(1), absl::Milliseconds(10)};
};

// The analyzer store's cases: the repositories above write what the
// analyzer reads (matrices, results, catalogs, agents), the analyzer store
// writes its rows, and AnalysisStore reads them back as the scheduler does.
class AnalyzerStoreContractTest : public RepositoryContractTest {
 protected:
  AnalyzerStore& analyzer() { return backend_->analyzer(); }

  // Reports `samples` as the result of lease `l`.
  absl::StatusOr<ReportOutcome> ReportSamples(const pb::RegisterResponse& a, const pb::LeaseRef& l,
                                              const std::vector<pb::Sample>& samples);
  // Catalog "c" (c0..c9, "subject <i>"), a bulk matrix of two jobs run to
  // success, and `found` recorded from it; the matrix id, and the created
  // bisects in `bisects`.
  int64_t AnalysedMatrix(const std::vector<NewRegression>& found, std::vector<int64_t>* bisects);
};

}  // namespace farm::storage

#endif  // LIB_STORAGE_CONTRACT_REPOSITORY_CONTRACT_H_
