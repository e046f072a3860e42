#include "lib/auth/auth.h"

#include <openssl/rand.h>

#include <array>

#include "lib/base/sha256.h"

namespace farm::auth {

bool BearerMatches(std::string_view header, std::string_view expected) {
  constexpr std::string_view kPrefix = "Bearer ";
  if (header.size() != kPrefix.size() + expected.size()) return false;
  if (header.substr(0, kPrefix.size()) != kPrefix) return false;
  // Constant time over the token bytes: no early exit on the first mismatch.
  unsigned char diff = 0;
  const std::string_view got = header.substr(kPrefix.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    diff |= static_cast<unsigned char>(got[i] ^ expected[i]);
  }
  return diff == 0;
}

grpc::Status CheckBearer(const grpc::ServerContextBase& ctx, const std::string& expected) {
  if (expected.empty()) return grpc::Status::OK;
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "missing \"authorization: Bearer <token>\" metadata (set --token or "
                        "FARM_TOKEN)");
  }
  if (!BearerMatches(std::string_view(it->second.data(), it->second.size()), expected)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong bearer token");
  }
  return grpc::Status::OK;
}

void AttachBearer(grpc::ClientContext* ctx, const std::string& token) {
  if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
}

std::string BearerToken(const grpc::ServerContextBase& ctx) {
  constexpr std::string_view kPrefix = "Bearer ";
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return "";
  std::string_view v(it->second.data(), it->second.size());
  if (v.substr(0, kPrefix.size()) != kPrefix) return "";
  return std::string(v.substr(kPrefix.size()));
}

namespace {
std::string Hex(const unsigned char* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[p[i] >> 4]);
    out.push_back(kDigits[p[i] & 15]);
  }
  return out;
}
}  // namespace

std::string NewToken() {
  std::array<unsigned char, 32> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) return "";
  return "farm_" + Hex(bytes.data(), bytes.size());
}

std::string TokenSha256Hex(std::string_view token) { return base::Sha256Hex(token); }

}  // namespace farm::auth
