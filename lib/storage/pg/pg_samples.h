// How a result's samples are stored in PostgreSQL (migration 29): each
// distinct (metric, unit, phase) once in sample_keys, and per result row
// sample_key_ids (int[]) and sample_values (float8[]), one element per
// sample, plus sample_series (jsonb, NULL unless a sample has per-interval
// figures). This file builds the report statements' parameters and SQL
// for that layout and the expression that reads it back as the samples
// JSON lib/storage/row_codec.h's JsonToSamples decodes.
//
// Contract: SampleColumns is a value type, not thread-safe; the functions
// and constants are stateless and thread-safe.
#ifndef LIB_STORAGE_PG_PG_SAMPLES_H_
#define LIB_STORAGE_PG_PG_SAMPLES_H_

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "google/protobuf/repeated_ptr_field.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::storage {

// The samples of a batch of reports as statement parameters: each distinct
// key once (metrics, units, phases: text[] literals of one element per
// key), and per report the 1-based positions of its samples' keys (an
// int[] literal), their values (a float8[] literal that reads back every
// double exactly, NaN and the infinities included) and their series (jsonb
// text, or '' for none).
struct SampleColumns {
  std::vector<std::string> metrics, units, phases;
  std::vector<std::string> key_positions, values, series;

  void Add(const google::protobuf::RepeatedPtrField<iommufarm::v1::Sample>& samples);

 private:
  std::map<std::tuple<std::string, std::string, std::string>, int> position_of_;
};

// The text PostgreSQL's float8 input reads back as exactly `v`.
std::string Float8Text(double v);

// CTEs (each followed by a comma) that store the keys given as text[]
// parameters `metrics`, `units` and `phases` in sample_keys where they are
// missing and leave one row `skm(ids)`: their ids, in the parameters'
// order. A report maps its key positions p to skm.ids[p]. Missing keys are
// inserted only after every row of the earlier CTE `locked` (the report's
// jobs update) is taken, and in key order: a report waiting on another's
// new key then holds no lock that one waits for (two reports of one lease
// would otherwise deadlock, one on the job row, the other on the key).
// When `locked` is empty nothing is inserted and new keys have no id.
std::string SampleKeyCtes(const std::string& metrics, const std::string& units,
                          const std::string& phases, const std::string& locked);

// The int[] of sample_keys ids for a report's key positions `positions`
// (an int[] expression), given skm joined as `skm`.
std::string SampleKeyIdsSql(const std::string& positions);

// A result row's (alias r) samples as JSON text in the shape
// SamplesToJson writes ([{metric, unit, phase, value, intervals,
// interval_seconds}], non-finite values as strings).
extern const char* const kResultSamplesJsonSql;

}  // namespace farm::storage

#endif  // LIB_STORAGE_PG_PG_SAMPLES_H_
