#include "lib/storage/pg/pg_samples.h"

#include <charconv>
#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace farm::storage {

std::string Float8Text(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[32];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), v);  // shortest exact
  return std::string(buf, r.ptr);
}

void SampleColumns::Add(const google::protobuf::RepeatedPtrField<iommufarm::v1::Sample>& samples) {
  std::vector<int> positions;
  std::vector<std::string> texts;
  nlohmann::json of_samples = nlohmann::json::array();
  bool any_series = false;
  for (const iommufarm::v1::Sample& s : samples) {
    auto [at, added] = position_of_.emplace(std::tuple(s.metric(), s.unit(), s.phase()),
                                            static_cast<int>(metrics.size()) + 1);
    if (added) {
      metrics.push_back(s.metric());
      units.push_back(s.unit());
      phases.push_back(s.phase());
    }
    positions.push_back(at->second);
    texts.push_back(Float8Text(s.value()));
    if (s.intervals_size() == 0) {
      of_samples.push_back(nullptr);
      continue;
    }
    // As SamplesToJson writes them: a non-finite figure (no JSON number) as null.
    nlohmann::json intervals = nlohmann::json::array();
    for (double v : s.intervals()) {
      intervals.push_back(std::isfinite(v) ? nlohmann::json(v) : nlohmann::json());
    }
    of_samples.push_back(
        {{"intervals", std::move(intervals)}, {"interval_seconds", s.interval_seconds()}});
    any_series = true;
  }
  key_positions.push_back(absl::StrCat("{", absl::StrJoin(positions, ","), "}"));
  values.push_back(absl::StrCat("{", absl::StrJoin(texts, ","), "}"));
  series.push_back(any_series ? of_samples.dump() : "");
}

std::string SampleKeyCtes(const std::string& metrics, const std::string& units,
                          const std::string& phases, const std::string& locked) {
  return absl::StrCat(
      "skx AS (SELECT u.ix::int AS ix, u.metric, u.unit, u.phase FROM unnest(", metrics,
      "::text[], ", units, "::text[], ", phases,
      "::text[]) WITH ORDINALITY AS u(metric, unit, phase, ix)), "
      "skold AS (SELECT skx.ix, k.id FROM skx JOIN sample_keys k ON k.metric = skx.metric "
      "  AND k.unit = skx.unit AND k.phase = skx.phase), "
      "sknew AS (INSERT INTO sample_keys (metric, unit, phase) "
      "  SELECT skx.metric, skx.unit, skx.phase FROM skx "
      "  WHERE skx.ix NOT IN (SELECT ix FROM skold) AND (SELECT count(*) FROM ",
      locked,
      ") > 0 ORDER BY 1, 2, 3 "
      "  ON CONFLICT (metric, unit, phase) DO UPDATE SET metric = EXCLUDED.metric "
      "  RETURNING id, metric, unit, phase), "
      "skm AS (SELECT coalesce(array_agg(a.id ORDER BY a.ix), '{}') AS ids FROM ("
      "  SELECT ix, id FROM skold UNION ALL SELECT skx.ix, sknew.id FROM skx JOIN sknew "
      "  ON sknew.metric = skx.metric AND sknew.unit = skx.unit AND sknew.phase = skx.phase) a), ");
}

std::string SampleKeyIdsSql(const std::string& positions) {
  return absl::StrCat("ARRAY(SELECT skm.ids[x.p] FROM unnest(", positions,
                      ") WITH ORDINALITY AS x(p, o) ORDER BY x.o)::int[]");
}

const char* const kResultSamplesJsonSql =
    "(SELECT coalesce(json_agg(json_strip_nulls(json_build_object('metric', k.metric, "
    "  'unit', k.unit, 'phase', k.phase, 'value', s.value, "
    "  'intervals', r.sample_series -> (s.ord::int - 1) -> 'intervals', "
    "  'interval_seconds', r.sample_series -> (s.ord::int - 1) -> 'interval_seconds')) "
    "  ORDER BY s.ord), '[]')::text "
    " FROM unnest(r.sample_key_ids, r.sample_values) WITH ORDINALITY AS s(key_id, value, ord) "
    " JOIN sample_keys k ON k.id = s.key_id)";

}  // namespace farm::storage
