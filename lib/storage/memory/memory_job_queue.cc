#include "lib/storage/memory/memory_job_queue.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/storage/row_codec.h"
#include "lib/storage/run_eligibility.h"

namespace farm::storage {
namespace {

using Tables = MemoryDatabase::Tables;
using Changes = MemoryDatabase::Changes;

absl::Status UnknownSession(int64_t agent_id) {
  return absl::NotFoundError(absl::StrCat("unknown agent ", agent_id, " or session: re-register"));
}

const AgentRow* FindSession(const Tables& t, int64_t agent_id, const std::string& session) {
  auto it = t.agents.find(agent_id);
  if (it == t.agents.end() || it->second.session != session) return nullptr;
  return &it->second;
}

// The job row `l` names while it holds that lease: state = 2 with the same
// attempt and token (lease_token = $3 never matches NULL).
bool HoldsLease(const JobRow& j, const pb::LeaseRef& l) {
  return j.job.state() == pb::JOB_STATE_LEASED && j.job.attempt() == l.attempt() &&
         j.lease_token.has_value() && *j.lease_token == l.lease_token();
}

JobRow* LeasedJob(Tables& t, const pb::LeaseRef& l) {
  auto it = t.jobs.find(l.job_id());
  if (it == t.jobs.end() || !HoldsLease(it->second, l)) return nullptr;
  return &it->second;
}

// PgJobQueue's answer to a report of a lease another agent holds.
absl::Status HeldByAnother(int64_t job_id, int64_t holder) {
  return absl::PermissionDeniedError(
      absl::StrCat("job ", job_id, " is leased to another agent (", holder, ")"));
}

// now() + least(base * 2^(greatest(attempt, 1) - 1), max) seconds.
absl::Time RetryAt(absl::Time now, const RetryPolicy& retry, int attempt) {
  const double secs =
      std::min(absl::ToDoubleSeconds(retry.base_backoff) * std::pow(2.0, std::max(attempt, 1) - 1),
               absl::ToDoubleSeconds(retry.max_backoff));
  return now + absl::Microseconds(std::llround(secs * 1e6));
}

// PgJobQueue's kHeldLeaseExpired, kHeldLeaseNotResumed and kHeldLeaseExpiredOnce.
constexpr char kHeldLeaseExpired[] =
    "lease held through the agent's reboot expired: the job's kernel did not come back within "
    "the boot timeout, so it does not boot on this host";
constexpr char kHeldLeaseNotResumed[] =
    "agent re-registered without resuming the lease it held through its reboot";
constexpr char kHeldLeaseExpiredOnce[] =
    "lease held through the agent's reboot expired: the job's kernel did not come back within "
    "the boot timeout; it boots again before it is marked as not booting on this host";

// The reaper's and re-registration's expiry (PgJobQueue's ExpireSet): the
// lease spends its attempt; the job is requeued after the backoff or fails
// at max_attempts. lease_owner stays, naming the agent in the reason.
// A lease held through its agent's reboot gets `held_reason` instead; with
// `held_unboots` it is a boot that did not come back, and its job fails at
// once when that makes retry.boot_attempts of them; a job that runs again
// gets kHeldLeaseExpiredOnce. Returns whether it was held.
bool ExpireLease(JobRow& j, const std::string& reason, const std::string& held_reason,
                 bool held_unboots, const RetryPolicy& retry, absl::Time now) {
  pb::Job& job = j.job;
  const bool held = j.lease_hold_token.has_value() && j.lease_hold_token == j.lease_token;
  const int boot_attempts = std::max(retry.boot_attempts, 1);
  const bool does_not_boot = held_unboots && held && j.unbooted + 1 >= boot_attempts;
  const bool out_of_attempts = job.attempt() >= job.max_attempts() || does_not_boot;
  std::string why = reason;
  if (held) {
    why = held_unboots && !out_of_attempts
              ? absl::StrCat(kHeldLeaseExpiredOnce, " (boot ", j.unbooted + 1, " of ",
                             boot_attempts, ")")
              : held_reason;
  }
  if (held_unboots && held) ++j.unbooted;
  job.set_failure_reason(absl::StrCat(
      "attempt ", job.attempt(), " of ", job.max_attempts(), ": ", why,
      job.lease_owner().empty() ? "" : absl::StrCat(" (agent ", job.lease_owner(), ")")));
  job.set_state(out_of_attempts ? pb::JOB_STATE_FAILED : pb::JOB_STATE_QUEUED);
  if (out_of_attempts) {
    j.finished_at = now;
  } else {
    j.finished_at.reset();
  }
  j.not_before = RetryAt(now, retry, job.attempt());
  j.lease_token.reset();
  j.lease_agent.reset();
  j.lease_expires_at.reset();
  return held;
}

}  // namespace

std::string MemoryJobQueue::NewUuid() {
  uint64_t hi, lo;
  {
    absl::MutexLock lock(&rng_mu_);
    hi = absl::Uniform<uint64_t>(rng_);
    lo = absl::Uniform<uint64_t>(rng_);
  }
  hi = (hi & ~0xf000ULL) | 0x4000ULL;              // version 4
  lo = (lo & ~(0xc0ULL << 56)) | (0x80ULL << 56);  // RFC 4122 variant
  char buf[37];
  std::snprintf(buf, sizeof(buf), "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xffff), static_cast<unsigned>(hi & 0xffff),
                static_cast<unsigned>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xffffffffffffULL));
  return buf;
}

absl::StatusOr<pb::RegisterResponse> MemoryJobQueue::RegisterAgent(const pb::RegisterRequest& req,
                                                                   const RetryPolicy& retry) {
  const std::string session = NewUuid();
  return db_->Write([&](Tables& t, Changes& changes) -> absl::StatusOr<pb::RegisterResponse> {
    const absl::Time now = db_->Now();
    // The INSERT takes a sequence value even when it turns into the UPDATE.
    const int64_t fresh_id = ++t.last_agent_id;
    AgentRow* a = nullptr;
    for (auto& [id, row] : t.agents) {
      if (row.name == req.name()) a = &row;
    }
    if (a == nullptr) {
      a = &t.agents[fresh_id];
      a->id = fresh_id;
      a->name = req.name();
    }
    a->session = session;
    a->capabilities.Clear();
    JsonToCaps(CapsToJson(req.capabilities()), &a->capabilities);
    const std::vector<int> executors = ExecutorsOf(req.capabilities());
    a->executors = std::set<int>(executors.begin(), executors.end());
    a->host.Clear();
    JsonToHost(HostToJson(req.host()), &a->host);
    a->health = req.health();
    a->slots = std::max(1, req.slots());
    a->registered_at = now;
    a->last_heartbeat = now;
    pb::RegisterResponse out;
    std::set<int64_t> kept;
    for (const pb::LeaseRef& l : req.resumes()) {
      JobRow* j = LeasedJob(t, l);
      if (j == nullptr || j->lease_agent != a->id || j->lease_hold_token != j->lease_token ||
          !j->lease_expires_at.has_value() || *j->lease_expires_at < now) {
        continue;
      }
      j->lease_hold_token.reset();
      kept.insert(l.job_id());
      *out.add_resumed() = l;
    }
    for (auto& [id, j] : t.jobs) {
      if (j.job.state() != pb::JOB_STATE_LEASED || j.lease_agent != a->id) continue;
      if (kept.count(id) != 0) continue;
      ExpireLease(j, "agent re-registered while holding the lease", kHeldLeaseNotResumed, false,
                  retry, now);
      changes.insert(j.job.matrix_id());
    }
    out.set_agent_id(a->id);
    out.set_session(a->session);
    return out;
  });
}

absl::StatusOr<pb::HeartbeatResponse> MemoryJobQueue::Heartbeat(const pb::HeartbeatRequest& req,
                                                                absl::Duration ttl,
                                                                absl::Duration max_hold) {
  const absl::Duration hold = HoldFor(req, max_hold);
  return db_->Write([&](Tables& t, Changes&) -> absl::StatusOr<pb::HeartbeatResponse> {
    auto a = t.agents.find(req.agent_id());
    if (a == t.agents.end() || a->second.session != req.session()) {
      return UnknownSession(req.agent_id());
    }
    const absl::Time now = db_->Now();
    a->second.last_heartbeat = now;
    pb::HeartbeatResponse out;
    SetTime(now + ttl, out.mutable_lease_expires_at());
    if (hold > absl::ZeroDuration()) SetTime(now + hold, out.mutable_held_until());
    for (const pb::LeaseRef& l : req.leases()) {
      JobRow* j = LeasedJob(t, l);
      if (j != nullptr && j->lease_agent == req.agent_id()) {
        if (hold > absl::ZeroDuration()) {
          j->lease_expires_at = now + hold;
          j->lease_hold_token = j->lease_token;
        } else if (j->lease_hold_token.has_value() && j->lease_hold_token == j->lease_token) {
          // A plain heartbeat never shortens a hold.
          j->lease_expires_at = std::max(*j->lease_expires_at, now + ttl);
        } else {
          j->lease_expires_at = now + ttl;
        }
        *out.add_extended() = l;
        for (const pb::JobProgress& p : req.progress()) {
          if (p.job_id() == l.job_id() && p.attempt() == l.attempt()) j->progress = p;
        }
      } else {
        *out.add_revoked() = l;
      }
    }
    return out;
  });
}

absl::StatusOr<std::vector<pb::JobLease>> MemoryJobQueue::LeaseJobs(
    int64_t agent_id, const std::string& session, int max_jobs, absl::Duration ttl,
    const JobPredicate& eligible, const ClaimRules& rules) {
  using Out = std::vector<pb::JobLease>;
  // Tokens are drawn before the lock, like the database's own generator.
  std::vector<std::string> tokens;
  for (int i = 0; i < max_jobs; ++i) tokens.push_back(NewUuid());
  return db_->Write([&](Tables& t, Changes& changes) -> absl::StatusOr<Out> {
    const AgentRow* a = FindSession(t, agent_id, session);
    if (a == nullptr) return UnknownSession(agent_id);
    if (a->executors.empty() || max_jobs <= 0 || !AgentHealthy(a->health)) return Out{};
    const absl::Time now = db_->Now();
    int limit = max_jobs;
    if (rules.within_free_slots) {
      int held = 0;
      for (const auto& [id, j] : t.jobs) {
        if (j.job.state() == pb::JOB_STATE_LEASED && j.lease_agent == agent_id) ++held;
      }
      limit = std::min(limit, std::max(0, a->slots - held));
      if (limit == 0) return Out{};
    }
    // The claim: queued, past its backoff, an executor the agent runs, the
    // rules; ORDER BY priority DESC, fair_rank, id LIMIT, then the hook.
    const std::vector<pb::Capability> caps(a->capabilities.begin(), a->capabilities.end());
    std::vector<JobRow*> cand;
    for (auto& [id, j] : t.jobs) {
      if (j.job.state() == pb::JOB_STATE_QUEUED && j.not_before <= now &&
          a->executors.count(j.job.executor()) != 0 && BuildDone(t, j.job) &&
          (!rules.match_real_run_hosts || RealRunEligible(j.job, caps, a->host))) {
        cand.push_back(&j);
      }
    }
    std::stable_sort(cand.begin(), cand.end(), [](const JobRow* x, const JobRow* y) {
      if (x->job.priority() != y->job.priority()) return x->job.priority() > y->job.priority();
      return x->fair_rank < y->fair_rank;
    });
    if (static_cast<int>(cand.size()) > limit) cand.resize(limit);
    AgentView view;
    view.id = agent_id;
    view.name = a->name;
    if (eligible) {
      view.capabilities.assign(a->capabilities.begin(), a->capabilities.end());
      view.host = a->host;
    }
    Out out;
    size_t next_token = 0;
    for (JobRow* j : cand) {
      if (eligible && !eligible(JobFromRow(*j), view)) continue;
      j->job.set_state(pb::JOB_STATE_LEASED);
      j->job.set_attempt(j->job.attempt() + 1);
      j->lease_token = tokens[next_token++];
      j->lease_agent = agent_id;
      j->job.set_lease_owner(view.name);
      j->lease_expires_at = now + ttl;
      j->started_at = now;
      changes.insert(j->job.matrix_id());
      pb::JobLease l;
      *l.mutable_job() = JobFromRow(*j);
      *l.mutable_expires_at() = l.job().lease_expires_at();
      l.mutable_lease()->set_job_id(j->job.id());
      l.mutable_lease()->set_attempt(j->job.attempt());
      l.mutable_lease()->set_lease_token(*j->lease_token);
      out.push_back(std::move(l));
    }
    return out;
  });
}

absl::StatusOr<ReportOutcome> MemoryJobQueue::ReportResult(const pb::ReportResultRequest& req) {
  return db_->Write([&](Tables& t, Changes& changes) -> absl::StatusOr<ReportOutcome> {
    const pb::LeaseRef& l = req.lease();
    ReportOutcome out;
    JobRow* j = LeasedJob(t, l);
    if (j != nullptr && j->lease_agent != req.agent_id()) {
      return HeldByAnother(l.job_id(), j->lease_agent.value_or(0));
    }
    if (j != nullptr) {
      const absl::Time now = db_->Now();
      j->job.set_state(pb::JOB_STATE_SUCCEEDED);
      j->finished_at = now;
      j->lease_expires_at.reset();
      changes.insert(j->job.matrix_id());
      // ON CONFLICT (job_id, attempt) DO NOTHING.
      auto [it, inserted] = t.results.try_emplace({l.job_id(), l.attempt()});
      if (inserted) {
        ResultRow& r = it->second;
        r.matrix_id = j->job.matrix_id();
        r.agent_id = req.agent_id();
        auto agent = t.agents.find(req.agent_id());
        r.agent = agent == t.agents.end() ? "" : agent->second.name;
        JsonToSamples(SamplesToJson(req.samples()), &r.samples);
        r.raw_output = req.raw_output();
        r.raw_format = req.raw_format();
        JsonToHost(HostToJson(req.host()), &r.host);
        r.tool_version = req.tool_version();
        // Through the column's codec, as the pg store stores it.
        JsonToMonitors(MonitorsToJson(req.monitors()), &r.monitors);
        r.wall_time_ns = req.wall_time().seconds() * 1000000000 + req.wall_time().nanos();
        r.finished_at = now;
      }
      out.accepted = true;
      out.executor = j->job.executor();
      out.duration_seconds =
          j->started_at.has_value() ? absl::ToDoubleSeconds(now - *j->started_at) : 0;
      return out;
    }
    // Not the current lease: a retry of an accepted report, or stale.
    auto it = t.jobs.find(l.job_id());
    if (it == t.jobs.end())
      return absl::NotFoundError(absl::StrCat("job ", l.job_id(), " not found"));
    const JobRow& done = it->second;
    const bool same_lease =
        done.job.attempt() == l.attempt() && done.lease_token.value_or("") == l.lease_token();
    if (done.job.state() == pb::JOB_STATE_SUCCEEDED && same_lease &&
        done.lease_agent != req.agent_id()) {
      return HeldByAnother(l.job_id(), done.lease_agent.value_or(0));
    }
    if (done.job.state() == pb::JOB_STATE_SUCCEEDED && same_lease &&
        t.results.count({l.job_id(), l.attempt()}) != 0) {
      out.accepted = true;
      out.duplicate = true;
      return out;
    }
    return absl::FailedPreconditionError(
        absl::StrCat("stale lease for job ", l.job_id(), " attempt ", l.attempt(), ": job is ",
                     pb::JobState_Name(done.job.state()), " at attempt ", done.job.attempt()));
  });
}

absl::StatusOr<pb::JobState> MemoryJobQueue::ReportFailure(const pb::ReportFailureRequest& req,
                                                           const RetryPolicy& retry) {
  return db_->Write([&](Tables& t, Changes& changes) -> absl::StatusOr<pb::JobState> {
    const pb::LeaseRef& l = req.lease();
    JobRow* j = LeasedJob(t, l);
    if (j == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("stale lease for job ", l.job_id(), " attempt ", l.attempt()));
    }
    if (j->lease_agent != req.agent_id())
      return HeldByAnother(l.job_id(), j->lease_agent.value_or(0));
    const absl::Time now = db_->Now();
    pb::Job& job = j->job;
    const bool fail = !req.retryable() || job.attempt() >= job.max_attempts();
    job.set_state(fail ? pb::JOB_STATE_FAILED : pb::JOB_STATE_QUEUED);
    job.set_failure_reason(
        absl::StrCat("attempt ", job.attempt(), " of ", job.max_attempts(), ": ", req.reason()));
    if (fail) {
      j->finished_at = now;
    } else {
      j->finished_at.reset();
    }
    j->not_before = RetryAt(now, retry, job.attempt());
    j->lease_token.reset();
    j->lease_agent.reset();
    j->lease_expires_at.reset();
    changes.insert(job.matrix_id());
    return job.state();
  });
}

absl::StatusOr<int> MemoryJobQueue::ReleaseLeases(const pb::ReleaseLeasesRequest& req) {
  return db_->Write([&](Tables& t, Changes& changes) -> absl::StatusOr<int> {
    if (FindSession(t, req.agent_id(), req.session()) == nullptr) {
      return UnknownSession(req.agent_id());
    }
    const absl::Time now = db_->Now();
    int released = 0;
    for (const pb::LeaseRef& l : req.leases()) {
      JobRow* j = LeasedJob(t, l);
      if (j == nullptr || j->lease_agent != req.agent_id()) continue;
      // Back to queued without spending the attempt.
      j->job.set_state(pb::JOB_STATE_QUEUED);
      j->job.set_attempt(j->job.attempt() - 1);
      j->job.set_lease_owner("");
      j->lease_token.reset();
      j->lease_agent.reset();
      j->lease_expires_at.reset();
      j->not_before = now;
      j->started_at.reset();
      changes.insert(j->job.matrix_id());
      ++released;
    }
    return released;
  });
}

absl::StatusOr<ReapOutcome> MemoryJobQueue::ReapExpired(const RetryPolicy& retry, int limit) {
  return db_->Write([&](Tables& t, Changes& changes) -> absl::StatusOr<ReapOutcome> {
    const absl::Time now = db_->Now();
    std::vector<JobRow*> expired;
    for (auto& [id, j] : t.jobs) {
      if (j.job.state() == pb::JOB_STATE_LEASED && j.lease_expires_at.has_value() &&
          *j.lease_expires_at < now) {
        expired.push_back(&j);
      }
    }
    std::stable_sort(expired.begin(), expired.end(), [](const JobRow* x, const JobRow* y) {
      return *x->lease_expires_at < *y->lease_expires_at;
    });
    if (static_cast<int>(expired.size()) > limit) expired.resize(std::max(limit, 0));
    ReapOutcome out;
    for (JobRow* j : expired) {
      if (ExpireLease(*j, "lease expired", kHeldLeaseExpired, true, retry, now)) {
        out.unbooted.push_back({j->job.id(), j->job.attempt(), j->job.lease_owner()});
      }
      changes.insert(j->job.matrix_id());
      if (j->job.state() == pb::JOB_STATE_FAILED) {
        ++out.failed;
      } else {
        ++out.requeued;
      }
    }
    return out;
  });
}

absl::StatusOr<bool> MemoryJobQueue::AnnotateFailure(int64_t job_id, int32_t attempt,
                                                     const std::string& detail) {
  return db_->Write([&](Tables& t, Changes&) -> absl::StatusOr<bool> {
    auto it = t.jobs.find(job_id);
    if (it == t.jobs.end()) return false;
    pb::Job& job = it->second.job;
    if (job.attempt() != attempt ||
        (job.state() != pb::JOB_STATE_FAILED && job.state() != pb::JOB_STATE_QUEUED)) {
      return false;
    }
    job.set_failure_reason(absl::StrCat(job.failure_reason(), "\n", detail));
    return true;
  });
}

absl::StatusOr<std::array<int64_t, 6>> MemoryJobQueue::QueueCounts() {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<std::array<int64_t, 6>> {
    std::array<int64_t, 6> out{};
    for (const auto& [id, j] : t.jobs) {
      const int s = j.job.state();
      if (s >= 0 && s < 6) ++out[s];
    }
    return out;
  });
}

absl::StatusOr<std::map<int, int64_t>> MemoryJobQueue::QueuedByExecutor() {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<std::map<int, int64_t>> {
    std::map<int, int64_t> out;
    for (const auto& [id, j] : t.jobs) {
      if (j.job.state() == pb::JOB_STATE_QUEUED) ++out[j.job.executor()];
    }
    return out;
  });
}

absl::StatusOr<int64_t> MemoryJobQueue::CountConnectedAgents(absl::Duration liveness) {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<int64_t> {
    const absl::Time now = db_->Now();
    return static_cast<int64_t>(std::count_if(t.agents.begin(), t.agents.end(), [&](const auto& a) {
      return a.second.last_heartbeat > now - liveness;
    }));
  });
}

absl::StatusOr<std::vector<pb::Agent>> MemoryJobQueue::ListAgentsPage(absl::Duration liveness,
                                                                      const std::string& after_name,
                                                                      int limit) {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<std::vector<pb::Agent>> {
    const absl::Time now = db_->Now();
    // The page's rows first (names are unique), then only they are built.
    std::vector<std::pair<const std::string*, int64_t>> keys;
    for (const auto& [id, row] : t.agents) {
      if (row.name > after_name) keys.emplace_back(&row.name, id);
    }
    const size_t n = std::min(keys.size(), static_cast<size_t>(std::max(limit, 0)));
    std::partial_sort(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(n), keys.end(),
                      [](const auto& x, const auto& y) { return *x.first < *y.first; });
    keys.resize(n);
    std::vector<pb::Agent> out;
    for (const auto& [name, id] : keys) {
      const auto& row = t.agents.at(id);
      pb::Agent a;
      a.set_agent_id(id);
      a.set_name(row.name);
      *a.mutable_capabilities() = row.capabilities;
      *a.mutable_host() = row.host;
      *a.mutable_health() = row.health;
      a.set_slots(row.slots);
      int32_t running = 0;
      for (const auto& [job_id, j] : t.jobs) {
        if (j.job.state() == pb::JOB_STATE_LEASED && j.lease_agent == id) ++running;
      }
      a.set_running_jobs(running);
      a.set_connected(row.last_heartbeat > now - liveness);
      SetTime(row.last_heartbeat, a.mutable_last_heartbeat());
      SetTime(row.registered_at, a.mutable_registered_at());
      out.push_back(std::move(a));
    }
    return out;
  });
}

absl::StatusOr<std::string> MemoryJobQueue::AgentName(int64_t agent_id) {
  return db_->Read([&](const Tables& t) -> absl::StatusOr<std::string> {
    auto it = t.agents.find(agent_id);
    if (it == t.agents.end()) return absl::NotFoundError(absl::StrCat("unknown agent ", agent_id));
    return it->second.name;
  });
}

absl::Status MemoryJobQueue::UpdateCapabilities(int64_t agent_id, const std::string& session,
                                                const std::vector<pb::Capability>& capabilities) {
  return db_
      ->Write([&](Tables& t, Changes&) -> absl::StatusOr<bool> {
        if (FindSession(t, agent_id, session) == nullptr) return UnknownSession(agent_id);
        AgentRow& a = t.agents.at(agent_id);
        a.capabilities.Assign(capabilities.begin(), capabilities.end());
        const std::vector<int> executors = ExecutorsOf(a.capabilities);
        a.executors = std::set<int>(executors.begin(), executors.end());
        return true;
      })
      .status();
}

namespace {

// A queued job whose kernel build failed or was cancelled: its reason.
std::optional<std::string> FailedBuildReason(const Tables& t, const pb::Job& job) {
  if (job.waits_for_job() == 0) return std::nullopt;
  auto it = t.jobs.find(job.waits_for_job());
  if (it == t.jobs.end()) return std::nullopt;
  const pb::Job& build = it->second.job;
  if (build.state() == pb::JOB_STATE_FAILED) {
    return absl::StrCat("kernel build ", build.id(), " failed: ", build.failure_reason());
  }
  if (build.state() == pb::JOB_STATE_CANCELLED) {
    return absl::StrCat("kernel build ", build.id(), " was cancelled");
  }
  return std::nullopt;
}

// Since when a queued job could have been claimed: its creation, or its
// build's success; nullopt while its build has not succeeded.
std::optional<absl::Time> ClaimableSince(const Tables& t, const JobRow& j) {
  if (j.job.waits_for_job() == 0) return j.created_at;
  auto it = t.jobs.find(j.job.waits_for_job());
  if (it == t.jobs.end() || it->second.job.state() != pb::JOB_STATE_SUCCEEDED) return std::nullopt;
  return std::max(j.created_at, it->second.finished_at.value_or(j.created_at));
}

bool AnyAgentRuns(const Tables& t, const pb::Job& job) {
  for (const auto& [id, a] : t.agents) {
    if (a.executors.count(job.executor()) == 0 || !AgentHealthy(a.health)) continue;
    const std::vector<pb::Capability> caps(a.capabilities.begin(), a.capabilities.end());
    if (RealRunEligible(job, caps, a.host)) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<int64_t> MemoryJobQueue::FailBlockedJobs(absl::Duration unrunnable_after,
                                                        int limit) {
  return db_->Write([&](Tables& t, Changes& changes) -> absl::StatusOr<int64_t> {
    const absl::Time now = db_->Now();
    int after_build = 0, unrunnable = 0;
    for (auto& [id, j] : t.jobs) {
      if (j.job.state() != pb::JOB_STATE_QUEUED) continue;
      std::optional<std::string> reason;
      if (after_build < limit) reason = FailedBuildReason(t, j.job);
      if (reason.has_value()) {
        ++after_build;
      } else if (const std::optional<absl::Time> since = ClaimableSince(t, j);
                 unrunnable < limit && IsRealOrBuild(j.job.executor()) && since.has_value() &&
                 *since <= now - unrunnable_after && !AnyAgentRuns(t, j.job)) {
        reason = UnrunnableReason(j.job, now - *since);
        ++unrunnable;
      }
      if (!reason.has_value()) continue;
      j.job.set_state(pb::JOB_STATE_FAILED);
      j.job.set_failure_reason(*reason);
      j.finished_at = now;
      changes.insert(j.job.matrix_id());
    }
    return static_cast<int64_t>(after_build + unrunnable);
  });
}

}  // namespace farm::storage
