// Matrix specs: parsing + validation of the YAML a user submits (see
// docs/scheduler.md "Matrix specs"), commit resolution against a catalog, and
// expansion into jobs.
//
// Contract:
//  - Pure functions, no I/O, thread-safe.
//  - ParseMatrixSpec reports every problem it finds at once, one per line of
//    the kInvalidArgument message, each naming the field path and the
//    problem, e.g. `modes[1]: unknown mode "stict" (expected off,
//    passthrough, strict, lazy)`. Size caps give kResourceExhausted.
//  - ParseMatrixSpec also checks the spec against the tables its jobs will
//    meet (docs/scheduler.md): emulator workload params against the
//    workload's parameter table, `set:` keys against the model registry,
//    fio / iozone params by the agent's validator (lib/toolspec).
//  - ResolveCommits takes catalog ids or unique abbreviations of 7+ hex
//    digits; an ambiguous one is an error listing the candidates.
//  - Expansion order is commits x modes x workloads x platforms x repeats
//    (commit outermost, so ids follow catalog order); every job gets a
//    deterministic seed (see JobSeed).
#ifndef SCHEDULER_SPEC_H_
#define SCHEDULER_SPEC_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "iommufarm/v1/farm.pb.h"
#include "proto/names.h"

namespace farm::scheduler {

namespace pb = ::iommufarm::v1;

struct SpecLimits {
  int64_t max_jobs_per_matrix = 100000;
  size_t max_spec_bytes = 1 << 20;
};

struct WorkloadSpec {
  std::string name;
  std::map<std::string, std::string> params;  // lists comma-joined
};

// `analysis.confirm`: the confirmation step of the emulator's findings run
// as real jobs (docs/analyzer.md "Confirmation on real kernels").
struct ConfirmSpec {
  bool enabled = false;
  pb::Executor executor = pb::EXECUTOR_UNSPECIFIED;  // fio or iozone
  WorkloadSpec workload;
  std::string catalog;   // "": the matrix's
  std::string platform;  // "": the finding's
  int repeats = 3;       // per commit
  int max_repeats = 3;   // doubling cap of a suggestive result
  std::string metric;    // "metric/phase", e.g. "iops/read"
};

struct MatrixSpec {
  std::string name;
  std::string catalog;
  std::vector<std::string> platforms;
  // Either a range (inclusive, catalog order) or an explicit list.
  bool commit_range = false;
  std::string range_from, range_to;
  std::vector<std::string> commit_ids;
  std::vector<pb::IommuMode> modes;
  std::vector<WorkloadSpec> workloads;
  int repeats = 1;
  pb::Executor executor = pb::EXECUTOR_EMULATOR;
  bool bisect = false;
  ConfirmSpec confirm;
  // Extension: "kind: bulk|confirm|bisect" (default bulk). The analyzer
  // submits confirm and bisect matrices; kind sets the priority band.
  pb::JobKind kind = pb::JOB_KIND_BULK;
  int priority = 0;  // within the kind's band, -999..999
  uint64_t seed = 0;
  std::map<std::string, std::string> model_set;  // "set:" keys
  std::vector<std::string> warnings;
};

// A commit of the catalog picked by the spec.
struct ResolvedCommit {
  std::string id;
  int index = 0;
  // The catalog's accumulated settings at this commit (every `set:` from the
  // first commit up to this one). Jobs carry them in model_set so an agent
  // can run commits of catalogs it has no file for.
  std::map<std::string, std::string> settings;
};

// The YAML spec: mapped onto pb::MatrixSpec (MatrixSpecFromYaml) and checked
// as CheckMatrixSpec checks a typed one, every problem of both in one error.
absl::StatusOr<MatrixSpec> ParseMatrixSpec(std::string_view yaml, const SpecLimits& limits);

// The YAML spec mapped onto the typed message, key by key (the field names
// are the YAML keys). Fails only on what cannot be mapped: YAML syntax and
// kinds, unknown keys, unknown mode / executor / kind names.
absl::StatusOr<pb::MatrixSpec> MatrixSpecFromYaml(std::string_view yaml, const SpecLimits& limits);

// Submit-time checks of a typed spec: required fields, ranges, duplicates,
// then the tables its jobs will meet (see the contract above). Errors name
// the field path as ParseMatrixSpec does; a message larger than
// max_spec_bytes is kResourceExhausted.
absl::StatusOr<MatrixSpec> CheckMatrixSpec(const pb::MatrixSpec& spec, const SpecLimits& limits);

// YAML text that MatrixSpecFromYaml maps back onto `spec` (keys sorted):
// the matrix's spec_yaml when it was submitted typed.
std::string MatrixSpecToYaml(const pb::MatrixSpec& spec);

// Resolves the spec's commits against `catalog` (which must carry its
// commits): a range A..B gives every commit from A to B inclusive in catalog
// order; a list keeps the given order. Unknown or ambiguous ids are errors
// naming them; jobs carry the full id.
absl::StatusOr<std::vector<ResolvedCommit>> ResolveCommits(const MatrixSpec& spec,
                                                           const pb::Catalog& catalog);

// Jobs that expansion would create; kResourceExhausted above the cap.
absl::StatusOr<int64_t> CountJobs(const MatrixSpec& spec, size_t commits, const SpecLimits& limits);

// Where expansion puts the spec's `set:`: in every job's model_set, or
// nowhere (the store keeps it once per matrix: storage::NewMatrix::model_set).
enum class SpecSet { kInEveryJob, kLeftOut };

// Full expansion (call CountJobs first to avoid building a huge vector).
// A job's model_set is the commit's settings with the spec's `set:` on top
// (kInEveryJob), or the commit's settings alone (kLeftOut).
std::vector<pb::Job> ExpandMatrix(const MatrixSpec& spec,
                                  const std::vector<ResolvedCommit>& commits, int max_attempts,
                                  SpecSet set = SpecSet::kInEveryJob);

// Priority of a job of `kind` with the spec's `priority`: bisect work always
// ahead of confirm runs, ahead of bulk.
int JobPriority(pb::JobKind kind, int priority);

// Deterministic seed: a hash of the spec seed, platform, workload (name and
// params), mode and repeat. The commit is deliberately left out: every
// commit of a series runs with the same random stream per repeat (common
// random numbers), so differences along the commit axis come from the
// kernel model, not from seeds.
uint64_t JobSeed(uint64_t spec_seed, const std::string& platform, const WorkloadSpec& workload,
                 pb::IommuMode mode, int repeat);

// "off" <-> IOMMU_MODE_OFF etc. Unknown -> IOMMU_MODE_UNSPECIFIED.
using ::farm::proto::ExecutorFromName;
using ::farm::proto::ExecutorName;
using ::farm::proto::ModeFromName;
using ::farm::proto::ModeName;

}  // namespace farm::scheduler

#endif  // SCHEDULER_SPEC_H_
