// farm::service TLS: the transport-security flags every farm binary shares
// (--tls-cert, --tls-key, --tls-ca, --insecure), loading PEM files, the gRPC
// server credentials built from them, and the one rule for plaintext: only on
// loopback, or anywhere with an explicit --insecure (which the caller logs as
// a warning).
//
// Environment fallbacks differ by side, so that a scheduler started from a
// shell set up for farmctl never serves the client's pair: clients read
// FARM_TLS_CERT/_KEY/_CA and FARM_INSECURE, the server only
// FARM_SCHEDULER_TLS_CERT/_KEY/_CA and FARM_SCHEDULER_INSECURE.
//
// A loaded pair is checked with OpenSSL before anything listens: the key
// must be the certificate's, and a server certificate must be valid now
// (gRPC itself would fail later with a message that names neither).
//
// Server: cert+key serve TLS; a CA in addition requires and verifies client
// certificates (mTLS). Client: a CA verifies the server; cert+key present a
// client certificate. Secrets (bearer tokens) are read from files or the
// environment, never taken from argv: ReadSecretFile.
//
// Thread-safety: plain values and free functions; AddTlsOptions like the
// other flag helpers (from main, before other threads use the App).
// Ownership: AddTlsOptions keeps `out`, which must outlive app.parse.
#ifndef LIB_SERVICE_TLS_H_
#define LIB_SERVICE_TLS_H_

#include <memory>
#include <string>

#include <grpcpp/security/server_credentials.h>
#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace farm::service {

// What the flags name (paths), before loading.
struct TlsFlags {
  std::string cert;  // PEM certificate chain
  std::string key;   // PEM private key
  std::string ca;    // PEM CA bundle: server: verify clients (mTLS); client: verify server
  bool insecure = false;
};

// The loaded PEM contents. All empty: plaintext.
struct TlsPem {
  std::string cert_chain;
  std::string private_key;
  std::string root_certs;
  bool enabled() const { return !cert_chain.empty() || !root_certs.empty(); }
};

// Adds --tls-cert/--tls-key/--tls-ca and --insecure to `app`, with the
// environment fallbacks of that side: FARM_SCHEDULER_TLS_CERT, _TLS_KEY,
// _TLS_CA and _INSECURE for a server; FARM_TLS_CERT, FARM_TLS_KEY,
// FARM_TLS_CA and FARM_INSECURE for a client. A client's variables never
// configure a server started from the same shell.
void AddTlsOptions(CLI::App& app, TlsFlags* out, bool server);

// Reads the files `flags` name. InvalidArgument naming the flag when a file
// cannot be read or is not PEM, when only one of cert/key is given, (for a
// server) when a CA is given without cert and key, or when CheckPair (and,
// for a server, CheckValidity at absl::Now()) refuses the pair.
absl::StatusOr<TlsPem> LoadTls(const TlsFlags& flags, bool server);

// The pair of `pem` (no-op without cert_chain): the first certificate of the
// chain and the key parse, and the key is the certificate's. InvalidArgument
// saying which (`cert_what` / `key_what` name them, e.g. the flags).
absl::Status CheckPair(const TlsPem& pem, absl::string_view cert_what = "--tls-cert",
                       absl::string_view key_what = "--tls-key");

// The first certificate of pem.cert_chain is valid at `now` (no-op without
// cert_chain). InvalidArgument with its notBefore/notAfter dates otherwise.
absl::Status CheckValidity(const TlsPem& pem, absl::Time now,
                           absl::string_view cert_what = "--tls-cert");

// True for "localhost", 127.0.0.0/8 and ::1 (host of "host:port" or
// "[v6]:port"; a bare host works too).
bool IsLoopbackAddress(absl::string_view host_port);

// Server credentials: insecure when !pem.enabled(); TLS with cert+key;
// client certificates required and verified when root_certs is set.
// REQUIRES: pem.enabled() implies cert_chain and private_key are set.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const TlsPem& pem);

// The plaintext rule for a listener or a channel at `address`: OK with TLS,
// on loopback, or with `insecure`; else FailedPrecondition saying how to fix
// it (`what` names the flag, e.g. "--listen").
absl::Status CheckPlaintextAllowed(absl::string_view address, const TlsPem& pem, bool insecure,
                                   absl::string_view what);

// The first line of the file at `path` (a token), trailing whitespace cut.
// InvalidArgument naming `flag` when it cannot be read or is empty.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, absl::string_view flag);

}  // namespace farm::service

#endif  // LIB_SERVICE_TLS_H_
