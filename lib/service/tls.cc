#include "lib/service/tls.h"

#include <arpa/inet.h>

#include <grpcpp/security/server_credentials.h>
#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <ctime>
#include <memory>

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

using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;
using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;
using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

// The first certificate of a PEM chain; null when none parses.
X509Ptr FirstCertificate(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
  X509Ptr cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr, &X509_free);
  ERR_clear_error();
  return cert;
}

// "2024-01-31 12:00:00 UTC"; the ASN.1 text when it does not convert.
std::string TimeText(const ASN1_TIME* t) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(t, &tm) == 1) {
    char buf[64];
    if (std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm) > 0) return buf;
  }
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(t)),
                     static_cast<size_t>(ASN1_STRING_length(t)));
}

}  // namespace

// Spelled out, not built from a prefix, so that a search for a variable (and
// the test harness's scan of the variables it clears) finds its reader.
struct TlsEnvNames {
  const char* cert;
  const char* key;
  const char* ca;
  const char* insecure;
};
constexpr TlsEnvNames kServerTlsEnv{"FARM_SCHEDULER_TLS_CERT", "FARM_SCHEDULER_TLS_KEY",
                                    "FARM_SCHEDULER_TLS_CA", "FARM_SCHEDULER_INSECURE"};
constexpr TlsEnvNames kClientTlsEnv{"FARM_TLS_CERT", "FARM_TLS_KEY", "FARM_TLS_CA",
                                    "FARM_INSECURE"};

absl::Status CheckPair(const TlsPem& pem, absl::string_view cert_what, absl::string_view key_what) {
  if (pem.cert_chain.empty()) return absl::OkStatus();
  X509Ptr cert = FirstCertificate(pem.cert_chain);
  if (!cert) {
    return absl::InvalidArgumentError(
        absl::StrCat(cert_what, ": no PEM certificate could be parsed"));
  }
  BioPtr bio(BIO_new_mem_buf(pem.private_key.data(), static_cast<int>(pem.private_key.size())),
             &BIO_free);
  KeyPtr key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr,
             &EVP_PKEY_free);
  ERR_clear_error();
  if (!key) {
    return absl::InvalidArgumentError(absl::StrCat(
        key_what, ": no PEM private key could be parsed (an encrypted key is not supported)"));
  }
  const int match = X509_check_private_key(cert.get(), key.get());
  ERR_clear_error();
  if (match != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        key_what, " does not belong to ", cert_what,
        ": the key's public half is not the certificate's public key (give the key the "
        "certificate was made from)"));
  }
  return absl::OkStatus();
}

absl::Status CheckValidity(const TlsPem& pem, absl::Time now, absl::string_view cert_what) {
  if (pem.cert_chain.empty()) return absl::OkStatus();
  X509Ptr cert = FirstCertificate(pem.cert_chain);
  if (!cert) {
    return absl::InvalidArgumentError(
        absl::StrCat(cert_what, ": no PEM certificate could be parsed"));
  }
  time_t t = absl::ToTimeT(now);
  const ASN1_TIME* not_before = X509_get0_notBefore(cert.get());
  const ASN1_TIME* not_after = X509_get0_notAfter(cert.get());
  const std::string dates =
      absl::StrCat("valid from ", TimeText(not_before), " to ", TimeText(not_after));
  if (X509_cmp_time(not_before, &t) > 0) {
    return absl::InvalidArgumentError(absl::StrCat(cert_what,
                                                   ": the certificate is not valid yet (", dates,
                                                   "; is this host's clock right?)"));
  }
  if (X509_cmp_time(not_after, &t) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(cert_what, ": the certificate has expired (", dates,
                     "); make a new one (scripts/farm-certs init DIR keeps the CA)"));
  }
  return absl::OkStatus();
}

void AddTlsOptions(CLI::App& app, TlsFlags* out, bool server) {
  const TlsEnvNames& env = server ? kServerTlsEnv : kClientTlsEnv;
  app.add_option("--tls-cert", out->cert,
                 server ? "PEM certificate chain the server presents (with --tls-key: TLS)"
                        : "PEM client certificate presented to the server (mTLS)")
      ->envname(env.cert);
  app.add_option("--tls-key", out->key, "PEM private key of --tls-cert")->envname(env.key);
  app.add_option("--tls-ca", out->ca,
                 server ? "PEM CA bundle: client certificates are required and verified against "
                          "it (mTLS)"
                        : "PEM CA bundle the server certificate is verified against (TLS)")
      ->envname(env.ca);
  app.add_flag("--insecure", out->insecure,
               server ? "allow plaintext gRPC on a non-loopback address (logged as a warning)"
                      : "allow a plaintext connection to a non-loopback server")
      ->envname(env.insecure);
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
    const std::string cert_what = absl::StrCat("--tls-cert \"", flags.cert, "\"");
    absl::Status pair = CheckPair(pem, cert_what, absl::StrCat("--tls-key \"", flags.key, "\""));
    if (!pair.ok()) return pair;
    if (server) {
      absl::Status valid = CheckValidity(pem, absl::Now(), cert_what);
      if (!valid.ok()) return valid;
    }
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
