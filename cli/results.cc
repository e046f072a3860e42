#include "cli/results.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/environment_diff.h"
#include "cli/number_format.h"
#include "lib/base/check.h"
#include "nlohmann/json.hpp"
#include "proto/names.h"

namespace farm::cli {

void AddResultCommands(CLI::App& app, Subcommands* out) {
  struct Args {
    int64_t results_matrix = 0;
    std::string results_format;
    bool results_raw = false;
    int64_t raw_job = 0;
    int raw_attempt = 0;
  };
  auto a = std::make_shared<Args>();
  auto* results =
      app.add_subcommand("results",
                         "a matrix's results: table = per commit x mode x workload [x platform] "
                         "n, mean and 95% confidence interval of the main metric; csv/json = "
                         "every sample, written as the results arrive");
  results->add_option("MATRIX", a->results_matrix, "matrix id")->required();
  AddOutputOption(results, &a->results_format);
  results->add_flag("--raw", a->results_raw,
                    "with --output json: include each run's raw tool output (fetched one result "
                    "at a time)");
  out->push_back({results, [a](Commands& c) {
                    return RunResults(c, a->results_matrix, ToFormat(a->results_format),
                                      a->results_raw);
                  }});

  auto* raw_output = app.add_subcommand(
      "raw-output", "write one result's raw tool output to stdout, verbatim, as it streams in");
  raw_output->add_option("JOB", a->raw_job, "job id (the job_id of `results --output json`)")
      ->required()
      ->check(CLI::Range(int64_t{1}, std::numeric_limits<int64_t>::max()));
  raw_output
      ->add_option("--attempt", a->raw_attempt, "the result of this attempt (default: the latest)")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  out->push_back(
      {raw_output, [a](Commands& c) { return RunRawOutput(c, a->raw_job, a->raw_attempt); }});
}

std::string RawPrunedText(const google::protobuf::Timestamp& at) {
  return absl::StrCat("raw output pruned by retention at ", FormatTimestamp(at),
                      " (farmctl prune --raw-only); its samples are kept");
}

int RunResults(Commands& commands, int64_t matrix_id, OutputFormat format, bool raw) {
  if (format == OutputFormat::kTable) {
    // The table sizes its columns over every result (without raw output).
    absl::StatusOr<std::vector<pb::Result>> results = commands.FetchResults(matrix_id, false);
    if (!results.ok())
      return commands.Fail(absl::StrCat("GetResults ", matrix_id), results.status());
    commands.out() << FormatResultsTable(*results);
    const std::string kernels = FormatKernelRunsTable(*results);
    if (!kernels.empty()) commands.out() << "\n" << kernels;
    const std::string environments = FormatEnvironmentsTable(*results);
    if (!environments.empty()) commands.out() << "\n" << environments;
    return 0;
  }
  // CSV and JSON go out as the results arrive; raw outputs one at a time
  // (GetRawOutput), so farmctl holds one result's. An error after some were
  // written leaves a truncated document and a non-zero exit.
  ResultsStreamWriter writer(commands.out(), format);
  const bool with_raw = raw && format == OutputFormat::kJson;
  absl::Status raw_error;
  std::string failed_at;
  int64_t pruned = 0;
  absl::Status st = commands.StreamResults(matrix_id, false, [&](const pb::Result& r) {
    if (!raw_error.ok()) return;  // stop writing after the first failed fetch
    if (r.has_raw_pruned_at()) ++pruned;
    if (!with_raw || r.raw_size() == 0) {
      writer.Add(r);
      return;
    }
    pb::Result full = r;
    std::string* text = full.mutable_raw_output();
    text->reserve(static_cast<size_t>(r.raw_size()));
    raw_error = commands.StreamRawOutput(
        r.job_id(), r.attempt(), [&](const pb::RawOutputChunk& c) { text->append(c.data()); });
    if (!raw_error.ok()) {
      failed_at = absl::StrCat("GetRawOutput job ", r.job_id(), " attempt ", r.attempt());
      return;
    }
    writer.Add(full);
  });
  if (!st.ok()) return commands.Fail(absl::StrCat("GetResults ", matrix_id), st);
  if (!raw_error.ok()) return commands.Fail(failed_at, raw_error);
  writer.Finish();
  if (with_raw && pruned > 0) {
    commands.err() << "farmctl: the raw output of " << pruned << " result"
                   << (pruned == 1 ? " was" : "s was")
                   << " pruned by retention (raw_output_pruned); samples are kept\n";
  }
  return 0;
}

int RunRawOutput(Commands& commands, int64_t job_id, int attempt) {
  std::string pruned;
  absl::Status st = commands.StreamRawOutput(job_id, attempt, [&](const pb::RawOutputChunk& c) {
    if (c.has_raw_pruned_at()) pruned = RawPrunedText(c.raw_pruned_at());
    commands.out().write(c.data().data(), static_cast<std::streamsize>(c.data().size()));
    commands.out().flush();
  });
  if (!st.ok()) {
    return commands.Fail(absl::StrCat("GetRawOutput job ", job_id,
                                      attempt > 0 ? absl::StrCat(" attempt ", attempt) : ""),
                         st);
  }
  if (!pruned.empty()) {
    commands.err() << "farmctl: job " << job_id << ": " << pruned << "\n";
    return 1;
  }
  return 0;
}

namespace {

// Figures of guests under QEMU's tcg-icount are instruction-timed: the
// guest's clock counts its instructions, so they repeat but are no
// hardware's times. Said once, above the table that holds them.
std::string InstructionTimedNote(const std::vector<pb::Result>& results) {
  std::set<uint32_t> shifts;
  for (const pb::Result& r : results) {
    if (r.host().guest().icount_shift() > 0) shifts.insert(r.host().guest().icount_shift());
  }
  if (shifts.empty()) return "";
  return absl::StrCat("instruction-timed: guests under QEMU tcg-icount (shift ",
                      absl::StrJoin(shifts, ", "),
                      "): each guest instruction counts 2^shift ns, not hardware time\n");
}

}  // namespace

std::string FormatResultsTable(const std::vector<pb::Result>& results) {
  if (results.empty()) return "no results\n";
  const std::string metric = MainMetric(results);
  if (metric.empty()) return "results carry no samples\n";
  std::vector<SummaryRow> rows = Summarize(results, metric);
  std::set<std::string> platforms;
  bool any_phase = false;
  for (const auto& row : rows) {
    platforms.insert(row.platform);
    any_phase = any_phase || !row.phase.empty();
  }
  const bool show_platform = platforms.size() > 1;
  std::vector<std::string> headers = {"commit", "mode", "workload"};
  if (show_platform) headers.push_back("platform");
  if (any_phase) headers.push_back("phase");
  for (const char* h : {"n", "mean", "ci95 low", "ci95 high", "+/-%", "unit"}) {
    headers.push_back(h);
  }
  std::vector<std::vector<std::string>> cells;
  for (const auto& row : rows) {
    std::vector<std::string> line = {row.commit, row.mode, row.workload};
    if (show_platform) line.push_back(row.platform);
    if (any_phase) line.push_back(row.phase);
    line.push_back(absl::StrCat(row.stats.n));
    line.push_back(FormatNumber(row.stats.mean));
    const double hw = row.stats.half_width;
    line.push_back(std::isnan(hw) ? "-" : FormatNumber(row.stats.mean - hw));
    line.push_back(std::isnan(hw) ? "-" : FormatNumber(row.stats.mean + hw));
    line.push_back(std::isnan(hw) || row.stats.mean == 0
                       ? "-"
                       : absl::StrFormat("%.2f", 100.0 * hw / std::fabs(row.stats.mean)));
    line.push_back(row.unit);
    cells.push_back(std::move(line));
  }
  return absl::StrCat("metric: ", metric,
                      " (mean and 95% Student-t confidence interval over "
                      "repeats)\n",
                      InstructionTimedNote(results), RenderTable(headers, cells));
}

namespace {

// The key of a kernel-runs row; ordered so rows come in commit order, then
// the modes' own order.
struct KernelRunKey {
  int32_t commit_index;
  std::string commit;
  pb::IommuMode requested;
  std::string release, group_type;
  pb::IommuMode effective;
  std::string machine, accel;
  auto operator<=>(const KernelRunKey&) const = default;
};

bool RanOnARealKernel(const pb::Result& r) {
  return r.host().has_guest() && !r.host().guest().provider().empty() &&
         r.host().guest().provider() != "emulator";
}

}  // namespace

std::string FormatKernelRunsTable(const std::vector<pb::Result>& results) {
  std::map<KernelRunKey, int64_t> runs;
  for (const pb::Result& r : results) {
    if (!RanOnARealKernel(r)) continue;
    const pb::GuestFacts& g = r.host().guest();
    ++runs[{r.job().commit_index(), r.job().commit_id(), g.requested_mode(),
            r.host().kernel_release(), g.domain_type().empty() ? "no IOMMU" : g.domain_type(),
            r.host().iommu_mode(), g.machine_model().empty() ? "host" : g.machine_model(),
            g.accel().empty() ? "-" : g.accel()}];
  }
  if (runs.empty()) return "";
  int64_t mismatched = 0;
  std::vector<std::vector<std::string>> cells;
  for (const auto& [k, n] : runs) {
    const bool as_asked = k.effective == k.requested;
    if (!as_asked) mismatched += n;
    cells.push_back({k.commit, k.release, ModeName(k.requested), k.group_type,
                     as_asked ? ModeName(k.effective) : ModeName(k.effective) + " (!)", k.machine,
                     k.accel, absl::StrCat(n)});
  }
  std::string out =
      "the kernel and IOMMU mode each real run had (from the booted kernel's own facts)\n";
  absl::StrAppend(&out, RenderTable({"commit", "booted", "requested", "group type", "effective",
                                     "machine", "accel", "runs"},
                                    cells));
  if (mismatched > 0) {
    absl::StrAppend(&out, mismatched,
                    " run(s) marked (!) ran in another IOMMU mode than asked: their figures "
                    "describe that mode\n");
  }
  return out;
}

std::string FormatEnvironmentsTable(const std::vector<pb::Result>& results) {
  // platform, agent, digest -> runs, and the environment it stands for.
  std::map<std::tuple<std::string, std::string, std::string>, int64_t> runs;
  std::map<std::string, const pb::IommuEnvironment*> by_digest;
  std::map<std::string, std::set<std::string>> digests_of_agent;
  for (const pb::Result& r : results) {
    const pb::IommuEnvironment& env = r.host().iommu_environment();
    if (!::farm::proto::IsRealExecutor(r.job().executor()) || env.digest().empty()) continue;
    ++runs[{r.job().platform(), r.agent(), env.digest()}];
    by_digest.emplace(env.digest(), &env);
    digests_of_agent[r.agent()].insert(env.digest());
  }
  if (runs.empty()) return "";
  std::vector<std::vector<std::string>> cells;
  for (const auto& [key, n] : runs) {
    const auto& [platform, agent, digest] = key;
    cells.push_back({platform, agent, ShortDigest(digest),
                     EnvironmentSummary(*by_digest.at(digest)), absl::StrCat(n)});
  }
  std::string out =
      "the IOMMU environment each real run had (its series key: iommu-env=<the 12 hex "
      "digits>)\n";
  absl::StrAppend(&out,
                  RenderTable({"platform", "agent", "iommu-env", "environment", "runs"}, cells));
  for (const auto& [agent, digests] : digests_of_agent) {
    if (digests.size() < 2) continue;
    absl::StrAppend(&out, "agent ", agent, " ran under ", digests.size(),
                    " IOMMU environments: its results are as many series (`farmctl compare` "
                    "lists the facts that differ)\n");
  }
  return out;
}

namespace {

using google::protobuf::util::TimeUtil;

constexpr char kResultsCsvHeader[] =
    "matrix_id,job_id,attempt,catalog,commit,commit_index,platform,workload,"
    "params,mode,repeat,agent,metric,phase,value,unit\n";

void AppendResultCsv(const pb::Result& r, std::string& out) {
  const pb::Job& job = r.job();
  const std::string prefix =
      absl::StrJoin({absl::StrCat(job.matrix_id()), absl::StrCat(r.job_id()),
                     absl::StrCat(r.attempt()), CsvField(job.catalog()), CsvField(job.commit_id()),
                     absl::StrCat(job.commit_index()), CsvField(job.platform()),
                     CsvField(job.workload().name()), CsvField(ParamsText(job.workload().params())),
                     ModeName(job.mode()), absl::StrCat(job.repeat()), CsvField(r.agent())},
                    ",");
  for (const auto& s : r.samples()) {
    absl::StrAppend(&out, prefix, ",", CsvField(s.metric()), ",", CsvField(s.phase()), ",",
                    FormatExactNumber(s.value()), ",", CsvField(s.unit()), "\n");
  }
}

nlohmann::ordered_json ResultJson(const pb::Result& r) {
  const pb::Job& job = r.job();
  nlohmann::ordered_json o;
  o["matrix_id"] = job.matrix_id();
  o["job_id"] = r.job_id();
  o["attempt"] = r.attempt();
  o["catalog"] = job.catalog();
  o["commit"] = job.commit_id();
  o["commit_index"] = job.commit_index();
  o["platform"] = job.platform();
  o["workload"] = job.workload().name();
  nlohmann::ordered_json params = nlohmann::ordered_json::object();
  std::map<std::string, std::string> sorted(job.workload().params().begin(),
                                            job.workload().params().end());
  for (const auto& [k, v] : sorted) params[k] = v;
  o["params"] = std::move(params);
  o["mode"] = ModeName(job.mode());
  o["repeat"] = job.repeat();
  o["seed"] = job.seed();
  o["agent"] = r.agent();
  o["tool_version"] = r.tool_version();
  o["wall_time_s"] = static_cast<double>(TimeUtil::DurationToNanoseconds(r.wall_time())) / 1e9;
  nlohmann::ordered_json samples = nlohmann::ordered_json::array();
  for (const auto& s : r.samples()) {
    nlohmann::ordered_json so;
    so["metric"] = s.metric();
    if (!s.phase().empty()) so["phase"] = s.phase();
    so["value"] = s.value();
    so["unit"] = s.unit();
    samples.push_back(std::move(so));
  }
  o["samples"] = std::move(samples);
  if (r.has_monitors()) {
    // The proto's JSON mapping with its field names, as results.monitors holds it.
    std::string text;
    google::protobuf::util::JsonPrintOptions opts;
    opts.preserve_proto_field_names = true;
    if (google::protobuf::util::MessageToJsonString(r.monitors(), &text, opts).ok()) {
      o["monitors"] = nlohmann::ordered_json::parse(text, nullptr, false);
    }
  }
  if (!r.host().iommu_environment().digest().empty()) {
    std::string text;
    google::protobuf::util::JsonPrintOptions opts;
    opts.preserve_proto_field_names = true;
    if (google::protobuf::util::MessageToJsonString(r.host().iommu_environment(), &text, opts)
            .ok()) {
      o["iommu_environment"] = nlohmann::ordered_json::parse(text, nullptr, false);
    }
  }
  if (!r.raw_output().empty()) {
    o["raw_format"] = r.raw_format();
    o["raw_output"] = r.raw_output();
  }
  if (r.has_raw_pruned_at()) o["raw_output_pruned"] = RawPrunedText(r.raw_pruned_at());
  return o;
}

}  // namespace

std::string FormatResultsCsv(const std::vector<pb::Result>& results) {
  std::string out = kResultsCsvHeader;
  for (const auto& r : results) AppendResultCsv(r, out);
  return out;
}

std::string FormatResultsJson(const std::vector<pb::Result>& results) {
  nlohmann::ordered_json array = nlohmann::ordered_json::array();
  for (const auto& r : results) array.push_back(ResultJson(r));
  return array.dump(2) + "\n";
}

ResultsStreamWriter::ResultsStreamWriter(std::ostream& out, OutputFormat format)
    : out_(out), format_(format) {
  FARM_DCHECK(format == OutputFormat::kCsv || format == OutputFormat::kJson,
              "ResultsStreamWriter writes csv or json");
  if (format_ == OutputFormat::kCsv) out_ << kResultsCsvHeader;
}

void ResultsStreamWriter::Add(const pb::Result& result) {
  if (format_ == OutputFormat::kCsv) {
    std::string rows;
    AppendResultCsv(result, rows);
    out_ << rows;
  } else {
    // The element as dump(2) indents it inside the array: a one-element
    // array's dump without its first and last lines.
    nlohmann::ordered_json one = nlohmann::ordered_json::array();
    one.push_back(ResultJson(result));
    const std::string text = one.dump(2);
    out_ << (count_ == 0 ? "[\n" : ",\n") << text.substr(2, text.size() - 4);
  }
  out_.flush();
  ++count_;
}

void ResultsStreamWriter::Finish() {
  if (format_ == OutputFormat::kJson) out_ << (count_ == 0 ? "[]\n" : "\n]\n");
  out_.flush();
}

}  // namespace farm::cli
