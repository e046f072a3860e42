#include "lib/service/tls.h"

#include <arpa/inet.h>

#include <grpcpp/security/server_credentials.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lib/base/file.h"

namespace farm::service {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view flag) {
  absl::StatusOr<std::string> text = base::ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " \"", path, "\": cannot read"));
  }
  if (!absl::StrContains(*text, "-----BEGIN ")) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " \"", path, "\": not a PEM file"));
  }
  return text;
}

absl::string_view HostOf(absl::string_view host_port) {
  if (absl::StartsWith(host_port, "[")) {
    const size_t close = host_port.find(']');
    return close == absl::string_view::npos ? host_port.substr(1) : host_port.substr(1, close - 1);
  }
  const size_t colon = host_port.rfind(':');
  // A bare IPv6 address has several colons and no port.
  if (colon != absl::string_view::npos && host_port.find(':') == colon) {
    return host_port.substr(0, colon);
  }
  return host_port;
}

}  // namespace

void AddTlsOptions(CLI::App& app, TlsFlags* out, bool server) {
  app.add_option("--tls-cert", out->cert,
                 server ? "PEM certificate chain the server presents (with --tls-key: TLS)"
                        : "PEM client certificate presented to the server (mTLS)")
      ->envname("FARM_TLS_CERT");
  app.add_option("--tls-key", out->key, "PEM private key of --tls-cert")->envname("FARM_TLS_KEY");
  app.add_option("--tls-ca", out->ca,
                 server ? "PEM CA bundle: client certificates are required and verified against "
                          "it (mTLS)"
                        : "PEM CA bundle the server certificate is verified against (TLS)")
      ->envname("FARM_TLS_CA");
  app.add_flag("--insecure", out->insecure,
               server ? "allow plaintext gRPC on a non-loopback address (logged as a warning)"
                      : "allow a plaintext connection to a non-loopback server")
      ->envname("FARM_INSECURE");
}

absl::StatusOr<TlsPem> LoadTls(const TlsFlags& flags, bool server) {
  TlsPem pem;
  if (flags.cert.empty() != flags.key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together: give both or none");
  }
  if (server && !flags.ca.empty() && flags.cert.empty()) {
    return absl::InvalidArgumentError(
        "--tls-ca on a server needs --tls-cert and --tls-key (the server's own certificate)");
  }
  if (!flags.cert.empty()) {
    absl::StatusOr<std::string> cert = ReadPem(flags.cert, "--tls-cert");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem(flags.key, "--tls-key");
    if (!key.ok()) return key.status();
    pem.cert_chain = *std::move(cert);
    pem.private_key = *std::move(key);
  }
  if (!flags.ca.empty()) {
    absl::StatusOr<std::string> ca = ReadPem(flags.ca, "--tls-ca");
    if (!ca.ok()) return ca.status();
    pem.root_certs = *std::move(ca);
  }
  return pem;
}

bool IsLoopbackAddress(absl::string_view host_port) {
  const std::string host(HostOf(host_port));
  if (absl::EqualsIgnoreCase(host, "localhost")) return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const TlsPem& pem) {
  if (!pem.enabled()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions opts(
      pem.root_certs.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                             : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  opts.pem_root_certs = pem.root_certs;
  opts.pem_key_cert_pairs.push_back({pem.private_key, pem.cert_chain});
  return grpc::SslServerCredentials(opts);
}

absl::Status CheckPlaintextAllowed(absl::string_view address, const TlsPem& pem, bool insecure,
                                   absl::string_view what) {
  if (pem.enabled() || insecure || IsLoopbackAddress(address)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      what, " ", address,
      ": plaintext gRPC off loopback is refused. Give --tls-cert/--tls-key (and --tls-ca for "
      "client certificates; scripts/farm-certs makes them), or pass --insecure to accept "
      "plaintext on this network"));
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, absl::string_view flag) {
  absl::StatusOr<std::string> text = base::ReadFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " \"", path, "\": cannot read"));
  }
  const absl::string_view first_line = absl::string_view(*text).substr(0, text->find('\n'));
  std::string secret(absl::StripAsciiWhitespace(first_line));
  if (secret.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " \"", path, "\": empty"));
  }
  return secret;
}

}  // namespace farm::service
