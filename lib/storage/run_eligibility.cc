#include "lib/storage/run_eligibility.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/kernel_config.h"
#include "proto/kernel_offers.h"
#include "proto/labels.h"
#include "proto/names.h"

namespace farm::storage {

namespace pb = ::iommufarm::v1;

const char* const kJobParamsSql =
    "(CASE WHEN j.workload_index < 0 THEN j.params ELSE coalesce((SELECT mw.params "
    "FROM matrix_workloads mw WHERE mw.matrix_id = j.matrix_id "
    "AND mw.workload_index = j.workload_index), '{}'::jsonb) END)";

const char* const kBuildDoneSql =
    "j.waits_for = 0 OR EXISTS (SELECT 1 FROM jobs b WHERE b.id = j.waits_for AND b.state = 3)";

const char* const kAgentHealthySql =
    "NOT (coalesce((health->>'checked')::boolean, false) "
    "AND NOT coalesce((health->>'ok')::boolean, false))";

namespace {

// OfferRuns's platform clause over an offer `k`: a job on a VM platform runs
// only on a "vm" offer of that platform's machine model. Built from
// VmPlatforms() so that the SQL and the C++ rule name the same platforms.
std::string VmPlatformOfferSql() {
  std::string sql = "(CASE j.platform";
  for (const ::farm::proto::VmPlatform& p : ::farm::proto::VmPlatforms()) {
    absl::StrAppend(&sql, " WHEN '", std::string(p.name), "' THEN k->>'provider' = 'vm' AND ",
                    "coalesce(k->>'machine_model', '') = '", std::string(p.machine_model), "'");
  }
  return sql + " ELSE true END)";
}

// OfferRuns's config clause over an offer `k` (proto/kernel_config.h): a
// host offer only for a job of the default config; any other only when its
// kernel_config is JobBuildConfigId (the job's param kernel_config, with
// "+host" on a host platform when it is not the default's, then
// "+dma-map-bench" for a dma-map-bench job, or "dma-map-bench" alone).
std::string KernelConfigOfferSql() {
  const std::string id =
      absl::StrCat("coalesce(", kJobParamsSql, "->>'", ::farm::proto::kKernelConfigParam, "', '')");
  std::string vm_platforms;
  for (const ::farm::proto::VmPlatform& p : ::farm::proto::VmPlatforms()) {
    absl::StrAppend(&vm_platforms, vm_platforms.empty() ? "" : ", ", "'", std::string(p.name), "'");
  }
  return absl::StrCat("(CASE WHEN k->>'provider' = 'host' THEN ", id,
                      " = '' ELSE coalesce(k->>'kernel_config', '') = ", id, " || (CASE WHEN ", id,
                      " <> '' AND j.platform NOT IN (", vm_platforms, ") THEN '+host' ELSE '' END)",
                      " || (CASE WHEN j.executor <> 5 THEN '' WHEN ", id,
                      " = '' THEN 'dma-map-bench' ELSE '+dma-map-bench' END) END)");
}

// The agent half of the rule (AgentLabelsHold): the job's labels (its
// matrix's, matrices.labels) held by the agent's, and on a host platform the
// agent's "platform" label equal to the job's.
std::string AgentLabelsSql() {
  std::string vm_platforms;
  for (const ::farm::proto::VmPlatform& p : ::farm::proto::VmPlatforms()) {
    absl::StrAppend(&vm_platforms, vm_platforms.empty() ? "" : ", ", "'", std::string(p.name), "'");
  }
  return absl::StrCat(
      "(coalesce(ah->'labels', '{}'::jsonb) @> coalesce((SELECT jm.labels FROM matrices jm "
      "WHERE jm.id = j.matrix_id), '{}'::jsonb) AND (j.platform IN (",
      vm_platforms, ") OR coalesce(ah->'labels'->>'", ::farm::proto::kPlatformLabel,
      "', '') = j.platform))");
}

// OfferRuns's accelerator clause over an offer `k`: a job whose params name
// one (the spec's accel) runs only on an offer under it.
std::string AccelOfferSql() {
  const std::string param = absl::StrCat(kJobParamsSql, "->>'", ::farm::proto::kAccelParam, "'");
  return absl::StrCat("(", param, " IS NULL OR coalesce(k->>'accel', '') = ", param, ")");
}

}  // namespace

// CheckRealRun in SQL over a jobs row `j`, the agent's host facts `ah` and
// capabilities `ac` (row_codec.h's HostToJson / CapsToJson). Clause by
// clause, as proto/kernel_offers.h states the rule: the offers of the
// capability named like the executor, or the implicit host offer (host
// release, detected mode) when it lists none; an offer holding the job's
// mode; no host offer for a job with kernel_params; on a VM platform, a vm
// offer of its machine model (VmPlatformOfferSql); with an accel param, an
// offer under that accelerator (AccelOfferSql); and the offer's commit
// equal to the job's (a kernel store's build) or KernelMatches: the
// id with a leading "v<digit>" dropped equals the release or prefixes it
// before '.', '-' or '+', or a 7+ digit hex id appears as "g<first 12
// digits>" not followed by another hex digit.
// clang-format off
const std::string kRunnableSql = std::string(
    // A build job: a kbuild capability building the job's catalog for its
    // architecture (the job's platform), BuildOfferRuns.
    "(j.executor <> 4 OR EXISTS (SELECT 1 FROM jsonb_array_elements(ac) c, "
    " LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(c->'builds') = 'array' "
    "   THEN c->'builds' ELSE '[]'::jsonb END) b "
    " WHERE c->>'name' = 'kbuild' AND b->>'catalog' = j.catalog "
    "  AND jsonb_typeof(b->'architectures') = 'array' AND b->'architectures' ? j.platform)) "
    "AND (j.executor NOT IN (2, 3, 5) OR ") + AgentLabelsSql() + std::string(" AND EXISTS ("
    "SELECT 1 FROM jsonb_array_elements(ac) c, "
    " LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(c->'kernels') = 'array' "
    "   AND jsonb_array_length(c->'kernels') > 0 THEN c->'kernels' "
    "   ELSE jsonb_build_array(jsonb_build_object('provider', 'host', "
    "     'release', coalesce(ah->>'kernel_release', ''), "
    "     'modes', CASE WHEN coalesce((ah->>'iommu_mode')::int, 0) <> 0 "
    "       THEN jsonb_build_array((ah->>'iommu_mode')::int) ELSE '[]'::jsonb END)) END) k "
    " WHERE c->>'name' = (CASE j.executor WHEN 2 THEN 'fio' WHEN 3 THEN 'iozone' "
    "   ELSE 'dma-map-bench' END) "
    "  AND jsonb_typeof(k->'modes') = 'array' AND k->'modes' @> to_jsonb(j.mode::int) "
    "  AND NOT (k->>'provider' = 'host' AND ") + kJobParamsSql + std::string(" ? 'kernel_params') "
    "  AND ") + KernelConfigOfferSql() + std::string(" "
    "  AND ") + AccelOfferSql() + std::string(" "
    "  AND ") + VmPlatformOfferSql() + std::string(" "
    "  AND j.commit_id <> '' "
    "  AND (coalesce(k->>'commit', '') = j.commit_id OR coalesce(k->>'release', '') <> '' "
    "  AND (k->>'release' = j.commit_id"
    "   OR k->>'release' = regexp_replace(j.commit_id, '^[vV]([0-9])', '\\1')"
    "   OR (left(k->>'release', length(regexp_replace(j.commit_id, '^[vV]([0-9])', '\\1'))) "
    "     = regexp_replace(j.commit_id, '^[vV]([0-9])', '\\1')"
    "    AND substr(k->>'release', length(regexp_replace(j.commit_id, '^[vV]([0-9])', '\\1')) "
    "     + 1, 1) IN ('.', '-', '+'))"
    // CASE, not AND: the pattern is built from the id, so it must only be
    // compiled once the id is known to be hex.
    "   OR CASE WHEN j.commit_id ~ '^[0-9a-fA-F]{7,}$' THEN lower(k->>'release') ~ "
    "('g' || left(lower(j.commit_id), 12) || '([^0-9a-f]|$)') ELSE false END))))");
// clang-format on

absl::Status CheckRealRunHost(const pb::Job& job, const pb::HostFacts& host) {
  if (!::farm::proto::IsRealExecutor(job.executor())) return absl::OkStatus();
  if (host.iommu_mode() == pb::IOMMU_MODE_UNSPECIFIED) {
    return absl::FailedPreconditionError(
        "host's IOMMU mode is unknown; real runs need a detected mode");
  }
  if (job.mode() != host.iommu_mode()) {
    return absl::FailedPreconditionError(
        absl::StrCat("host runs IOMMU mode ", ::farm::proto::ModeName(host.iommu_mode()),
                     ", the cell wants ", ::farm::proto::ModeName(job.mode())));
  }
  if (!KernelMatches(job.commit_id(), host.kernel_release())) {
    return absl::FailedPreconditionError(absl::StrCat("host runs kernel ", host.kernel_release(),
                                                      ", the cell wants ", job.commit_id()));
  }
  return absl::OkStatus();
}

absl::Status AgentLabelsHold(const pb::Job& job, const pb::HostFacts& host) {
  const std::vector<std::string> missing =
      ::farm::proto::MissingLabels(host.labels(), job.labels());
  if (!missing.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the agent lacks the labels ", absl::StrJoin(missing, ",")));
  }
  if (::farm::proto::FindVmPlatform(job.platform()) != nullptr) return absl::OkStatus();
  auto it = host.labels().find(::farm::proto::kPlatformLabel);
  const std::string platform = it == host.labels().end() ? "" : it->second;
  if (platform != job.platform()) {
    return absl::FailedPreconditionError(absl::StrCat("the agent is platform '", platform,
                                                      "', the cell wants '", job.platform(), "'"));
  }
  return absl::OkStatus();
}

absl::Status CheckRealRun(const pb::Job& job, const std::vector<pb::Capability>& capabilities,
                          const pb::HostFacts& host) {
  if (job.executor() == pb::EXECUTOR_KBUILD) {
    if (::farm::proto::BuildOfferRuns(capabilities, job)) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("no kbuild offer builds catalog ", job.catalog(), " for ", job.platform()));
  }
  if (!::farm::proto::IsRealExecutor(job.executor())) return absl::OkStatus();
  if (absl::Status st = AgentLabelsHold(job, host); !st.ok()) return st;
  const std::vector<pb::KernelOffer> offers =
      ::farm::proto::OffersFor(capabilities, job.executor(), host);
  if (::farm::proto::FindOffer(offers, job) != nullptr) return absl::OkStatus();
  std::vector<std::string> offered;
  for (const pb::KernelOffer& o : offers) {
    std::vector<std::string> modes;
    for (int m : o.modes()) modes.push_back(::farm::proto::ModeName(m));
    offered.push_back(absl::StrCat(o.provider(), " ", o.release(),
                                   o.accel().empty() ? "" : absl::StrCat(" ", o.accel()), " [",
                                   absl::StrJoin(modes, ","), "]"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "no kernel offer runs ", job.commit_id(), " in mode ", ::farm::proto::ModeName(job.mode()),
      " (offered: ", offered.empty() ? "none" : absl::StrJoin(offered, "; "), ")"));
}

std::string UnrunnableReason(const pb::Job& job, absl::Duration waited) {
  const std::string wait = absl::FormatDuration(absl::Trunc(waited, absl::Seconds(1)));
  if (job.executor() == pb::EXECUTOR_KBUILD) {
    return absl::StrCat("no agent builds catalog ", job.catalog(), " for ", job.platform(),
                        " (start one with --kbuild-tree ", job.catalog(), "=TREE); waited ", wait);
  }
  std::string labels;
  if (job.labels_size() > 0) {
    labels = absl::StrCat(" with labels ", ::farm::proto::LabelsText(job.labels()));
  }
  std::string accel;
  if (auto a = job.workload().params().find(::farm::proto::kAccelParam);
      a != job.workload().params().end()) {
    accel = absl::StrCat(" (accel ", a->second, ")");
  }
  return absl::StrCat("no agent", labels, " offers kernel ", job.commit_id(), " for ",
                      job.platform(), accel, " in mode ", ::farm::proto::ModeName(job.mode()),
                      " under ", ::farm::proto::ExecutorName(job.executor()),
                      ", and none builds it; waited ", wait);
}

}  // namespace farm::storage
