#include "scheduler/spec.h"

#include <algorithm>
#include <random>
#include <tuple>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/spec/field_errors.h"
#include "proto/catalog_dag.h"
#include "proto/kernel_config.h"
#include "proto/kernel_offers.h"
#include "proto/names.h"
#include "proto/try_commit.h"

namespace farm::scheduler {
namespace {

using spec::FieldErrors;
using spec::MatrixSpec;
using spec::Quoted;
using spec::WorkloadSpec;

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t Fnv1a(std::string_view s, uint64_t h = 0xcbf29ce484222325ULL) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace

int JobPriority(pb::JobKind kind, int priority) {
  int band = 0;
  if (kind == pb::JOB_KIND_CONFIRM) band = 2000;
  if (kind == pb::JOB_KIND_BISECT) band = 4000;
  // A build unblocks every job waiting for its kernel.
  if (kind == pb::JOB_KIND_BUILD) band = 6000;
  return band + priority;
}

uint64_t JobSeed(uint64_t spec_seed, const std::string& platform, const WorkloadSpec& workload,
                 pb::IommuMode mode, int repeat) {
  uint64_t h = Fnv1a(platform);
  h = Fnv1a("\x1f" + workload.name, h);
  for (const auto& [k, v] : workload.params) h = Fnv1a("\x1f" + k + "=" + v, h);
  h = SplitMix64(h ^ SplitMix64(spec_seed));
  h = SplitMix64(h ^ static_cast<uint64_t>(mode));
  return SplitMix64(h ^ static_cast<uint64_t>(repeat));
}

namespace {

// A commit id as written in a spec: the catalog's id, or an abbreviation of
// at least kMinAbbrev hex digits that is the prefix of exactly one id.
// NotFound carries only a hint for the caller's "unknown" message (maybe
// empty); an ambiguous abbreviation is InvalidArgument listing the ids.
constexpr size_t kMinAbbrev = 7;

absl::StatusOr<std::map<std::string, int>::const_iterator> FindCommit(
    const std::map<std::string, int>& index, const std::string& id, const std::string& catalog) {
  auto exact = index.find(id);
  if (exact != index.end()) return exact;
  const bool hex = !id.empty() && std::all_of(id.begin(), id.end(), [](char c) {
    return absl::ascii_isxdigit(static_cast<unsigned char>(c));
  });
  if (!hex) return absl::NotFoundError("");
  if (id.size() < kMinAbbrev) {
    return absl::NotFoundError(
        absl::StrCat(" (abbreviations need at least ", kMinAbbrev, " hex digits)"));
  }
  const std::string prefix = absl::AsciiStrToLower(id);
  // A few candidates name the ambiguity; listing every one would make each
  // of a long list's entries cost the whole catalog.
  constexpr size_t kShown = 5;
  std::vector<std::string> matches;
  auto first = index.lower_bound(prefix);
  bool more = false;
  for (auto it = first; it != index.end() && it->first.compare(0, prefix.size(), prefix) == 0;
       ++it) {
    if (matches.size() == kShown) {
      more = true;
      break;
    }
    matches.push_back(it->first);
  }
  if (matches.empty()) return absl::NotFoundError("");
  if (matches.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ambiguous commit ", Quoted(id), " in catalog ", Quoted(catalog),
                     ": candidates ", absl::StrJoin(matches, ", "), more ? ", ..." : ""));
  }
  return first;
}

}  // namespace

absl::StatusOr<std::vector<ResolvedCommit>> ResolveCommits(const MatrixSpec& spec,
                                                           const pb::Catalog& catalog) {
  std::map<std::string, int> index;
  for (const pb::CatalogCommit& c : catalog.commits()) index.emplace(c.id(), c.index());
  // The accumulated settings of the picked commits only, in one pass over
  // the catalog: a copy per catalog commit would be quadratic in a catalog
  // whose commits each set a key of their own.
  const std::vector<std::vector<int>> parents = proto::ParentPositions(catalog);
  const auto with_settings =
      [&](std::vector<ResolvedCommit> picked) -> std::vector<ResolvedCommit> {
    if (!proto::IsLinear(parents)) {
      // A history graph: each picked commit from its own ancestors.
      for (ResolvedCommit& p : picked) p.settings = proto::SettingsAt(catalog, parents, p.index);
      return picked;
    }
    std::map<int, std::vector<size_t>> at;
    for (size_t i = 0; i < picked.size(); ++i) at[picked[i].index].push_back(i);
    std::map<std::string, std::string> state;
    for (const pb::CatalogCommit& c : catalog.commits()) {
      if (at.empty()) break;
      for (const auto& [k, v] : c.set()) state[k] = v;
      auto it = at.find(c.index());
      if (it == at.end()) continue;
      for (size_t i : it->second) picked[i].settings = state;
      at.erase(it);
    }
    return picked;
  };
  std::vector<ResolvedCommit> out;
  if (spec.commit_range) {
    FieldErrors e;
    auto from = FindCommit(index, spec.range_from, catalog.name());
    auto to = FindCommit(index, spec.range_to, catalog.name());
    for (const auto& [what, id, found] : {std::tuple("range start ", &spec.range_from, &from),
                                          std::tuple("range end ", &spec.range_to, &to)}) {
      if (absl::IsNotFound(found->status())) {
        e.Add("commits", absl::StrCat(what, Quoted(*id), " is not in catalog ",
                                      Quoted(catalog.name()), found->status().message()));
      } else if (!found->ok()) {
        e.Add("commits", absl::StrCat(what, found->status().message()));
      }
    }
    if (!e.empty()) return e.ToStatus();
    if ((*from)->second > (*to)->second) {
      return absl::InvalidArgumentError(
          absl::StrCat("commits: range ", spec.range_from, "..", spec.range_to,
                       " is backwards: ", Quoted((*from)->first), " comes after ",
                       Quoted((*to)->first), " in catalog ", Quoted(catalog.name())));
    }
    for (const pb::CatalogCommit& c : catalog.commits()) {
      if (c.index() >= (*from)->second && c.index() <= (*to)->second) {
        out.push_back({c.id(), c.index(), {}});
      }
    }
    return with_settings(std::move(out));
  }
  // Two entries naming one commit (an id and its abbreviation) are refused
  // as the same commit twice. Every entry costs a look-up and a few
  // candidates at most, and once the error is full its lines are only
  // counted: a long list of repeats costs time linear in its length.
  FieldErrors e;
  std::unordered_map<std::string, size_t> first_entry_of;  // full id -> list index
  for (size_t i = 0; i < spec.commit_ids.size(); ++i) {
    const std::string path = absl::StrCat("commits[", i, "]");
    auto it = FindCommit(index, spec.commit_ids[i], catalog.name());
    if (!it.ok()) {
      if (e.full()) {
        e.Add(path, "");
      } else if (absl::IsNotFound(it.status())) {
        e.Add(path, absl::StrCat("unknown commit ", Quoted(spec.commit_ids[i]), " in catalog ",
                                 Quoted(catalog.name()), it.status().message()));
      } else {
        e.Add(path, std::string(it.status().message()));
      }
      continue;
    }
    auto [seen, fresh] = first_entry_of.emplace((*it)->first, i);
    if (!fresh) {
      e.Add(path, e.full() ? ""
                           : absl::StrCat("the same commit ", Quoted((*it)->first), " as commits[",
                                          seen->second, "]"));
      continue;
    }
    out.push_back({(*it)->first, (*it)->second, {}});
  }
  if (!e.empty()) return e.ToStatus();
  // A try job measures its base and, at the base's place, the base + patch.
  if (!spec.patch.empty() && out.size() == 1) {
    out.push_back({proto::TryCommitId(out[0].id, spec.patch), out[0].index, {}});
  }
  return with_settings(std::move(out));
}

absl::StatusOr<int64_t> CountJobs(const MatrixSpec& spec, size_t commits,
                                  const spec::SpecLimits& limits) {
  // Saturating product: a huge spec must not overflow into a small number.
  const std::vector<uint64_t> factors = {commits, spec.modes.size(), spec.workloads.size(),
                                         spec.platforms.size(),
                                         static_cast<uint64_t>(spec.repeats)};
  uint64_t n = 1;
  const uint64_t cap = static_cast<uint64_t>(limits.max_jobs_per_matrix);
  for (uint64_t f : factors) {
    if (f != 0 && n > (cap + 1) / f + 1) {
      n = cap + 1;
    } else {
      n *= f;
    }
  }
  if (n > cap) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "matrix: ", commits, " commits x ", spec.modes.size(), " modes x ", spec.workloads.size(),
        " workloads x ", spec.platforms.size(), " platforms x ", spec.repeats,
        " repeats is more than the limit of ", cap, " jobs (--max-jobs-per-matrix)"));
  }
  return static_cast<int64_t>(n);
}

namespace {

// The order a real matrix's commits run in, round (repeat) `round`: a
// Fisher-Yates shuffle seeded by the spec's seed and the round, so each
// round visits every commit once in its own order and a drift of the host
// (thermal, a neighbour's load) lands on every commit alike.
// round < 0: catalog order.
std::vector<size_t> RoundOrder(size_t commits, uint64_t seed, int round) {
  std::vector<size_t> order(commits);
  for (size_t i = 0; i < commits; ++i) order[i] = i;
  if (round < 0) return order;
  std::mt19937_64 rng(seed ^ (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(round + 1)));
  for (size_t i = commits; i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  return order;
}

}  // namespace

std::vector<pb::Job> ExpandMatrix(const MatrixSpec& spec,
                                  const std::vector<ResolvedCommit>& commits, int max_attempts,
                                  SpecSet set) {
  std::vector<pb::Job> jobs;
  jobs.reserve(commits.size() * spec.modes.size() * spec.workloads.size() * spec.platforms.size() *
               static_cast<size_t>(spec.repeats));
  const int priority = JobPriority(spec.kind, spec.priority);
  auto add = [&](const ResolvedCommit& c, pb::IommuMode mode, const WorkloadSpec& w,
                 const std::string& platform, int r) {
    pb::Job& j = jobs.emplace_back();
    j.set_catalog(spec.catalog);
    j.set_commit_id(c.id);
    j.set_commit_index(c.index);
    j.set_platform(platform);
    j.mutable_workload()->set_name(w.name);
    for (const auto& [k, v] : w.params) (*j.mutable_workload()->mutable_params())[k] = v;
    // The config is the kernel's, but its results are another series.
    if (!spec.kernel_config_id.empty()) {
      (*j.mutable_workload()->mutable_params())[proto::kKernelConfigParam] = spec.kernel_config_id;
    }
    // So is the accelerator: an instruction-timed run is not a timed one.
    if (!spec.accel.empty())
      (*j.mutable_workload()->mutable_params())[proto::kAccelParam] = spec.accel;
    j.set_mode(mode);
    j.set_repeat(r);
    j.set_executor(spec.executor);
    j.set_priority(priority);
    j.set_kind(spec.kind);
    j.set_state(pb::JOB_STATE_QUEUED);
    j.set_max_attempts(max_attempts);
    for (const auto& [k, v] : c.settings) (*j.mutable_model_set())[k] = v;
    if (set == SpecSet::kInEveryJob) {
      for (const auto& [k, v] : spec.model_set) (*j.mutable_model_set())[k] = v;
    }
    j.set_seed(JobSeed(spec.seed, platform, w, mode, r));
    j.mutable_labels()->insert(spec.labels.begin(), spec.labels.end());
  };
  // Jobs are claimed in the order they are stored. Real runs go round by
  // round (repeat r of every commit, in RoundOrder, before repeat r+1); the
  // emulator's figures do not drift, so its repeats stay together.
  const bool real = ::farm::proto::IsRealExecutor(spec.executor);
  for (int round = 0; round < (real ? spec.repeats : 1); ++round) {
    const std::vector<size_t> order =
        real ? RoundOrder(commits.size(), spec.seed, round) : RoundOrder(commits.size(), 0, -1);
    for (size_t i : order) {
      for (pb::IommuMode mode : spec.modes) {
        for (const WorkloadSpec& w : spec.workloads) {
          for (const std::string& platform : spec.platforms) {
            if (real) {
              add(commits[i], mode, w, platform, round);
              continue;
            }
            for (int r = 0; r < spec.repeats; ++r) add(commits[i], mode, w, platform, r);
          }
        }
      }
    }
  }
  return jobs;
}

}  // namespace farm::scheduler
