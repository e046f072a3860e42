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
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "lib/service/tls.h"

namespace farm::client {

inline constexpr char kDefaultServer[] = "127.0.0.1:7070";

// The metadata a channel accepts in one answer (gRPC's default is 8 KiB): a
// status message travels in a trailer, percent-encoded, and the scheduler
// sends up to 64 KiB of one, every problem of a spec.
inline constexpr int kMaxMetadataBytes = 256 * 1024;

struct ClientOptions {
  // HOST:PORT, or several IP-literal HOST:PORTs separated by commas (schedulers
  // over one database): the channel connects to the first that answers and
  // moves to the next when it goes away. A DNS name with several addresses
  // fails over the same way.
  std::string server;
  std::string token;  // empty: no authorization metadata
  // Empty: plaintext. root_certs verifies the server; cert_chain/private_key
  // are the client certificate.
  service::TlsPem tls;
};

// The gRPC target for a server list: one address as it is; several become an
// "ipv4:" or "ipv6:" address list. InvalidArgument for an empty entry, for
// several addresses that are not all IP literals of one family (give one DNS
// name with several addresses instead) or for a missing port.
absl::StatusOr<std::string> ChannelTarget(absl::string_view servers);

// A channel to options.server: TLS when options.tls.enabled(), else plaintext.
// Precondition: ChannelTarget(options.server) is OK (ApplySecurity checks it).
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
// *options and checks options->server: a valid server list (ChannelTarget) and
// the plaintext rule for each of its addresses.
// InvalidArgument / FailedPrecondition with a message naming the flag.
absl::Status ApplySecurity(const SecurityFlags& flags, ClientOptions* options);

}  // namespace farm::client

#endif  // LIB_CLIENT_CLIENT_H_
