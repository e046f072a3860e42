#include "scheduler/scheduler_service.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/base/file.h"
#include "lib/spec/spec_check.h"
#include "lib/spec/spec_yaml.h"
#include "lib/storage/run_eligibility.h"
#include "proto/labels.h"
#include "proto/names.h"
#include "scheduler/catalog_yaml.h"
#include "scheduler/kernel_builds.h"
#include "scheduler/storable_text.h"

namespace farm::scheduler {
namespace {

void SetDuration(absl::Duration d, google::protobuf::Duration* out) {
  const int64_t ns = absl::ToInt64Nanoseconds(d);
  out->set_seconds(ns / 1000000000);
  out->set_nanos(static_cast<int32_t>(ns % 1000000000));
}

absl::Status CheckLease(const pb::LeaseRef& l) {
  if (l.job_id() <= 0) return absl::InvalidArgumentError("lease.job_id: required");
  if (l.attempt() <= 0) return absl::InvalidArgumentError("lease.attempt: required (>= 1)");
  if (l.lease_token().empty()) return absl::InvalidArgumentError("lease.lease_token: required");
  return absl::OkStatus();
}

// The groups of failed and cancelled jobs GetMatrix carries (Matrix.failures).
constexpr int kMatrixFailureGroups = 10;

// The longest wall time a result may carry: past any job's runtime cap,
// far below what a nanosecond count in int64 holds (292 years).
constexpr int64_t kMaxWallTimeSeconds = 30 * 24 * 3600;

// Figures the farm's statistics can use: one NaN blanks a cell's mean and an
// infinity every test over it; a negative or absurd wall time is no
// duration at all (and past int64 nanoseconds would be stored wrapped).
absl::Status CheckReportFigures(const pb::ReportResultRequest& r) {
  for (int i = 0; i < r.samples_size(); ++i) {
    const double v = r.samples(i).value();
    if (!std::isfinite(v))
      return absl::InvalidArgumentError(
          absl::StrCat("samples[", i, "].value: ", v, " is not a finite number (metric \"",
                       absl::CHexEscape(r.samples(i).metric().substr(0, 100)), "\")"));
  }
  const google::protobuf::Duration& w = r.wall_time();
  if (w.seconds() < 0 || w.nanos() < 0 || w.nanos() >= 1000000000)
    return absl::InvalidArgumentError(absl::StrCat("wall_time: ", w.seconds(), " s ", w.nanos(),
                                                   " ns is not a duration (negative or nanos "
                                                   "out of 0..999999999)"));
  if (w.seconds() > kMaxWallTimeSeconds)
    return absl::InvalidArgumentError(absl::StrCat("wall_time: ", w.seconds(),
                                                   " s is longer than any job (at most ",
                                                   kMaxWallTimeSeconds, " s)"));
  return absl::OkStatus();
}

// Monotonic and, unlike CLOCK_MONOTONIC, counting time the system was
// suspended; both count time this process was stopped.
absl::Duration BootClock() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return absl::DurationFromTimespec(ts);
}

// A list RPC's page size: `fallback` for 0, at most 1000.
int PageSize(int32_t requested, int fallback) {
  if (requested <= 0) return fallback;
  return std::min(requested, 1000);
}

absl::Status CheckSession(int64_t agent_id, const std::string& session) {
  if (agent_id <= 0) return absl::InvalidArgumentError("agent_id: required (from Register)");
  if (session.empty()) return absl::InvalidArgumentError("session: required (from Register)");
  return absl::OkStatus();
}

// An agent's name is shown in tables, logs and alerts: a host name's
// characters only, so it can carry no terminal escapes or look-alikes.
absl::Status CheckAgentName(const std::string& name) {
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_' &&
        c != ':' && c != '@') {
      return absl::InvalidArgumentError(absl::StrCat("name: character ", i,
                                                     " is not a letter, digit or one of - . _ : @ "
                                                     "(agent names are host names)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

// =============================================================== JobService

absl::StatusOr<pb::SubmitMatrixResponse> JobService::SubmitMatrix(
    const pb::SubmitMatrixRequest& req, const std::string& submitted_by) {
  if (absl::Status text = CheckStorableText(req); !text.ok()) return text;
  if (req.has_spec() && !req.spec_yaml().empty()) {
    return absl::InvalidArgumentError("spec, spec_yaml: set one of them, not both");
  }
  absl::StatusOr<spec::MatrixSpec> spec =
      req.has_spec() ? spec::CheckMatrixSpec(req.spec(), config_.limits)
                     : spec::ParseMatrixSpec(req.spec_yaml(), config_.limits);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<pb::Catalog> catalog = catalogs_->GetCatalog(spec->catalog);
  if (absl::IsNotFound(catalog.status())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "catalog: unknown catalog \"", spec->catalog,
        "\" (load it with `farmctl catalog load FILE` or list them with `farmctl catalog list`)"));
  }
  if (!catalog.ok()) return catalog.status();
  absl::StatusOr<std::vector<ResolvedCommit>> commits = ResolveCommits(*spec, *catalog);
  if (!commits.ok()) return commits.status();
  absl::StatusOr<int64_t> count = CountJobs(*spec, commits->size(), config_.limits);
  if (!count.ok()) return count.status();

  storage::NewMatrix nm;
  nm.matrix.set_name(spec->name);
  nm.matrix.set_spec_yaml(req.has_spec() ? spec::MatrixSpecToYaml(req.spec()) : req.spec_yaml());
  nm.matrix.set_catalog(spec->catalog);
  std::string platforms;
  for (const std::string& p : spec->platforms) platforms += (platforms.empty() ? "" : ",") + p;
  nm.matrix.set_platform(platforms);
  nm.matrix.set_executor(spec->executor);
  nm.matrix.set_submitted_by(submitted_by);
  nm.analysis_bisect = spec->bisect;
  nm.idempotency_key = req.idempotency_key();

  pb::SubmitMatrixResponse resp;
  for (const std::string& w : spec->warnings) resp.add_warnings(w);
  const bool real = proto::IsRealExecutor(spec->executor);
  if (real) {
    if (absl::Status s = ApplyLabKernelConfig(&*spec, &resp); !s.ok()) return s;
  }
  // Real matrices are expanded before a dry run too: it names the kernels
  // to build and the jobs nothing can run.
  if (real || !req.dry_run()) {
    nm.jobs = ExpandMatrix(*spec, *commits, config_.max_attempts, SpecSet::kLeftOut);
  }
  if (real) {
    absl::Status builds = AttachKernelBuilds(req, *spec, &nm, &resp);
    if (!builds.ok()) return builds;
  }
  if (req.dry_run()) {
    *resp.mutable_matrix() = nm.matrix;
    resp.mutable_matrix()->mutable_counts()->set_total(*count);
    resp.mutable_matrix()->mutable_counts()->set_queued(*count);
    resp.mutable_matrix()->set_state(pb::MATRIX_STATE_UNSPECIFIED);
    resp.set_jobs_created(0);
    return resp;
  }
  // The spec's `set:` is stored once with the matrix, not in every job.
  nm.model_set = spec->model_set;
  nm.labels = spec->labels;
  absl::StatusOr<storage::CreatedMatrix> created = matrices_->CreateMatrix(nm);
  if (!created.ok()) return created.status();
  if (!created->existing) metrics_->matrices_submitted.Increment();
  *resp.mutable_matrix() = created->matrix;
  resp.set_jobs_created(created->jobs_created);
  if (created->existing) {
    resp.add_warnings(absl::StrCat("idempotency key matched matrix ", created->matrix.id(),
                                   ": nothing new created"));
  }
  spdlog::info("matrix {} \"{}\": {} jobs{}", created->matrix.id(), absl::CEscape(spec->name),
               created->jobs_created, created->existing ? " (existing)" : "");
  return resp;
}

absl::StatusOr<std::vector<pb::Agent>> JobService::AllAgents() {
  std::vector<pb::Agent> all;
  constexpr int kPage = 1000;
  for (std::string after;;) {
    absl::StatusOr<std::vector<pb::Agent>> page =
        queue_->ListAgentsPage(config_.liveness(), after, kPage);
    if (!page.ok()) return page.status();
    for (pb::Agent& a : *page) all.push_back(std::move(a));
    if (static_cast<int>(page->size()) < kPage) return all;
    after = all.back().name();
  }
}

absl::Status JobService::ApplyLabKernelConfig(spec::MatrixSpec* spec,
                                              pb::SubmitMatrixResponse* resp) {
  if (!spec->kernel_config_id.empty() || config_.lab_kernel_configs.empty()) {
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<pb::Agent>> agents = AllAgents();
  if (!agents.ok()) return agents.status();
  absl::StatusOr<std::optional<LabConfig>> lab =
      LabKernelConfig(spec->platforms, *agents, config_.lab_kernel_configs);
  if (!lab.ok()) return lab.status();
  if (!lab->has_value()) return absl::OkStatus();
  spec->kernel_config = (*lab)->config;
  spec->kernel_config_id = (*lab)->id;
  resp->add_warnings(absl::StrCat("kernel_config: ", (*lab)->platform, "'s hosts' config ",
                                  (*lab)->id, " (", (*lab)->config.base(), ", agent ",
                                  (*lab)->agent, " in farm-scheduler --lab-hosts)"));
  return absl::OkStatus();
}

absl::Status JobService::AttachKernelBuilds(const pb::SubmitMatrixRequest& req,
                                            const spec::MatrixSpec& spec, storage::NewMatrix* nm,
                                            pb::SubmitMatrixResponse* resp) {
  absl::StatusOr<std::vector<pb::Agent>> agents = AllAgents();
  if (!agents.ok()) return agents.status();
  const KernelPlan plan = PlanKernels(nm->jobs, *agents);
  for (const std::string& w : UnrunnableWarnings(plan, config_.unrunnable_wait)) {
    resp->add_warnings(w);
  }
  if (plan.builds.empty()) return absl::OkStatus();
  std::vector<std::string> commits;
  for (const proto::BuildKey& k : plan.builds) commits.push_back(k.commit);
  std::map<proto::BuildKey, int64_t> id_of;  // the newest live build of each key
  // Another submit may make a build this one found missing before this one
  // makes it: the store keeps one live build per key and refuses the second
  // (AlreadyExists, nothing created), and this submit reads again and waits
  // for the other's build.
  constexpr int kTries = 3;
  for (int attempt = 1;; ++attempt) {
    absl::StatusOr<std::vector<pb::Job>> live =
        matrices_->LiveBuildJobs(nm->matrix.catalog(), commits);
    if (!live.ok()) return live.status();
    for (const pb::Job& b : *live) id_of[proto::BuildKeyOf(b)] = b.id();
    std::vector<proto::BuildKey> missing;
    for (const proto::BuildKey& k : plan.builds) {
      if (id_of.count(k) == 0) missing.push_back(k);
    }
    if (req.dry_run()) {
      resp->add_warnings(absl::StrCat("kernels to build first: ", missing.size(), " new, ",
                                      plan.builds.size() - missing.size(),
                                      " already built or queued"));
      return absl::OkStatus();
    }
    if (missing.empty()) break;
    absl::StatusOr<pb::Matrix> builds = CreateBuildMatrix(req, *nm, missing, spec);
    if (builds.ok()) {
      resp->set_build_matrix_id(builds->id());
      absl::StatusOr<std::vector<pb::Job>> made =
          matrices_->LiveBuildJobs(nm->matrix.catalog(), commits);
      if (!made.ok()) return made.status();
      for (const pb::Job& b : *made) id_of[proto::BuildKeyOf(b)] = b.id();
      break;
    }
    if (!absl::IsAlreadyExists(builds.status()) || attempt == kTries) return builds.status();
    spdlog::info("matrix \"{}\": a kernel build it needs was made meanwhile ({}); reading again",
                 absl::CEscape(nm->matrix.name()), std::string(builds.status().message()));
  }
  for (size_t i = 0; i < nm->jobs.size(); ++i) {
    if (plan.waits[i] >= 0) nm->jobs[i].set_waits_for_job(id_of.at(plan.builds[plan.waits[i]]));
  }
  for (const proto::BuildKey& k : plan.builds) resp->add_build_job_ids(id_of.at(k));
  return absl::OkStatus();
}

absl::StatusOr<pb::Matrix> JobService::CreateBuildMatrix(const pb::SubmitMatrixRequest& req,
                                                         const storage::NewMatrix& nm,
                                                         const std::vector<proto::BuildKey>& keys,
                                                         const spec::MatrixSpec& spec) {
  std::map<std::string, int> commit_index;
  for (const pb::Job& j : nm.jobs) commit_index[j.commit_id()] = j.commit_index();
  storage::NewMatrix builds;
  builds.matrix.set_name(absl::StrCat("kernel builds for ", nm.matrix.name()));
  builds.matrix.set_catalog(nm.matrix.catalog());
  std::set<std::string> arches;
  for (const proto::BuildKey& k : keys) arches.insert(k.arch);
  builds.matrix.set_platform(absl::StrJoin(arches, ","));
  builds.matrix.set_executor(pb::EXECUTOR_KBUILD);
  builds.matrix.set_submitted_by(nm.matrix.submitted_by());
  // A retried submit finds the builds its first try made.
  if (!req.idempotency_key().empty()) builds.idempotency_key = "kbuild/" + req.idempotency_key();
  for (const proto::BuildKey& k : keys) {
    builds.jobs.push_back(MakeBuildJob(k, commit_index[k.commit], config_.max_attempts, spec.patch,
                                       spec.kernel_config));
  }
  absl::StatusOr<storage::CreatedMatrix> created = matrices_->CreateMatrix(builds);
  if (!created.ok()) return created.status();
  spdlog::info("matrix {}: {} kernel builds for \"{}\"", created->matrix.id(), keys.size(),
               absl::CEscape(nm.matrix.name()));
  return created->matrix;
}

absl::StatusOr<pb::Matrix> JobService::GetMatrix(const pb::GetMatrixRequest& req) {
  if (req.matrix_id() <= 0) return absl::InvalidArgumentError("matrix_id: required");
  absl::StatusOr<pb::Matrix> m = matrices_->GetMatrix(req.matrix_id());
  if (!m.ok()) return m;
  // The builds it waits for, or a build matrix's own, with their progress:
  // read only when there can be some, as the watch reads a matrix often.
  const pb::MatrixCounts& c = m->counts();
  if (c.waiting_for_build() > 0 || (m->executor() == pb::EXECUTOR_KBUILD && c.leased() > 0)) {
    absl::StatusOr<std::vector<pb::JobProgress>> building =
        matrices_->ListBuilding(req.matrix_id());
    if (!building.ok()) return building.status();
    for (pb::JobProgress& p : *building) *m->add_building() = std::move(p);
  }
  if (c.failed() + c.cancelled() == 0) return m;
  // Why jobs ended without a result, so `farmctl status` and the commands
  // that wait (try, gate, submit --wait) can say it.
  absl::StatusOr<std::vector<pb::JobFailure>> failures =
      matrices_->ListFailures(req.matrix_id(), kMatrixFailureGroups);
  if (!failures.ok()) return failures.status();
  for (pb::JobFailure& f : *failures) *m->add_failures() = std::move(f);
  return m;
}

absl::StatusOr<pb::ListMatricesResponse> JobService::ListMatrices(
    const pb::ListMatricesRequest& req) {
  const int limit = req.limit() <= 0 ? 50 : std::min(req.limit(), 1000);
  absl::StatusOr<std::vector<pb::Matrix>> ms = matrices_->ListMatrices(limit, req.before_id());
  if (!ms.ok()) return ms.status();
  pb::ListMatricesResponse resp;
  for (pb::Matrix& m : *ms) {
    m.clear_spec_yaml();  // listing stays small; GetMatrix has it
    *resp.add_matrices() = std::move(m);
  }
  return resp;
}

absl::StatusOr<pb::CancelMatrixResponse> JobService::CancelMatrix(
    const pb::CancelMatrixRequest& req, const Principal& who) {
  if (absl::Status text = CheckStorableText(req); !text.ok()) return text;
  if (req.matrix_id() <= 0) return absl::InvalidArgumentError("matrix_id: required");
  // The owner never changes, so the check holds for the cancel that follows.
  if (who.role != Role::kAdmin) {
    absl::StatusOr<pb::Matrix> m = matrices_->GetMatrix(req.matrix_id());
    if (!m.ok()) return m.status();
    absl::Status mine =
        CheckOwner(who, m->submitted_by(), absl::StrCat("cancel matrix ", req.matrix_id()));
    if (!mine.ok()) return mine;
  }
  auto out = matrices_->CancelMatrix(req.matrix_id(), req.reason());
  if (!out.ok()) return out.status();
  pb::CancelMatrixResponse resp;
  *resp.mutable_matrix() = out->first;
  resp.set_jobs_cancelled(out->second);
  spdlog::info("matrix {} cancelled: {} jobs", req.matrix_id(), out->second);
  return resp;
}

absl::StatusOr<std::vector<pb::Result>> JobService::ResultsPage(int64_t matrix_id,
                                                                int64_t after_job_id, int limit,
                                                                bool include_raw,
                                                                int64_t max_raw_bytes) {
  if (matrix_id <= 0) return absl::InvalidArgumentError("matrix_id: required");
  if (after_job_id == 0) {
    absl::StatusOr<pb::Matrix> m = matrices_->GetMatrix(matrix_id);
    if (!m.ok()) return m.status();
  }
  return matrices_->ListResults(matrix_id, after_job_id, limit, include_raw, max_raw_bytes);
}

absl::StatusOr<storage::RawOutputSlice> JobService::RawOutputChunk(int64_t job_id, int attempt,
                                                                   int64_t from_char) {
  if (job_id <= 0) return absl::InvalidArgumentError("job_id: required");
  if (attempt < 0) return absl::InvalidArgumentError("attempt: must be >= 0 (0: the latest)");
  return matrices_->ReadRawOutput(job_id, attempt, from_char, kRawChunkChars);
}

absl::StatusOr<pb::ListAgentsResponse> JobService::ListAgents(const pb::ListAgentsRequest& req) {
  const int page = PageSize(req.page_size(), 100);
  // By name after the token (the last name of the page before), paged by
  // the store; one agent past the page says whether another page follows.
  absl::StatusOr<std::vector<pb::Agent>> agents =
      queue_->ListAgentsPage(config_.liveness(), req.page_token(), page + 1);
  if (!agents.ok()) return agents.status();
  pb::ListAgentsResponse resp;
  const bool more = static_cast<int>(agents->size()) > page;
  if (more) agents->resize(page);
  for (pb::Agent& a : *agents) *resp.add_agents() = std::move(a);
  if (more) resp.set_next_page_token(resp.agents().rbegin()->name());
  return resp;
}

absl::StatusOr<pb::ListCatalogsResponse> JobService::ListCatalogs(const pb::ListCatalogsRequest&) {
  absl::StatusOr<std::vector<pb::Catalog>> cats = catalogs_->ListCatalogs();
  if (!cats.ok()) return cats.status();
  pb::ListCatalogsResponse resp;
  for (pb::Catalog& c : *cats) *resp.add_catalogs() = std::move(c);
  return resp;
}

absl::StatusOr<pb::Catalog> JobService::GetCatalog(const pb::GetCatalogRequest& req) {
  if (req.name().empty()) return absl::InvalidArgumentError("name: required");
  absl::StatusOr<pb::Catalog> cat = catalogs_->GetCatalog(req.name());
  if (cat.ok() && req.resolve()) ResolveCatalog(&*cat);
  return cat;
}

absl::StatusOr<pb::LoadCatalogResponse> JobService::LoadCatalog(const pb::LoadCatalogRequest& req) {
  if (absl::Status text = CheckStorableText(req); !text.ok()) return text;
  const std::string source_name = req.source_name().empty() ? "catalog" : req.source_name();
  if (req.yaml().size() > config_.limits.max_spec_bytes * 64) {
    return absl::ResourceExhaustedError(absl::StrCat(source_name, ": catalog too large"));
  }
  absl::StatusOr<pb::Catalog> cat = ParseCatalogYaml(req.yaml(), source_name);
  if (!cat.ok()) return cat.status();
  cat->set_source("file:" + source_name);
  absl::StatusOr<pb::Catalog> stored = catalogs_->PutCatalog(*cat, req.replace());
  if (!stored.ok()) return stored.status();
  pb::LoadCatalogResponse resp;
  *resp.mutable_catalog() = *std::move(stored);
  spdlog::info("catalog \"{}\" loaded from {}: {} commits", absl::CEscape(resp.catalog().name()),
               absl::CEscape(source_name), resp.catalog().commits_size());
  return resp;
}

absl::StatusOr<pb::ImportGitCatalogResponse> JobService::ImportGitCatalog(
    const pb::ImportGitCatalogRequest& req) {
  if (absl::Status text = CheckStorableText(req); !text.ok()) return text;
  if (req.catalog().empty()) return absl::InvalidArgumentError("catalog: required");
  if (req.commits().empty()) return absl::InvalidArgumentError("commits: empty");
  std::vector<pb::CatalogCommit> commits;
  for (int i = 0; i < req.commits_size(); ++i) {
    if (req.commits(i).id().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("commits[", i, "].id: required"));
    }
    commits.push_back(req.commits(i));
  }
  auto out = catalogs_->AppendCommits(req.catalog(), "git:" + req.range(), commits);
  if (!out.ok()) return out.status();
  pb::ImportGitCatalogResponse resp;
  *resp.mutable_catalog() = out->first;
  resp.set_added(out->second);
  return resp;
}

absl::StatusOr<std::vector<std::string>> JobService::LoadCatalogDir(
    const std::string& dir, const std::string& source_prefix) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("--catalog-dir ", dir, ": not a directory"));
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".yaml") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  absl::StatusOr<std::vector<pb::Catalog>> have = catalogs_->ListCatalogs();
  if (!have.ok()) return have.status();
  std::vector<std::string> loaded;
  for (const fs::path& f : files) {
    absl::StatusOr<pb::Catalog> cat =
        ParseCatalogYaml(base::ReadFileOrEmpty(f.string()), f.filename().string());
    if (!cat.ok()) return cat.status();
    const bool exists = std::any_of(have->begin(), have->end(),
                                    [&](const pb::Catalog& c) { return c.name() == cat->name(); });
    if (exists) continue;
    cat->set_source(source_prefix.empty() ? "file:" + f.filename().string() : source_prefix);
    absl::StatusOr<pb::Catalog> stored = catalogs_->PutCatalog(*cat, /*replace=*/false);
    // Another scheduler may have loaded it a moment ago.
    if (absl::IsAlreadyExists(stored.status())) continue;
    if (!stored.ok()) return stored.status();
    spdlog::info("catalog \"{}\" loaded from {} ({} commits)", cat->name(), f.string(),
                 cat->commits_size());
    loaded.push_back(cat->name());
  }
  return loaded;
}

// ============================================================= AgentService

absl::StatusOr<pb::RegisterResponse> AgentService::Register(const pb::RegisterRequest& req) {
  if (absl::Status text = CheckStorableText(req); !text.ok()) return text;
  if (req.name().empty()) return absl::InvalidArgumentError("name: required");
  if (req.name().size() > 200) return absl::InvalidArgumentError("name: longer than 200");
  if (absl::Status name = CheckAgentName(req.name()); !name.ok()) return name;
  if (req.slots() < 0) return absl::InvalidArgumentError("slots: must be >= 0");
  for (const auto& [key, value] : req.host().labels()) {
    if (absl::Status label = proto::CheckLabel(key, value); !label.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("host.labels: ", label.message()));
    }
  }
  absl::StatusOr<pb::RegisterResponse> resp = queue_->RegisterAgent(req, config_.retry);
  if (!resp.ok()) return resp;
  SetDuration(config_.heartbeat_interval(), resp->mutable_heartbeat_interval());
  SetDuration(config_.lease_ttl, resp->mutable_lease_ttl());
  spdlog::info("agent \"{}\" registered as id {}", absl::CEscape(req.name()), resp->agent_id());
  if (!storage::AgentHealthy(req.health())) {
    spdlog::warn("agent \"{}\" failed its health job and takes no work: {}",
                 absl::CEscape(req.name()), absl::CEscape(req.health().detail()));
  }
  return resp;
}

absl::StatusOr<pb::HeartbeatResponse> AgentService::Heartbeat(const pb::HeartbeatRequest& req) {
  absl::Status st = CheckSession(req.agent_id(), req.session());
  if (!st.ok()) return st;
  return queue_->Heartbeat(req, config_.lease_ttl, config_.max_boot_timeout);
}

absl::StatusOr<pb::LeaseJobsResponse> AgentService::LeaseJobs(
    const pb::LeaseJobsRequest& req, const std::function<bool()>& caller_gone) {
  absl::Status st = CheckSession(req.agent_id(), req.session());
  if (!st.ok()) return st;
  const auto gone = [&] { return caller_gone && caller_gone(); };
  if (gone()) return absl::CancelledError("caller left before leasing");
  if (req.capabilities_size() > 0) {
    // The agent's kernel store changed (a build landed): claim on what it offers now.
    absl::Status updated = queue_->UpdateCapabilities(
        req.agent_id(), req.session(), {req.capabilities().begin(), req.capabilities().end()});
    if (!updated.ok()) return updated;
  }
  const int max_jobs = std::clamp(req.max_jobs(), 1, kMaxLeaseBatch);
  absl::StatusOr<std::vector<pb::JobLease>> leases = queue_->LeaseJobs(
      req.agent_id(), req.session(), max_jobs, config_.lease_ttl, eligible_, config_.claim);
  if (!leases.ok()) return leases.status();
  if (!leases->empty() && gone()) {
    pb::ReleaseLeasesRequest back;
    back.set_agent_id(req.agent_id());
    back.set_session(req.session());
    for (const pb::JobLease& l : *leases) *back.add_leases() = l.lease();
    absl::StatusOr<int> n = queue_->ReleaseLeases(back);
    if (!n.ok()) {
      // The reaper takes them back after the TTL (spending the attempt).
      spdlog::warn("leases for a departed caller not released: {}", n.status().ToString());
    } else {
      spdlog::info("agent {}: caller left while leasing; {} leases released", req.agent_id(), *n);
    }
    return absl::CancelledError("caller left while leasing; leases released");
  }
  metrics_->leases_granted.Increment(static_cast<double>(leases->size()));
  pb::LeaseJobsResponse resp;
  resp.mutable_leases()->Reserve(static_cast<int>(leases->size()));
  for (pb::JobLease& l : *leases) *resp.add_leases() = std::move(l);
  return resp;
}

absl::StatusOr<pb::ReportResultResponse> AgentService::ReportResult(
    const pb::ReportResultRequest& req) {
  absl::Status st = CheckLease(req.lease());
  if (!st.ok()) return st;
  if (absl::Status text = CheckStorableText(req); !text.ok()) return text;
  if (absl::Status figures = CheckReportFigures(req); !figures.ok()) return figures;
  absl::StatusOr<storage::ReportOutcome> out = queue_->ReportResult(req);
  if (absl::IsFailedPrecondition(out.status())) {
    metrics_->stale_results_rejected.Increment();
    spdlog::warn("rejected result: {}", std::string(out.status().message()));
  }
  if (!out.ok()) return out.status();
  if (!out->duplicate) {
    metrics_->results_ingested.Increment();
    metrics_->job_duration(out->executor).Observe(out->duration_seconds);
  }
  pb::ReportResultResponse resp;
  resp.set_accepted(out->accepted);
  resp.set_duplicate(out->duplicate);
  return resp;
}

absl::StatusOr<pb::ReportResultsResponse> AgentService::ReportResults(
    const pb::ReportResultsRequest& req) {
  if (req.results_size() > kMaxReportBatch) {
    return absl::InvalidArgumentError(
        absl::StrCat("results: at most ", kMaxReportBatch, " per call, got ", req.results_size()));
  }
  pb::ReportResultsResponse resp;
  std::vector<const pb::ReportResultRequest*> valid;
  std::vector<int> slot;  // valid[k] answers resp.results(slot[k])
  for (int i = 0; i < req.results_size(); ++i) {
    pb::ReportResultResponse* item = resp.add_results();
    absl::Status st = CheckLease(req.results(i).lease());
    // Refused alone, like a single ReportResult: the rest of the batch is stored.
    if (st.ok()) st = CheckStorableText(req.results(i));
    if (st.ok()) st = CheckReportFigures(req.results(i));
    if (!st.ok()) {
      item->set_error_code(static_cast<int>(st.code()));
      item->set_error_message(absl::StrCat("results[", i, "].", st.message()));
      continue;
    }
    valid.push_back(&req.results(i));
    slot.push_back(i);
  }
  absl::StatusOr<std::vector<absl::StatusOr<storage::ReportOutcome>>> outs =
      queue_->ReportResults(absl::MakeConstSpan(valid));
  if (!outs.ok()) return outs.status();
  for (size_t k = 0; k < outs->size() && k < slot.size(); ++k) {
    const absl::StatusOr<storage::ReportOutcome>& out = (*outs)[k];
    pb::ReportResultResponse* item = resp.mutable_results(slot[k]);
    if (!out.ok()) {
      if (absl::IsFailedPrecondition(out.status())) {
        metrics_->stale_results_rejected.Increment();
        spdlog::warn("rejected result: {}", std::string(out.status().message()));
      }
      item->set_error_code(static_cast<int>(out.status().code()));
      item->set_error_message(std::string(out.status().message()));
      continue;
    }
    if (!out->duplicate) {
      metrics_->results_ingested.Increment();
      metrics_->job_duration(out->executor).Observe(out->duration_seconds);
    }
    item->set_accepted(out->accepted);
    item->set_duplicate(out->duplicate);
  }
  return resp;
}

absl::StatusOr<pb::ReportFailureResponse> AgentService::ReportFailure(
    const pb::ReportFailureRequest& req) {
  absl::Status st = CheckLease(req.lease());
  if (!st.ok()) return st;
  if (absl::Status text = CheckStorableText(req); !text.ok()) return text;
  absl::StatusOr<pb::JobState> state = queue_->ReportFailure(req, config_.retry);
  if (absl::IsFailedPrecondition(state.status())) {
    metrics_->stale_results_rejected.Increment();
    spdlog::warn("rejected failure report: {}", std::string(state.status().message()));
  }
  if (!state.ok()) return state.status();
  if (*state == pb::JOB_STATE_FAILED) metrics_->jobs_failed.Increment();
  pb::ReportFailureResponse resp;
  resp.set_job_state(*state);
  return resp;
}

absl::StatusOr<pb::ReleaseLeasesResponse> AgentService::ReleaseLeases(
    const pb::ReleaseLeasesRequest& req) {
  absl::Status st = CheckSession(req.agent_id(), req.session());
  if (!st.ok()) return st;
  absl::StatusOr<int> n = queue_->ReleaseLeases(req);
  if (!n.ok()) return n.status();
  pb::ReleaseLeasesResponse resp;
  resp.set_released(*n);
  return resp;
}

// ========================================================== AnalysisService

absl::StatusOr<pb::ListRegressionsResponse> AnalysisService::ListRegressions(
    const pb::ListRegressionsRequest& req) {
  int64_t after = 0;
  if (!req.page_token().empty() && (!absl::SimpleAtoi(req.page_token(), &after) || after <= 0)) {
    return absl::InvalidArgumentError(
        "page_token: not a token from an earlier ListRegressions (pass next_page_token)");
  }
  const int page = PageSize(req.page_size(), 1000);
  // One more than the page says whether another follows.
  pb::ListRegressionsRequest ask = req;
  ask.set_page_size(page + 1);
  auto regs = store_->ListRegressions(ask);
  if (!regs.ok()) return regs.status();
  pb::ListRegressionsResponse resp;
  for (pb::Regression& r : *regs) {
    if (resp.regressions_size() == page) {
      resp.set_next_page_token(absl::StrCat(resp.regressions(page - 1).id()));
      break;
    }
    *resp.add_regressions() = std::move(r);
  }
  return resp;
}

absl::StatusOr<pb::Regression> AnalysisService::GetRegression(const pb::GetRegressionRequest& req) {
  if (req.regression_id() <= 0) return absl::InvalidArgumentError("regression_id: required");
  return store_->GetRegression(req.regression_id());
}

absl::StatusOr<pb::Bisect> AnalysisService::GetBisect(const pb::GetBisectRequest& req) {
  if (req.bisect_id() <= 0 && req.regression_id() <= 0) {
    return absl::InvalidArgumentError("bisect_id or regression_id: one is required");
  }
  return store_->GetBisect(req.bisect_id(), req.regression_id());
}

absl::StatusOr<pb::Regression> AnalysisService::UpdateRegression(
    const pb::UpdateRegressionRequest& req, const Principal& who) {
  if (absl::Status text = CheckStorableText(req); !text.ok()) return text;
  if (req.regression_id() <= 0) return absl::InvalidArgumentError("regression_id: required");
  const pb::RegressionState s = req.state();
  if (req.reopen() && s != pb::REGRESSION_STATE_UNSPECIFIED) {
    return absl::InvalidArgumentError("reopen and state: set one of them");
  }
  if (!req.reopen() && s != pb::REGRESSION_STATE_UNSPECIFIED &&
      s != pb::REGRESSION_STATE_ACKNOWLEDGED && s != pb::REGRESSION_STATE_IGNORED &&
      s != pb::REGRESSION_STATE_FIXED && s != pb::REGRESSION_STATE_FALSE_POSITIVE) {
    return absl::InvalidArgumentError(absl::StrCat(
        "state: ", pb::RegressionState_Name(s),
        " cannot be set by hand (expected ACKNOWLEDGED, IGNORED, FIXED or FALSE_POSITIVE; "
        "reopen for CONFIRMED)"));
  }
  absl::StatusOr<pb::Regression> current = store_->GetRegression(req.regression_id());
  if (!current.ok()) return current.status();
  if (absl::Status mine = CheckRegressionOwner(*current, who); !mine.ok()) return mine;
  if (!req.reopen()) return store_->UpdateRegression(req.regression_id(), s, req.note());
  switch (current->state()) {
    case pb::REGRESSION_STATE_ACKNOWLEDGED:
    case pb::REGRESSION_STATE_IGNORED:
    case pb::REGRESSION_STATE_FIXED:
    case pb::REGRESSION_STATE_FALSE_POSITIVE:
      break;
    default:
      return absl::FailedPreconditionError(absl::StrCat(
          "regression ", req.regression_id(), " is ", proto::RegressionStateName(current->state()),
          "; only acknowledged, ignored, fixed or false-positive ones reopen"));
  }
  return store_->UpdateRegression(req.regression_id(), pb::REGRESSION_STATE_CONFIRMED, req.note());
}

absl::Status AnalysisService::CheckRegressionOwner(const pb::Regression& r, const Principal& who) {
  if (who.role == Role::kAdmin) return absl::OkStatus();
  const std::string what =
      absl::StrCat("triage regression ", r.id(), " (found in matrix ", r.matrix_id(), ")");
  if (r.matrix_id() <= 0) return CheckOwner(who, "", what);
  absl::StatusOr<pb::Matrix> m = matrices_->GetMatrix(r.matrix_id());
  // A matrix that is gone leaves the regression with no owner.
  if (absl::IsNotFound(m.status())) return CheckOwner(who, "", what);
  if (!m.ok()) return m.status();
  return CheckOwner(who, m->submitted_by(), what);
}

// =================================================================== Reaper

Reaper::Reaper(storage::JobQueue* queue, metrics::SchedulerMetrics* metrics,
               const SchedulerConfig& config,
               std::function<void(const storage::UnbootedLease&)> on_unbooted)
    : queue_(queue),
      metrics_(metrics),
      config_(config),
      on_unbooted_(std::move(on_unbooted)),
      loop_([this] { return Tick(); }) {}

Reaper::~Reaper() { Stop(); }

void Reaper::Start() {
  const absl::Duration now = BootClock();
  grace_until_ = now + config_.reaper_grace();
  last_pass_end_ = now;
  last_pause_ = absl::ZeroDuration();
  loop_.Start();
}

absl::Duration Reaper::Tick() {
  const absl::Duration pause =
      std::max(absl::Milliseconds(100), std::min(config_.lease_ttl / 4, absl::Seconds(5)));
  const absl::Duration now = BootClock();
  const absl::Duration gap = now - last_pass_end_;
  if (gap > last_pause_ + std::max(config_.lease_ttl / 2, absl::Seconds(1))) {
    pauses_detected_.fetch_add(1);
    grace_until_ = now + config_.reaper_grace();
    spdlog::warn("reaper: this process was paused for {} (expected {}); no lease expires for {}",
                 absl::FormatDuration(gap), absl::FormatDuration(last_pause_),
                 absl::FormatDuration(config_.reaper_grace()));
  }
  if (now < grace_until_) {
    grace_passes_.fetch_add(1);
    RefreshGauges();
  } else {
    absl::StatusOr<storage::ReapOutcome> r = RunOnce();
    if (!r.ok()) spdlog::warn("reaper: {}", r.status().ToString());
  }
  last_pass_end_ = BootClock();
  last_pause_ = pause;
  return pause;
}

absl::StatusOr<storage::ReapOutcome> Reaper::RunOnce() {
  constexpr int kBatch = 1000;
  storage::ReapOutcome total;
  for (;;) {
    absl::StatusOr<storage::ReapOutcome> r = queue_->ReapExpired(config_.retry, kBatch);
    if (!r.ok()) return r.status();
    total.requeued += r->requeued;
    total.failed += r->failed;
    metrics_->leases_expired.Increment(static_cast<double>(r->requeued + r->failed));
    metrics_->jobs_failed.Increment(static_cast<double>(r->failed));
    for (const storage::UnbootedLease& u : r->unbooted) {
      spdlog::warn(
          "reaper: job {} attempt {} failed: agent {} did not come back from the "
          "reboot into its kernel",
          u.job_id, u.attempt, u.agent);
      if (on_unbooted_) on_unbooted_(u);
    }
    if (r->requeued + r->failed < kBatch) break;
  }
  if (total.requeued + total.failed > 0) {
    spdlog::info("reaper: {} expired leases requeued, {} jobs failed (out of attempts)",
                 total.requeued, total.failed);
  }
  absl::StatusOr<int64_t> blocked = queue_->FailBlockedJobs(config_.unrunnable_wait, kBatch);
  if (!blocked.ok()) return blocked.status();
  if (*blocked > 0) {
    metrics_->jobs_failed.Increment(static_cast<double>(*blocked));
    spdlog::info("reaper: {} jobs failed: their kernel build failed or no agent can run them",
                 *blocked);
  }
  RefreshGauges();
  return total;
}

void Reaper::RefreshGauges() {
  absl::StatusOr<std::array<int64_t, 6>> counts = queue_->QueueCounts();
  if (counts.ok()) {
    for (int s = 1; s < 6; ++s) metrics_->queue_jobs(s).Set(static_cast<double>((*counts)[s]));
  }
  absl::StatusOr<std::map<int, int64_t>> queued = queue_->QueuedByExecutor();
  if (queued.ok()) {
    for (int e = 1; e < metrics::SchedulerMetrics::kExecutors; ++e) {
      const auto it = queued->find(e);
      metrics_->queued_jobs(e).Set(it == queued->end() ? 0.0 : static_cast<double>(it->second));
    }
  }
  absl::StatusOr<int64_t> connected = queue_->CountConnectedAgents(config_.liveness());
  if (connected.ok()) metrics_->agents_connected.Set(static_cast<double>(*connected));
}

}  // namespace farm::scheduler
