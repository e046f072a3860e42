#include "lib/auth/auth.h"

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

}  // namespace farm::auth
