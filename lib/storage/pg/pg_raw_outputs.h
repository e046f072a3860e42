// Where a result's raw tool output lives in PostgreSQL: up to
// kRawInlineMaxBytes it stays in results.raw_output; a longer one is stored
// once per distinct content in raw_outputs (digest = SHA-256 of the output
// as reported, size = its bytes, zstd = one zstd frame of it) and
// results.raw_digest names it. Results that report the same output share
// one raw_outputs row; retention deletes a row once no result names it.
//
// Contract: PackRaw/UnpackRaw/Utf8Slice are pure and thread-safe.
// MoveInlineRawOutputs works inside the caller's transaction and is not
// thread-safe with respect to that transaction.
#ifndef LIB_STORAGE_PG_PG_RAW_OUTPUTS_H_
#define LIB_STORAGE_PG_PG_RAW_OUTPUTS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <pqxx/pqxx>

#include <set>
#include <vector>

#include "absl/status/statusor.h"

namespace farm::storage {

// Longer outputs go to raw_outputs. At 256 bytes an inline output costs its
// bytes in the result row, while one stored out of row costs a 33-byte
// digest there plus, when no other result shares it, a raw_outputs row
// (tuple header, digest, size, a zstd frame of at least its own header) and
// a primary-key entry: well over 100 bytes. Below this the saving is nil
// and a read costs a second lookup; above it zstd and sharing pay.
constexpr size_t kRawInlineMaxBytes = 256;
// Longer outputs stay in results.raw_output too: a reader of one
// (GetRawOutput, ListResults) takes it in slices that PostgreSQL's substr
// cuts from TOAST, so the scheduler never holds a multi-megabyte output
// whole, where a zstd frame is decompressed whole for every slice.
constexpr size_t kRawOutOfRowMaxBytes = size_t{1} << 20;

// An output as it is stored out of row; the digest and frame as bytea
// input literals ("\x" and hex digits), ready for a parameter or an array.
struct PackedRaw {
  std::string digest_hex;
  int32_t size = 0;
  std::string zstd_hex;
};

// The distinct out-of-row outputs of one batch, as the array parameters of
// an `INSERT INTO raw_outputs ... SELECT * FROM unnest(digests, sizes,
// frames) ON CONFLICT (digest) DO NOTHING`: each content packed once.
struct RawBlobs {
  std::vector<std::string> digests, frames;
  std::vector<int32_t> sizes;
  std::set<std::string> seen;

  // Packs `raw` (PackRaw) and returns its digest literal; the first time a
  // digest is seen, its blob joins the arrays.
  std::string Add(std::string_view raw);
};

// True when `raw` is stored out of row.
inline bool StoredOutOfRow(std::string_view raw) {
  return raw.size() > kRawInlineMaxBytes && raw.size() <= kRawOutOfRowMaxBytes;
}

// SHA-256 and zstd (level 1) of `raw`.
PackedRaw PackRaw(std::string_view raw);

// The output of a zstd frame read back from raw_outputs (a bytea field).
absl::StatusOr<std::string> UnpackRaw(const pqxx::field& zstd, int64_t size);

// Characters [from_char, from_char + max_chars) of UTF-8 text, as
// PostgreSQL's substr counts them (a character is a lead byte and its
// continuation bytes).
std::string Utf8Slice(const std::string& text, int64_t from_char, int64_t max_chars);

// Moves every inline raw output that StoredOutOfRow takes to
// raw_outputs, in batches; returns how many results it moved.
int64_t MoveInlineRawOutputs(pqxx::transaction_base& t);

}  // namespace farm::storage

#endif  // LIB_STORAGE_PG_PG_RAW_OUTPUTS_H_
