// farm::client: how farmctl, farm-agent and farm-analyzer reach a farm server.
//
// One small shared helper so that every client agrees on the default server
// address, on transport security and on how the token travels: as
// "authorization: Bearer <token>" metadata on every call. The token is set on
// each ClientContext rather than through call credentials because gRPC drops
// call credentials on insecure (loopback) channels.
//
// Security flags (AddSecurityOptions): --tls-cert/--tls-key/--tls-ca and
// --insecure (lib/service/tls.h), --token-file FILE; the token may also come
// from FARM_TOKEN (environment), never from argv. ApplySecurity loads them
// and enforces the plaintext rule: plaintext only to a loopback server or
// with --insecure.
//
// Thread-safety: ClientOptions is a plain value; MakeChannel and NewContext are
// reentrant. Ownership: callers own what these functions return.
#ifndef LIB_CLIENT_CLIENT_H_
#define LIB_CLIENT_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "lib/service/tls.h"

namespace farm::client {

inline constexpr char kDefaultServer[] = "127.0.0.1:7070";

struct ClientOptions {
  std::string server;  // HOST:PORT
  std::string token;   // empty: no authorization metadata
  // Empty: plaintext. root_certs verifies the server; cert_chain/private_key
  // are the client certificate.
  service::TlsPem tls;
};

// A channel to options.server: TLS when options.tls.enabled(), else plaintext.
std::shared_ptr<grpc::Channel> MakeChannel(const ClientOptions& options);

// A context with a deadline of now + timeout (no deadline when timeout is
// absl::InfiniteDuration()) and the bearer token attached.
std::unique_ptr<grpc::ClientContext> NewContext(const ClientOptions& options,
                                                absl::Duration timeout);

// grpc::Status -> absl::Status with the same code and message.
absl::Status ToAbsl(const grpc::Status& status);

struct SecurityFlags {
  service::TlsFlags tls;
  std::string token_file;
};

// Adds the TLS flags and --token-file (env FARM_TOKEN_FILE) to `app`.
void AddSecurityOptions(CLI::App& app, SecurityFlags* out);

// Loads the PEM files and the token (--token-file, else FARM_TOKEN) into
// *options and checks the plaintext rule for options->server.
// InvalidArgument / FailedPrecondition with a message naming the flag.
absl::Status ApplySecurity(const SecurityFlags& flags, ClientOptions* options);

}  // namespace farm::client

#endif  // LIB_CLIENT_CLIENT_H_
