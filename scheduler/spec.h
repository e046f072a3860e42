// The scheduler's side of a matrix spec (the spec itself, its YAML and the
// checks that need no database are lib/spec's): commit resolution against a
// catalog, the job count, and expansion into jobs with their priorities and
// seeds.
//
// Contract:
//  - Pure functions, no I/O, thread-safe.
//  - ResolveCommits takes catalog ids or unique abbreviations of 7+ hex
//    digits; an ambiguous one is an error listing the candidates. Every
//    problem is reported at once, one per line naming the field
//    (lib/spec/field_errors.h).
//  - Expansion order is commits x modes x workloads x platforms x repeats
//    (commit outermost, so ids follow catalog order); every job gets a
//    deterministic seed (see JobSeed).
#ifndef SCHEDULER_SPEC_H_
#define SCHEDULER_SPEC_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "iommufarm/v1/farm.pb.h"
#include "lib/spec/matrix_spec.h"

namespace farm::scheduler {

namespace pb = ::iommufarm::v1;

// A commit of the catalog picked by the spec.
struct ResolvedCommit {
  std::string id;
  int index = 0;
  // The catalog's accumulated settings at this commit (every `set:` from the
  // first commit up to this one; in a catalog with parents, of its ancestors). Jobs carry them in
  // model_set so an agent can run commits of catalogs it has no file for.
  std::map<std::string, std::string> settings;
};

// Resolves the spec's commits against `catalog` (which must carry its
// commits): a range A..B gives every commit from A to B inclusive in catalog
// order; a list keeps the given order. Unknown or ambiguous ids are errors
// naming them; jobs carry the full id.
absl::StatusOr<std::vector<ResolvedCommit>> ResolveCommits(const spec::MatrixSpec& spec,
                                                           const pb::Catalog& catalog);

// Jobs that expansion would create; kResourceExhausted above the cap.
absl::StatusOr<int64_t> CountJobs(const spec::MatrixSpec& spec, size_t commits,
                                  const spec::SpecLimits& limits);

// Where expansion puts the spec's `set:`: in every job's model_set, or
// nowhere (the store keeps it once per matrix: storage::NewMatrix::model_set).
enum class SpecSet { kInEveryJob, kLeftOut };

// Full expansion (call CountJobs first to avoid building a huge vector).
// A job's model_set is the commit's settings with the spec's `set:` on top
// (kInEveryJob), or the commit's settings alone (kLeftOut).
std::vector<pb::Job> ExpandMatrix(const spec::MatrixSpec& spec,
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
uint64_t JobSeed(uint64_t spec_seed, const std::string& platform,
                 const spec::WorkloadSpec& workload, pb::IommuMode mode, int repeat);

}  // namespace farm::scheduler

#endif  // SCHEDULER_SPEC_H_
