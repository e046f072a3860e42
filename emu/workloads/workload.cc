#include "emu/workloads/workload.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/base/check.h"

namespace farm::emu {

RunNoise RunNoise::Draw(uint64_t seed, double cv) {
  RunNoise n;
  if (cv <= 0) return n;
  Rng r(seed ^ 0x776f726bULL);
  auto draw = [&] { return std::clamp(1.0 + cv * r.Normal(), 0.5, 1.5); };
  n.cpu = draw();
  n.device = draw();
  n.turnaround = draw();
  return n;
}

void IntervalCounter::Reset(Time end) {
  interval_ = std::max<Time>(1, end / kReportIntervals);
  counts_.assign(kReportIntervals, 0);
}

void IntervalCounter::Add(Time t, uint64_t n) {
  if (counts_.empty()) return;
  const Time i = std::clamp<Time>(t / interval_, 0, kReportIntervals - 1);
  counts_[static_cast<size_t>(i)] += n;
}

std::vector<double> IntervalCounter::PerSecond() const {
  std::vector<double> out;
  out.reserve(counts_.size());
  for (uint64_t c : counts_) {
    out.push_back(static_cast<double>(c) * kNsPerSec / static_cast<double>(interval_));
  }
  return out;
}

Time RunNoise::Scale(Time t, double k) {
  if (k == 1.0 || t == 0) return t;
  return std::max<Time>(1, static_cast<Time>(std::llround(static_cast<double>(t) * k)));
}

absl::StatusOr<uint64_t> ParseSize(const std::string& text) {
  std::string t = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (t.empty()) return absl::InvalidArgumentError("empty size");
  uint64_t mult = 1;
  char last = t.back();
  if (last == 'b' && t.size() > 1 && std::isalpha(static_cast<unsigned char>(t[t.size() - 2]))) {
    t.pop_back();  // "256kb" -> "256k"
    last = t.back();
  }
  if (last == 'k') mult = 1ULL << 10;
  if (last == 'm') mult = 1ULL << 20;
  if (last == 'g') mult = 1ULL << 30;
  if (last == 't') mult = 1ULL << 40;
  if (mult != 1) t.pop_back();
  uint64_t v = 0;
  if (!absl::SimpleAtoi(t, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is not a size (e.g. 4k, 256k, 1g)"));
  }
  return v * mult;
}

// ---- WorkloadParams

WorkloadParams::WorkloadParams(const WorkloadInfo& info, std::map<std::string, std::string> values)
    : info_(&info), values_(std::move(values)), parsed_(info.params.size()) {}

absl::Status WorkloadParams::Bad(const WorkloadParam& p, const std::string& value,
                                 const std::string& parameter_why,
                                 const std::string& dash_why) const {
  if (info_->style == ParamStyle::kParameter) {
    return absl::InvalidArgumentError(absl::StrCat("parameter ", p.name, ": ", parameter_why));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(info_->name, ": --param ", p.name, "=", value, ": ", dash_why));
}

absl::Status WorkloadParams::Validate(const Platform* platform) {
  valid_ = false;
  for (size_t i = 0; i < info_->params.size(); ++i) {
    const WorkloadParam& p = info_->params[i];
    auto it = values_.find(std::string(p.name));
    const std::string& given = it == values_.end() ? std::string() : it->second;
    Parsed& out = parsed_[i];
    out.text = given;
    if (info_->style == ParamStyle::kDashParam && given.empty())
      out.text = std::string(p.default_value);
    const std::string& v = out.text;
    switch (p.type) {
      case ParamType::kInt: {
        if (!absl::SimpleAtoi(v, &out.i)) {
          return Bad(p, v, absl::StrCat("'", v, "' is not an integer"), "not an integer");
        }
        const auto min = static_cast<int64_t>(p.min);
        const bool bounded = !p.max_is_cpu_count || platform != nullptr;
        const auto max = p.max_is_cpu_count && platform ? platform->topology.num_cpus
                                                        : static_cast<int64_t>(p.max);
        if (out.i < min || (bounded && out.i > max)) {
          return Bad(p, v, absl::StrCat(out.i, " out of range [", min, ", ", max, "]"),
                     absl::StrCat("out of range [", min, ", ", max, "]"));
        }
        break;
      }
      case ParamType::kDouble:
        if (!absl::SimpleAtod(v, &out.d) || !std::isfinite(out.d)) {
          return Bad(p, v, absl::StrCat("'", v, "' is not a number"), "not a number");
        }
        if (out.d < p.min || out.d > p.max) {
          return Bad(p, v, absl::StrCat(out.d, " out of range [", p.min, ", ", p.max, "]"),
                     absl::StrCat("out of range [", p.min, ", ", p.max, "]"));
        }
        break;
      case ParamType::kSize: {
        absl::StatusOr<uint64_t> size = ParseSize(v);
        if (!size.ok()) {
          std::string why(size.status().message());
          return Bad(p, v, why, why);
        }
        if (*size == 0) return Bad(p, v, "must be > 0", "must be > 0");
        out.size = *size;
        break;
      }
      case ParamType::kChoice:
        if (std::find(p.choices.begin(), p.choices.end(), v) == p.choices.end()) {
          std::string why = absl::StrCat("expected one of ", absl::StrJoin(p.choices, ", "));
          return Bad(p, v, why, why);
        }
        break;
      case ParamType::kString:
        break;
    }
  }
  valid_ = true;
  return absl::OkStatus();
}

const WorkloadParams::Parsed& WorkloadParams::Get(absl::string_view name, ParamType type) const {
  FARM_DCHECK(valid_, "Validate() returned OK");
  size_t i = 0;
  while (i < info_->params.size() && info_->params[i].name != name) ++i;
  FARM_DCHECK(i < info_->params.size(), "a parameter of the workload's table");
  FARM_DCHECK(info_->params[i].type == type ||
                  (type == ParamType::kString && info_->params[i].type == ParamType::kChoice),
              "read with the table's type");
  return parsed_[i];
}

int64_t WorkloadParams::Int(absl::string_view name) const { return Get(name, ParamType::kInt).i; }
double WorkloadParams::Double(absl::string_view name) const {
  return Get(name, ParamType::kDouble).d;
}
uint64_t WorkloadParams::Size(absl::string_view name) const {
  return Get(name, ParamType::kSize).size;
}
const std::string& WorkloadParams::Str(absl::string_view name) const {
  return Get(name, ParamType::kString).text;
}

// ---- Workload

absl::Status Workload::Configure(const WorkloadParams& params, const Platform& platform) {
  FARM_DCHECK(stage_ == Stage::kNew, "Configure() once, first");
  absl::Status s = DoConfigure(params, platform);
  if (s.ok()) stage_ = Stage::kConfigured;
  return s;
}

absl::Status Workload::Setup(WorkloadContext& ctx) {
  FARM_DCHECK(stage_ == Stage::kConfigured, "Setup() once, after Configure() returned OK");
  absl::Status s = DoSetup(ctx);
  if (s.ok()) stage_ = Stage::kSetUp;
  return s;
}

WorkloadReport Workload::Report() {
  FARM_DCHECK(stage_ == Stage::kSetUp, "Report() once, after Setup() returned OK");
  stage_ = Stage::kReported;
  return DoReport();
}

// ---- Registry

const std::vector<WorkloadInfo>& AllWorkloads() {
  static const std::vector<WorkloadInfo>* w = new std::vector<WorkloadInfo>{
      DmaMapBenchWorkload(),   MemcachedWorkload(), FioNvmeWorkload(),
      IozoneNfsRdmaWorkload(), TcpStreamWorkload(), NvmfTargetWorkload(),
  };
  return *w;
}

absl::StatusOr<const WorkloadInfo*> FindWorkload(absl::string_view name) {
  std::vector<std::string> names;
  for (const WorkloadInfo& w : AllWorkloads()) {
    if (w.name == name) return &w;
    names.push_back(w.name);
  }
  return absl::NotFoundError(
      absl::StrCat("unknown workload '", name, "'; valid workloads: ", absl::StrJoin(names, ", ")));
}

absl::StatusOr<WorkloadParams> ResolveWorkloadParams(
    const WorkloadInfo& info, const std::map<std::string, std::string>& given) {
  std::map<std::string, std::string> out;
  for (const WorkloadParam& p : info.params)
    out[std::string(p.name)] = std::string(p.default_value);
  for (const auto& [k, v] : given) {
    if (!out.count(k)) {
      std::vector<absl::string_view> names;
      for (const WorkloadParam& p : info.params) names.push_back(p.name);
      return absl::InvalidArgumentError(absl::StrCat("workload ", info.name,
                                                     ": unknown parameter '", k,
                                                     "'; valid: ", absl::StrJoin(names, ", ")));
    }
    out[k] = v;
  }
  return WorkloadParams(info, std::move(out));
}

absl::Status ValidateWorkloadParams(absl::string_view workload,
                                    const std::map<std::string, std::string>& params) {
  absl::StatusOr<const WorkloadInfo*> info = FindWorkload(workload);
  if (!info.ok()) return info.status();
  absl::StatusOr<WorkloadParams> resolved = ResolveWorkloadParams(**info, params);
  if (!resolved.ok()) return resolved.status();
  return resolved->Validate(/*platform=*/nullptr);
}

}  // namespace farm::emu
