#include "services/analyzer/bisect_state.h"

#include <exception>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "proto/names.h"

namespace farm::analyzer {
namespace {

namespace pb = ::iommufarm::v1;
using json = nlohmann::json;

json SeriesToJson(const SeriesSpec& s) {
  json j = {{"catalog", s.catalog},
            {"platform", s.platform},
            {"workload", s.workload},
            {"params", json::parse(s.params_json, nullptr, false)},
            {"model_set", json::parse(s.model_set_json, nullptr, false)},
            {"executor", static_cast<int>(s.executor)},
            {"metric", s.metric},
            {"phase", s.phase},
            {"mode", s.mode},
            {"overhead", s.overhead}};
  // Written only when there are some: a stored state without labels reads
  // and writes back key for key.
  json labels = json::parse(s.labels_json, nullptr, false);
  if (labels.is_object() && !labels.empty()) j["labels"] = std::move(labels);
  if (!s.kernel_config.empty()) j["kernel_config"] = s.kernel_config;
  return j;
}

SeriesSpec SeriesFromJson(const json& j) {
  SeriesSpec s;
  s.catalog = j.at("catalog").get<std::string>();
  s.platform = j.at("platform").get<std::string>();
  s.workload = j.at("workload").get<std::string>();
  s.params_json = j.at("params").dump();
  s.model_set_json = j.at("model_set").dump();
  // A series without labels is stored without the key.
  s.labels_json = j.value("labels", json::object()).dump();
  s.kernel_config = j.value("kernel_config", "");
  s.executor = ExecutorFromNumber(j.at("executor").get<int>());
  s.metric = j.at("metric").get<std::string>();
  s.phase = j.at("phase").get<std::string>();
  s.mode = j.at("mode").get<std::string>();
  s.overhead = j.at("overhead").get<bool>();
  return s;
}

json RealConfirmToJson(const RealConfirm& c) {
  return {{"executor", static_cast<int>(c.executor)},
          {"workload", c.workload},
          {"params", json::parse(c.params_json, nullptr, false)},
          {"catalog", c.catalog},
          {"platform", c.platform},
          {"repeats", c.repeats},
          {"max_repeats", c.max_repeats},
          {"metric", c.metric},
          {"phase", c.phase}};
}

RealConfirm RealConfirmFromJson(const json& j) {
  RealConfirm c;
  c.executor = ExecutorFromNumber(j.at("executor").get<int>());
  c.workload = j.at("workload").get<std::string>();
  c.params_json = j.at("params").dump();
  c.catalog = j.at("catalog").get<std::string>();
  c.platform = j.at("platform").get<std::string>();
  c.repeats = j.at("repeats").get<int>();
  c.max_repeats = j.at("max_repeats").get<int>();
  c.metric = j.at("metric").get<std::string>();
  c.phase = j.at("phase").get<std::string>();
  return c;
}

json CommitToJson(const CommitRef& c) { return {{"index", c.index}, {"id", c.id}}; }

CommitRef CommitFromJson(const json& j) {
  return CommitRef{j.at("index").get<int>(), j.at("id").get<std::string>()};
}

const char* PhaseName(BisectPhase p) {
  switch (p) {
    case BisectPhase::kConfirm:
      return "confirm";
    case BisectPhase::kBisect:
      return "bisect";
    case BisectPhase::kWait:
      return "wait";
    case BisectPhase::kDone:
      return "done";
  }
  return "done";
}

// An unknown phase has nothing left to drive.
BisectPhase PhaseFromName(const std::string& name) {
  if (name == "confirm") return BisectPhase::kConfirm;
  if (name == "bisect") return BisectPhase::kBisect;
  if (name == "wait") return BisectPhase::kWait;
  return BisectPhase::kDone;
}

json StepMatrixToJson(const std::map<int, int64_t>& steps) {
  json out = json::object();
  for (const auto& [step, matrix] : steps) out[std::to_string(step)] = matrix;
  return out;
}

std::map<int, int64_t> StepMatrixFromJson(const json& j) {
  std::map<int, int64_t> out;
  for (const auto& [step, matrix] : j.items()) out[std::stoi(step)] = matrix.get<int64_t>();
  return out;
}

// The keys only some phases write.
void OptionalKeysToJson(const BisectState& s, json& j) {
  if (s.real_confirm.has_value()) j["real_confirm"] = RealConfirmToJson(*s.real_confirm);
  if (s.confirm_by != pb::EXECUTOR_UNSPECIFIED) {
    j["confirm_by"] = ExecutorName(s.confirm_by);
    j["confirm_note"] = s.confirm_note;
  }
  if (s.confirm_series.has_value()) j["confirm_series"] = SeriesToJson(*s.confirm_series);
  if (!s.confirm_kernels.empty()) j["confirm_kernels"] = s.confirm_kernels;
  if (s.bisect_series.has_value()) j["bisect_series"] = SeriesToJson(*s.bisect_series);
  if (s.confirm_round != 0) j["confirm_round"] = s.confirm_round;
  if (!s.planner_json.empty()) j["planner"] = json::parse(s.planner_json);
  if (!s.culprit_subjects.empty()) j["culprit_subjects"] = s.culprit_subjects;
  if (s.categorical()) {
    j["mode_before"] = s.mode_before;
    j["mode_after"] = s.mode_after;
  }
}

void OptionalKeysFromJson(const json& j, BisectState& s) {
  if (j.contains("real_confirm")) s.real_confirm = RealConfirmFromJson(j.at("real_confirm"));
  if (j.contains("confirm_by")) {
    s.confirm_by = proto::ExecutorFromName(j.at("confirm_by").get<std::string>());
  }
  s.confirm_note = j.value("confirm_note", "");
  if (j.contains("confirm_series")) s.confirm_series = SeriesFromJson(j.at("confirm_series"));
  s.confirm_kernels = j.value("confirm_kernels", "");
  if (j.contains("bisect_series")) s.bisect_series = SeriesFromJson(j.at("bisect_series"));
  s.confirm_round = j.value("confirm_round", 0);
  if (j.contains("planner")) s.planner_json = j.at("planner").dump();
  if (j.contains("culprit_subjects")) {
    s.culprit_subjects = j.at("culprit_subjects").get<std::map<std::string, std::string>>();
  }
  s.mode_before = j.value("mode_before", "");
  s.mode_after = j.value("mode_after", "");
}

}  // namespace

std::string BisectStateToJson(const BisectState& s) {
  json j = {{"series", SeriesToJson(s.series)},
            {"regression", s.regression},
            {"expected_change", s.expected_change},
            {"last_good", CommitToJson(s.last_good)},
            {"first_bad", CommitToJson(s.first_bad)},
            {"do_bisect", s.do_bisect},
            {"metric_rank", s.metric_rank},
            {"primary_metrics", s.primary_metrics},
            {"phase", PhaseName(s.phase)},
            {"seq", s.seq},
            {"confirm_matrices", s.confirm_matrices},
            {"pending_matrices", s.pending_matrices},
            {"pending_index", s.pending_index},
            {"empty_rounds", s.empty_rounds},
            {"step_matrix", StepMatrixToJson(s.step_matrix)}};
  OptionalKeysToJson(s, j);
  return j.dump();
}

absl::StatusOr<BisectState> BisectStateFromJson(std::string_view text) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::InternalError("unreadable state");
  try {
    BisectState s;
    s.series = SeriesFromJson(j.at("series"));
    s.regression = j.value("regression", true);
    s.expected_change = j.at("expected_change").get<double>();
    s.last_good = CommitFromJson(j.at("last_good"));
    s.first_bad = CommitFromJson(j.at("first_bad"));
    s.do_bisect = j.at("do_bisect").get<bool>();
    s.metric_rank = j.value("metric_rank", "primary");
    s.primary_metrics = j.value("primary_metrics", std::vector<std::string>{});
    s.phase = PhaseFromName(j.at("phase").get<std::string>());
    s.seq = j.at("seq").get<int>();
    s.confirm_matrices = j.value("confirm_matrices", std::vector<int64_t>{});
    s.pending_matrices = j.value("pending_matrices", std::vector<int64_t>{});
    s.pending_index = j.value("pending_index", -1);
    s.empty_rounds = j.value("empty_rounds", 0);
    if (j.contains("step_matrix")) s.step_matrix = StepMatrixFromJson(j.at("step_matrix"));
    OptionalKeysFromJson(j, s);
    return s;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("bad state: ", e.what()));
  }
}

}  // namespace farm::analyzer
