#include "lib/storage/row_codec.h"

#include <cmath>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

#include "google/protobuf/util/json_util.h"

#include "absl/strings/str_cat.h"
#include "proto/names.h"

namespace farm::storage {
namespace {
using json = nlohmann::json;

// Result rows are written on the report path, once per job: straight into a
// string, without building a JSON tree (which cost a std::map and its nodes
// per sample and was a fifth of the scheduler's CPU at 10,000 jobs/s). The
// text is UTF-8 (CheckStorableText runs before a report reaches a store), so
// only quotes, backslashes and control characters need escaping.
void AppendJsonString(std::string* out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  AppendEscaped(
      out, s, [](unsigned char c) { return c == '"' || c == '\\' || c < 0x20; },
      [](unsigned char c, std::string* o) {
        if (c < 0x20) {
          o->append("\\u00");
          o->push_back(kHex[c >> 4]);
          o->push_back(kHex[c & 0xF]);
        } else {
          o->push_back('\\');
          o->push_back(static_cast<char>(c));
        }
      });
  out->push_back('"');
}

// `"key":` after a comma unless it is the object's first member.
void AppendJsonKey(std::string* out, std::string_view key) {
  if (out->back() != '{') out->push_back(',');
  AppendJsonString(out, key);
  out->push_back(':');
}

void AppendMember(std::string* out, std::string_view key, std::string_view value) {
  AppendJsonKey(out, key);
  AppendJsonString(out, value);
}

void AppendMember(std::string* out, std::string_view key, int64_t value) {
  AppendJsonKey(out, key);
  out->append(std::to_string(value));
}

}  // namespace

void SetMicros(int64_t micros, google::protobuf::Timestamp* ts) {
  ts->set_seconds(micros / 1000000);
  ts->set_nanos(static_cast<int32_t>((micros % 1000000) * 1000));
}

void SetTime(absl::Time t, google::protobuf::Timestamp* ts) {
  SetMicros(absl::ToUnixMicros(t), ts);
}

std::string MapToJson(const google::protobuf::Map<std::string, std::string>& m) {
  json j = json::object();
  for (const auto& [k, v] : m) j[k] = v;
  return j.dump();
}

std::string CanonicalJsonObject(const std::string& text) {
  google::protobuf::Map<std::string, std::string> m;
  JsonToMap(text, &m);
  return MapToJson(m);
}

std::vector<double> JsonNumbers(const std::string& text) {
  std::vector<double> out;
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return out;
  for (const json& e : j) {
    if (e.is_number()) out.push_back(e.get<double>());
  }
  return out;
}

void JsonToMap(const std::string& text, google::protobuf::Map<std::string, std::string>* out) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return;
  for (auto it = j.begin(); it != j.end(); ++it) {
    (*out)[it.key()] = it->is_string() ? it->get<std::string>() : it->dump();
  }
}

std::string HostToJson(const pb::HostFacts& h) {
  std::string out = "{";
  AppendMember(&out, "hostname", h.hostname());
  AppendMember(&out, "kernel_release", h.kernel_release());
  AppendMember(&out, "cpus", h.cpus());
  AppendMember(&out, "numa_nodes", h.numa_nodes());
  AppendMember(&out, "iommu_mode", static_cast<int>(h.iommu_mode()));
  AppendMember(&out, "iommu_detail", h.iommu_detail());
  AppendMember(&out, "architecture", h.architecture());
  if (h.has_guest()) {
    const pb::GuestFacts& g = h.guest();
    AppendJsonKey(&out, "guest");
    out.push_back('{');
    AppendMember(&out, "provider", g.provider());
    AppendMember(&out, "requested_mode", static_cast<int>(g.requested_mode()));
    AppendMember(&out, "domain_type", g.domain_type());
    AppendMember(&out, "iommu_driver", g.iommu_driver());
    AppendMember(&out, "cmdline", g.cmdline());
    AppendMember(&out, "machine_model", g.machine_model());
    AppendMember(&out, "accel", g.accel());
    AppendMember(&out, "icount_shift", g.icount_shift());
    AppendMember(&out, "qemu_version", g.qemu_version());
    out.push_back('}');
  }
  if (h.has_hygiene()) {
    const pb::Hygiene& y = h.hygiene();
    AppendJsonKey(&out, "hygiene");
    out.push_back('{');
    AppendMember(&out, "governor", y.governor());
    AppendMember(&out, "turbo", y.turbo());
    AppendMember(&out, "smt", y.smt());
    AppendMember(&out, "cpus_allowed", y.cpus_allowed());
    AppendMember(&out, "mems_allowed", y.mems_allowed());
    AppendMember(&out, "governor_set", int64_t{y.governor_set() ? 1 : 0});
    // Only when set: the documents of hosts without it stay as they were
    // (result_hosts keeps one row per distinct document).
    if (!y.kernel_counters().empty()) AppendMember(&out, "kernel_counters", y.kernel_counters());
    out.push_back('}');
  }
  if (h.labels_size() > 0) {
    AppendJsonKey(&out, "labels");
    out.append(MapToJson(h.labels()));
  }
  if (h.has_inventory()) {
    // Nested lists of sysfs facts: protobuf's own JSON mapping, field names
    // as in the proto, so that it reads back whole.
    std::string inventory;
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = true;
    if (google::protobuf::util::MessageToJsonString(h.inventory(), &inventory, options).ok()) {
      AppendJsonKey(&out, "inventory");
      out.append(inventory);
    }
  }
  if (h.has_iommu_environment()) {
    std::string environment;
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = true;
    if (google::protobuf::util::MessageToJsonString(h.iommu_environment(), &environment, options)
            .ok()) {
      AppendJsonKey(&out, "iommu_environment");
      out.append(environment);
    }
  }
  out.push_back('}');
  return out;
}

void JsonToHost(const std::string& text, pb::HostFacts* h) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return;
  h->set_hostname(j.value("hostname", ""));
  h->set_kernel_release(j.value("kernel_release", ""));
  h->set_cpus(j.value("cpus", 0u));
  h->set_numa_nodes(j.value("numa_nodes", 0u));
  h->set_iommu_mode(static_cast<pb::IommuMode>(j.value("iommu_mode", 0)));
  h->set_iommu_detail(j.value("iommu_detail", ""));
  h->set_architecture(j.value("architecture", ""));
  auto guest = j.find("guest");
  if (guest != j.end() && guest->is_object()) {
    pb::GuestFacts* g = h->mutable_guest();
    g->set_provider(guest->value("provider", ""));
    g->set_requested_mode(static_cast<pb::IommuMode>(guest->value("requested_mode", 0)));
    g->set_domain_type(guest->value("domain_type", ""));
    g->set_iommu_driver(guest->value("iommu_driver", ""));
    g->set_cmdline(guest->value("cmdline", ""));
    g->set_machine_model(guest->value("machine_model", ""));
    g->set_accel(guest->value("accel", ""));
    g->set_icount_shift(guest->value("icount_shift", 0u));
    g->set_qemu_version(guest->value("qemu_version", ""));
  }
  auto hygiene = j.find("hygiene");
  if (hygiene != j.end() && hygiene->is_object()) {
    pb::Hygiene* y = h->mutable_hygiene();
    y->set_governor(hygiene->value("governor", ""));
    y->set_turbo(hygiene->value("turbo", ""));
    y->set_smt(hygiene->value("smt", ""));
    y->set_cpus_allowed(hygiene->value("cpus_allowed", ""));
    y->set_mems_allowed(hygiene->value("mems_allowed", ""));
    y->set_governor_set(hygiene->value("governor_set", 0) != 0);
    y->set_kernel_counters(hygiene->value("kernel_counters", ""));
  }
  auto labels = j.find("labels");
  if (labels != j.end() && labels->is_object()) JsonToMap(labels->dump(), h->mutable_labels());
  auto inventory = j.find("inventory");
  if (inventory != j.end() && inventory->is_object()) {
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = true;
    if (!google::protobuf::util::JsonStringToMessage(inventory->dump(), h->mutable_inventory(),
                                                     options)
             .ok()) {
      h->clear_inventory();
    }
  }
  auto environment = j.find("iommu_environment");
  if (environment != j.end() && environment->is_object()) {
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = true;
    if (!google::protobuf::util::JsonStringToMessage(environment->dump(),
                                                     h->mutable_iommu_environment(), options)
             .ok()) {
      h->clear_iommu_environment();
    }
  }
}

std::string ProgressToJson(const pb::JobProgress& progress) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(progress, &out, options).ok()) return "{}";
  return out;
}

bool JsonToProgress(const std::string& text, pb::JobProgress* progress) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  if (google::protobuf::util::JsonStringToMessage(text, progress, options).ok()) return true;
  progress->Clear();
  return false;
}

std::string HealthToJson(const pb::AgentHealth& health) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(health, &out, options).ok()) return "{}";
  return out;
}

void JsonToHealth(const std::string& text, pb::AgentHealth* health) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(text, health, options).ok()) health->Clear();
}

std::string SamplesToJson(const google::protobuf::RepeatedPtrField<pb::Sample>& samples) {
  std::string out = "[";
  for (const pb::Sample& s : samples) {
    if (out.size() > 1) out.push_back(',');
    out.push_back('{');
    AppendMember(&out, "metric", s.metric());
    // An empty unit or phase is left out (readers take absent as empty):
    // most samples have no phase, and its key cost each about 13 bytes of
    // jsonb (bench/store_scale).
    if (!s.unit().empty()) AppendMember(&out, "unit", s.unit());
    if (!s.phase().empty()) AppendMember(&out, "phase", s.phase());
    // JSON has no NaN/Inf; keep them as strings so nothing is lost.
    if (std::isfinite(s.value())) {
      AppendJsonKey(&out, "value");
      out.append(json(s.value()).dump());  // shortest text that reads back exactly
    } else {
      AppendMember(&out, "value", std::to_string(s.value()));
    }
    if (s.intervals_size() > 0) {
      // The run's figure per interval; a non-finite one (no JSON number) as null.
      json intervals = json::array();
      for (double v : s.intervals()) intervals.push_back(std::isfinite(v) ? json(v) : json());
      AppendJsonKey(&out, "intervals");
      out.append(intervals.dump());
      AppendJsonKey(&out, "interval_seconds");
      out.append(json(s.interval_seconds()).dump());
    }
    out.push_back('}');
  }
  out.push_back(']');
  return out;
}

void JsonToSamples(const std::string& text, google::protobuf::RepeatedPtrField<pb::Sample>* out) {
  json arr = json::parse(text, nullptr, false);
  if (!arr.is_array()) return;
  for (const json& e : arr) {
    pb::Sample* s = out->Add();
    s->set_metric(e.value("metric", ""));
    s->set_unit(e.value("unit", ""));
    s->set_phase(e.value("phase", ""));
    if (auto iv = e.find("intervals"); iv != e.end() && iv->is_array()) {
      for (const json& x : *iv) {
        s->add_intervals(x.is_number() ? x.get<double>() : std::nan(""));
      }
      s->set_interval_seconds(e.value("interval_seconds", 0.0));
    }
    auto v = e.find("value");
    if (v != e.end()) {
      if (v->is_number()) {
        s->set_value(v->get<double>());
      } else if (v->is_string()) {
        s->set_value(std::strtod(v->get<std::string>().c_str(), nullptr));
      }
    }
  }
}

std::string CapsToJson(const google::protobuf::RepeatedPtrField<pb::Capability>& caps) {
  json arr = json::array();
  for (const pb::Capability& c : caps) {
    json e = {{"name", c.name()}, {"version", c.version()}};
    // Only real executors carry offers; the claim rule reads them
    // (lib/storage/run_eligibility.h): [{provider, release, commit, modes: [IommuMode], ...}].
    if (c.kernels_size() > 0) {
      json kernels = json::array();
      for (const pb::KernelOffer& k : c.kernels()) {
        json modes = json::array();
        for (int m : k.modes()) modes.push_back(m);
        kernels.push_back({{"provider", k.provider()},
                           {"release", k.release()},
                           {"modes", modes},
                           {"architecture", k.architecture()},
                           {"machine_model", k.machine_model()},
                           {"accel", k.accel()},
                           {"commit", k.commit()},
                           {"kernel_config", k.kernel_config()}});
      }
      e["kernels"] = std::move(kernels);
    }
    // kbuild's offers, read by the claim rule: [{catalog, tree, architectures: [..]}].
    if (c.builds_size() > 0) {
      json builds = json::array();
      for (const pb::BuildOffer& b : c.builds()) {
        builds.push_back(
            {{"catalog", b.catalog()},
             {"tree", b.tree()},
             {"architectures",
              json(std::vector<std::string>(b.architectures().begin(), b.architectures().end()))}});
      }
      e["builds"] = std::move(builds);
    }
    arr.push_back(std::move(e));
  }
  return arr.dump();
}

void JsonToCaps(const std::string& text, google::protobuf::RepeatedPtrField<pb::Capability>* out) {
  json arr = json::parse(text, nullptr, false);
  if (!arr.is_array()) return;
  for (const json& e : arr) {
    pb::Capability* c = out->Add();
    c->set_name(e.value("name", ""));
    c->set_version(e.value("version", ""));
    auto builds = e.find("builds");
    if (builds != e.end() && builds->is_array()) {
      for (const json& b : *builds) {
        if (!b.is_object()) continue;
        pb::BuildOffer* o = c->add_builds();
        o->set_catalog(b.value("catalog", ""));
        o->set_tree(b.value("tree", ""));
        auto arches = b.find("architectures");
        if (arches == b.end() || !arches->is_array()) continue;
        for (const json& a : *arches) {
          if (a.is_string()) o->add_architectures(a.get<std::string>());
        }
      }
    }
    auto kernels = e.find("kernels");
    if (kernels == e.end() || !kernels->is_array()) continue;
    for (const json& k : *kernels) {
      if (!k.is_object()) continue;
      pb::KernelOffer* o = c->add_kernels();
      o->set_provider(k.value("provider", ""));
      o->set_release(k.value("release", ""));
      auto modes = k.find("modes");
      if (modes != k.end() && modes->is_array()) {
        for (const json& m : *modes) {
          if (m.is_number_integer()) o->add_modes(static_cast<pb::IommuMode>(m.get<int>()));
        }
      }
      o->set_architecture(k.value("architecture", ""));
      o->set_machine_model(k.value("machine_model", ""));
      o->set_accel(k.value("accel", ""));
      o->set_commit(k.value("commit", ""));
      o->set_kernel_config(k.value("kernel_config", ""));
    }
  }
}

std::vector<int> ExecutorsOf(const google::protobuf::RepeatedPtrField<pb::Capability>& caps) {
  std::set<int> out;
  for (const pb::Capability& c : caps) {
    const pb::Executor e = ::farm::proto::ExecutorFromName(c.name());
    if (e != pb::EXECUTOR_UNSPECIFIED) out.insert(e);
  }
  return {out.begin(), out.end()};
}

std::string PerModeToJson(const google::protobuf::RepeatedPtrField<pb::ModeEffect>& modes) {
  json arr = json::array();
  for (const pb::ModeEffect& m : modes) {
    arr.push_back({{"mode", static_cast<int>(m.mode())},
                   {"before", m.before()},
                   {"after", m.after()},
                   {"relative_change", m.relative_change()},
                   {"p_value", m.p_value()}});
  }
  return arr.dump();
}

void JsonToPerMode(const std::string& text, pb::Regression* g) {
  json arr = json::parse(text, nullptr, false);
  if (!arr.is_array()) return;
  for (const json& e : arr) {
    pb::ModeEffect* m = g->add_per_mode();
    m->set_mode(static_cast<pb::IommuMode>(e.value("mode", 0)));
    m->set_before(e.value("before", 0.0));
    m->set_after(e.value("after", 0.0));
    m->set_relative_change(e.value("relative_change", 0.0));
    m->set_p_value(e.value("p_value", 1.0));
  }
}

void JsonToPrimaryMetrics(const std::string& text, pb::Regression* g) {
  json metrics = json::parse(text, nullptr, false);
  if (!metrics.is_array()) return;
  for (const json& m : metrics) {
    if (m.is_string()) g->add_primary_metrics(m.get<std::string>());
  }
}

void DeriveMatrixState(bool cancelled, int64_t finished_micros, pb::Matrix* m) {
  const pb::MatrixCounts& c = m->counts();
  const bool terminal = c.queued() + c.leased() == 0;
  if (!terminal) {
    m->set_state(pb::MATRIX_STATE_RUNNING);
  } else if (cancelled) {
    m->set_state(pb::MATRIX_STATE_CANCELLED);
  } else if (c.failed() > 0) {
    m->set_state(pb::MATRIX_STATE_FAILED);
  } else {
    m->set_state(pb::MATRIX_STATE_COMPLETED);
  }
  if (terminal && finished_micros != 0) SetMicros(finished_micros, m->mutable_finished_at());
}

std::string AnalysedMarkerJson(size_t findings, const std::vector<std::string>& skipped_series) {
  nlohmann::json j = {{"findings", findings}};
  if (!skipped_series.empty()) j["skipped_series"] = skipped_series;
  // Invalid UTF-8 in a reason (a metric name is the user's) is replaced,
  // never refused: the marker must be written for the matrix to be done.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string FailedMarkerJson(const std::string& reason) {
  return nlohmann::json{{"failed", reason}}.dump(-1, ' ', false,
                                                 nlohmann::json::error_handler_t::replace);
}

std::string AnalysisSummary(const std::string& marker_json) {
  const nlohmann::json j = nlohmann::json::parse(marker_json, nullptr, false);
  if (!j.is_object()) return "";
  if (auto f = j.find("failed"); f != j.end() && f->is_string())
    return "failed: " + f->get<std::string>();
  auto n = j.find("findings");
  if (n == j.end() || !n->is_number_unsigned()) return "";
  std::string out =
      absl::StrCat(n->get<uint64_t>(), n->get<uint64_t>() == 1 ? " finding" : " findings");
  auto s = j.find("skipped_series");
  if (s != j.end() && s->is_array() && !s->empty()) {
    absl::StrAppend(&out, "; ", s->size(), " series skipped");
    if ((*s)[0].is_string()) absl::StrAppend(&out, ": ", (*s)[0].get<std::string>());
    if (s->size() > 1) absl::StrAppend(&out, " (and ", s->size() - 1, " more)");
  }
  return out;
}

std::string MonitorsToJson(const pb::Monitors& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(m, &out, opts).ok() || out.empty()) return "{}";
  return out;
}

void JsonToMonitors(const std::string& text, pb::Monitors* m) {
  m->Clear();
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(text, m, opts).ok()) m->Clear();
}

}  // namespace farm::storage
