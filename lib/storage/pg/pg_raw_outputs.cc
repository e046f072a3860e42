#include "lib/storage/pg/pg_raw_outputs.h"

#include <zstd.h>

#include <map>
#include <memory>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "lib/base/sha256.h"
#include "lib/storage/pg/pg_rows.h"

namespace farm::storage {
namespace {

// A report batch compresses on the scheduler's request path. On the
// store_scale bench's outputs (fio JSON, iozone text) level 1 stored them
// within 1% of level 3 (smaller, as often as not) in about three quarters
// of the time; level 19 saved about 5% more at many times the CPU.
constexpr int kZstdLevel = 1;

// Results moved per statement by MoveInlineRawOutputs.
constexpr int kMoveBatch = 2000;

// One compression and one decompression context per thread, kept: making
// a context per call added about a quarter to compressing a 3 kB output.
ZSTD_CCtx* CompressContext() {
  thread_local const std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> ctx(ZSTD_createCCtx(),
                                                                            &ZSTD_freeCCtx);
  return ctx.get();
}
ZSTD_DCtx* DecompressContext() {
  thread_local const std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> ctx(ZSTD_createDCtx(),
                                                                            &ZSTD_freeDCtx);
  return ctx.get();
}

}  // namespace

PackedRaw PackRaw(std::string_view raw) {
  PackedRaw p;
  p.digest_hex = absl::StrCat("\\x", base::Sha256Hex(raw));
  p.size = static_cast<int32_t>(raw.size());
  std::string frame(ZSTD_compressBound(raw.size()), '\0');
  const size_t n = ZSTD_compressCCtx(CompressContext(), frame.data(), frame.size(), raw.data(),
                                     raw.size(), kZstdLevel);
  // Compressing into a buffer of ZSTD_compressBound bytes cannot fail.
  frame.resize(ZSTD_isError(n) ? 0 : n);
  p.zstd_hex = absl::StrCat("\\x", absl::BytesToHexString(frame));
  return p;
}

absl::StatusOr<std::string> UnpackRaw(const pqxx::field& zstd, int64_t size) {
  const pqxx::binarystring frame(zstd);
  std::string out(static_cast<size_t>(size), '\0');
  const size_t n =
      ZSTD_decompressDCtx(DecompressContext(), out.data(), out.size(), frame.data(), frame.size());
  if (ZSTD_isError(n) || n != out.size()) {
    return absl::DataLossError(
        absl::StrCat("raw output frame of ", frame.size(), " bytes does not hold ", size,
                     " bytes: ", ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short"));
  }
  return out;
}

std::string Utf8Slice(const std::string& text, int64_t from_char, int64_t max_chars) {
  auto is_lead = [&](size_t i) { return (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80; };
  size_t begin = 0;
  for (int64_t k = 0; begin < text.size(); ++begin) {
    if (is_lead(begin) && k++ == from_char) break;
  }
  size_t end = begin;
  for (int64_t k = 0; end < text.size(); ++end) {
    if (is_lead(end) && k++ == max_chars) break;
  }
  return text.substr(begin, end - begin);
}

std::string RawBlobs::Add(std::string_view raw) {
  PackedRaw p = PackRaw(raw);
  std::string digest = p.digest_hex;
  if (seen.insert(p.digest_hex).second) {
    digests.push_back(std::move(p.digest_hex));
    sizes.push_back(p.size);
    frames.push_back(std::move(p.zstd_hex));
  }
  return digest;
}

int64_t MoveInlineRawOutputs(pqxx::transaction_base& t) {
  int64_t moved = 0;
  int64_t after_job = -1;
  int after_attempt = 0;
  for (;;) {
    const pqxx::result rows = t.exec_params(
        "SELECT job_id, attempt, raw_output FROM results "
        "WHERE (job_id, attempt) > ($1, $2) AND raw_digest IS NULL "
        "AND octet_length(raw_output) > $3 AND octet_length(raw_output) <= $5 "
        "ORDER BY job_id, attempt LIMIT $4",
        after_job, after_attempt, static_cast<int64_t>(kRawInlineMaxBytes), kMoveBatch,
        static_cast<int64_t>(kRawOutOfRowMaxBytes));
    if (rows.empty()) return moved;
    std::vector<int64_t> jobs;
    std::vector<int32_t> attempts;
    std::vector<std::string> digests;
    RawBlobs blobs;
    for (const pqxx::row& r : rows) {
      jobs.push_back(r[0].as<int64_t>());
      attempts.push_back(r[1].as<int32_t>());
      digests.push_back(blobs.Add(std::string_view(r[2].c_str(), r[2].size())));
    }
    t.exec_params(
        "WITH blobs AS (INSERT INTO raw_outputs (digest, size, zstd) "
        "  SELECT * FROM unnest($4::bytea[], $5::int[], $6::bytea[]) "
        "  ON CONFLICT (digest) DO NOTHING) "
        "UPDATE results r SET raw_output = '', raw_digest = b.digest "
        "FROM unnest($1::bigint[], $2::int[], $3::bytea[]) AS b(job_id, attempt, digest) "
        "WHERE r.job_id = b.job_id AND r.attempt = b.attempt",
        ArrayLiteral(jobs), ArrayLiteral(attempts), QuotedArrayLiteral(digests),
        QuotedArrayLiteral(blobs.digests), ArrayLiteral(blobs.sizes),
        QuotedArrayLiteral(blobs.frames));
    moved += static_cast<int64_t>(rows.size());
    after_job = jobs.back();
    after_attempt = attempts.back();
  }
}

}  // namespace farm::storage
