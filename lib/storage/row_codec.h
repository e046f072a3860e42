// How the farm's rows hold values that are not plain columns: the jsonb
// documents (workload params, model sets, host facts, capabilities,
// samples, per-mode effects), microsecond timestamps, and the matrix state
// derived from its job counts. Independent of the database driver, so the
// PostgreSQL repositories and the in-memory ones store and return exactly
// the same values (a sample value that is NaN, a host field the document
// does not carry).
//
// Contract: pure functions, thread-safe. Decoders are lenient like the
// jsonb readers they serve: malformed text leaves the output untouched or
// partly filled, never fails.
#ifndef LIB_STORAGE_ROW_CODEC_H_
#define LIB_STORAGE_ROW_CODEC_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::storage {

namespace pb = ::iommufarm::v1;

// Appends `s` to *out with every byte for which `special(byte)` holds
// replaced by what `escape(byte, out)` appends; the runs between them are
// copied whole (the text encoders run once per reported job).
template <typename Special, typename Escape>
void AppendEscaped(std::string* out, std::string_view s, Special special, Escape escape) {
  size_t plain = 0;  // start of the run copied as it is
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (!special(c)) continue;
    out->append(s.data() + plain, i - plain);
    escape(c, out);
    plain = i + 1;
  }
  out->append(s.data() + plain, s.size() - plain);
}

// Microseconds since the epoch (the database's timestamp resolution).
void SetMicros(int64_t micros, google::protobuf::Timestamp* ts);
void SetTime(absl::Time t, google::protobuf::Timestamp* ts);

std::string MapToJson(const google::protobuf::Map<std::string, std::string>& m);
void JsonToMap(const std::string& text, google::protobuf::Map<std::string, std::string>* out);
// A JSON object's text as MapToJson spells it (keys sorted, no spaces), so
// that PostgreSQL's jsonb text and a message's map compare equal; "{}" for
// text that is not an object.
std::string CanonicalJsonObject(const std::string& text);
// The numbers of a JSON array ("[1, 2.5]"); anything else, and elements
// that are not numbers, are left out.
std::vector<double> JsonNumbers(const std::string& text);

std::string HostToJson(const pb::HostFacts& h);
void JsonToHost(const std::string& text, pb::HostFacts* h);
// jobs.progress: a running job's JobProgress as its JSON form; a text that
// does not parse reads as no progress (false).
std::string ProgressToJson(const pb::JobProgress& progress);
bool JsonToProgress(const std::string& text, pb::JobProgress* progress);
// agents.health: protobuf's JSON mapping of AgentHealth ("{}" for none).
std::string HealthToJson(const pb::AgentHealth& health);
void JsonToHealth(const std::string& text, pb::AgentHealth* health);

// A result's monitors (results.monitors) in the proto's JSON mapping with
// its field names; "{}" when there are none. Text that does not parse reads
// as no monitors.
std::string MonitorsToJson(const pb::Monitors& m);
void JsonToMonitors(const std::string& text, pb::Monitors* m);

// Non-finite values are kept as strings (JSON has no NaN/Inf).
std::string SamplesToJson(const google::protobuf::RepeatedPtrField<pb::Sample>& samples);
void JsonToSamples(const std::string& text, google::protobuf::RepeatedPtrField<pb::Sample>* out);

std::string CapsToJson(const google::protobuf::RepeatedPtrField<pb::Capability>& caps);
void JsonToCaps(const std::string& text, google::protobuf::RepeatedPtrField<pb::Capability>* out);

// Executors an agent can run, from its capability names, ascending.
std::vector<int> ExecutorsOf(const google::protobuf::RepeatedPtrField<pb::Capability>& caps);

// regressions.per_mode ([{mode, before, after, relative_change, p_value}]).
std::string PerModeToJson(const google::protobuf::RepeatedPtrField<pb::ModeEffect>& modes);
void JsonToPerMode(const std::string& text, pb::Regression* g);
// regressions.primary_metrics as a JSON array of strings.
void JsonToPrimaryMetrics(const std::string& text, pb::Regression* g);

// Sets m's state (and finished_at, `finished_micros` of its last job, 0 if
// none) from its counts: running while any job is queued or leased, then
// cancelled, failed or completed.
void DeriveMatrixState(bool cancelled, int64_t finished_micros, pb::Matrix* m);

// The analyzer's marker of a matrix (analyzer_state 'matrix:<id>') as JSON:
// {"findings": N, "skipped_series": ["<series>: <reason>", ...]} after an
// analysis, {"failed": "<reason>"} after one that could not finish.
std::string AnalysedMarkerJson(size_t findings, const std::vector<std::string>& skipped_series);
std::string FailedMarkerJson(const std::string& reason);
// Matrix.analysis from a marker ("" for none or one that is not JSON).
std::string AnalysisSummary(const std::string& marker_json);

}  // namespace farm::storage

#endif  // LIB_STORAGE_ROW_CODEC_H_
