// The SQL column lists and pqxx row readers that several PostgreSQL
// repositories share: a job row, a matrix with its job counts, a
// regression row, and literals for array parameters. Value encodings
// (jsonb, timestamps) are lib/storage/row_codec.h's.
//
// Contract: stateless, thread-safe. Row readers expect the columns of the
// matching list, in order, and throw pqxx conversion errors otherwise
// (PgPool turns them into kInternal).
#ifndef LIB_STORAGE_PG_PG_ROWS_H_
#define LIB_STORAGE_PG_PG_ROWS_H_

#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::storage {

namespace pb = ::iommufarm::v1;

// A PostgreSQL array literal ("{1,2,3}") of numbers or plain tokens.
template <typename T>
std::string ArrayLiteral(const std::vector<T>& v) {
  return absl::StrCat("{", absl::StrJoin(v, ","), "}");
}

// A PostgreSQL array literal of arbitrary text: every element quoted, with
// '\\' and '"' escaped (text[], jsonb[] parameters).
std::string QuotedArrayLiteral(const std::vector<std::string>& v);

// Seconds, for make_interval(secs => ...).
inline double Secs(absl::Duration d) { return absl::ToDoubleSeconds(d); }

// Columns of a job (alias j), read by RowToJob.
extern const std::string kJobCols;
constexpr int kJobColCount = 23;
// The job in columns [base, base + kJobColCount) of `r`.
pb::Job RowToJob(const pqxx::row& r, int base = 0);

// RowToJob over the rows of one result: a row whose params or model set
// text equals the previous row's reuses its parsed map (the rows of a claim
// mostly share both). Not thread-safe; one per result being read.
class JobRowDecoder {
 public:
  pb::Job Decode(const pqxx::row& r, int base = 0);

 private:
  struct ParsedMap {
    bool valid = false;
    std::string text;
    google::protobuf::Map<std::string, std::string> map;
    const google::protobuf::Map<std::string, std::string>& Of(const pqxx::field& f);
  };
  ParsedMap params_, model_set_, labels_;
};

// SELECT of a matrix (alias m) with its job counts (alias j, LEFT JOIN);
// append the WHERE and GROUP BY m.id.
extern const char* const kMatrixSelect;
pb::Matrix RowToMatrix(const pqxx::row& r);
// One matrix with counts; kNotFound if there is none.
absl::StatusOr<pb::Matrix> LoadMatrix(pqxx::transaction_base& t, int64_t id);

// Columns of a regression, read by RowToRegression.
extern const char* const kRegressionCols;
pb::Regression RowToRegression(const pqxx::row& r);

}  // namespace farm::storage

#endif  // LIB_STORAGE_PG_PG_ROWS_H_
