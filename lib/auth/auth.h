// Bearer-token authentication for farm RPCs.
//
// Server side: CheckBearer() compares the call's "authorization" metadata
// with "Bearer <token>" in constant time. An empty expected token disables
// the check (a farm on loopback without --token). Client side: AttachBearer()
// adds the metadata to a ClientContext; plain metadata rather than
// grpc::CallCredentials because gRPC refuses call credentials on the
// insecure channels a loopback farm uses.
//
// API tokens: NewToken() draws 32 random bytes (OpenSSL RAND_bytes) and
// spells them as "farm_" + 64 hex digits; servers store only
// TokenSha256Hex() of a token, so a database dump does not hand out
// credentials.
//
// Thread-safe: free functions over their arguments only.
#ifndef LIB_AUTH_AUTH_H_
#define LIB_AUTH_AUTH_H_

#include <string>
#include <string_view>

#include <grpcpp/grpcpp.h>

namespace farm::auth {

// True if `header` (the metadata value) is exactly "Bearer <expected>".
bool BearerMatches(std::string_view header, std::string_view expected);

// OK, or UNAUTHENTICATED naming what is wrong (missing vs wrong token).
grpc::Status CheckBearer(const grpc::ServerContextBase& ctx, const std::string& expected);

// Adds "authorization: Bearer <token>" unless token is empty.
void AttachBearer(grpc::ClientContext* ctx, const std::string& token);

// The token of "Bearer <token>" metadata; empty when absent or malformed.
std::string BearerToken(const grpc::ServerContextBase& ctx);

// A fresh random API token; empty only if the OpenSSL RNG fails.
std::string NewToken();

// Lower-case hex SHA-256 of `token`.
std::string TokenSha256Hex(std::string_view token);

}  // namespace farm::auth

#endif  // LIB_AUTH_AUTH_H_
