#include "lib/client/client.h"

#include <chrono>
#include <cstdlib>

#include <arpa/inet.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/auth/auth.h"
#include "lib/base/check.h"
#include "lib/service/reconnect.h"

namespace farm::client {
namespace {

struct HostPort {
  std::string host;  // without brackets
  std::string port;
};

absl::StatusOr<HostPort> SplitHostPort(absl::string_view address) {
  HostPort hp;
  size_t colon;
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return absl::InvalidArgumentError(
          absl::StrCat("server address \"", address, "\": expected [IPV6]:PORT"));
    }
    hp.host = std::string(address.substr(1, close - 1));
    colon = close + 1;
  } else {
    colon = address.rfind(':');
    if (colon == absl::string_view::npos || address.find(':') != colon) {
      return absl::InvalidArgumentError(
          absl::StrCat("server address \"", address, "\": expected HOST:PORT"));
    }
    hp.host = std::string(address.substr(0, colon));
  }
  hp.port = std::string(address.substr(colon + 1));
  if (hp.host.empty() || hp.port.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("server address \"", address, "\": expected HOST:PORT"));
  }
  return hp;
}

}  // namespace

absl::StatusOr<std::string> ChannelTarget(absl::string_view servers) {
  std::vector<absl::string_view> parts = absl::StrSplit(servers, ',');
  if (parts.size() == 1 && !parts[0].empty()) return std::string(servers);
  std::vector<std::string> v4, v6;
  for (absl::string_view part : parts) {
    if (part.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("server list \"", servers, "\": empty address"));
    }
    absl::StatusOr<HostPort> hp = SplitHostPort(part);
    if (!hp.ok()) return hp.status();
    in_addr a4{};
    in6_addr a6{};
    if (inet_pton(AF_INET, hp->host.c_str(), &a4) == 1) {
      v4.push_back(absl::StrCat(hp->host, ":", hp->port));
    } else if (inet_pton(AF_INET6, hp->host.c_str(), &a6) == 1) {
      v6.push_back(absl::StrCat("[", hp->host, "]:", hp->port));
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "server list \"", servers, "\": \"", part,
          "\" is not an IP address; several servers are IP:PORT literals of one family, or give "
          "one DNS name that resolves to all of them"));
    }
  }
  if (!v4.empty() && !v6.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("server list \"", servers, "\": mixes IPv4 and IPv6 addresses"));
  }
  return v4.empty() ? absl::StrCat("ipv6:", absl::StrJoin(v6, ","))
                    : absl::StrCat("ipv4:", absl::StrJoin(v4, ","));
}

std::shared_ptr<grpc::Channel> MakeChannel(const ClientOptions& options) {
  grpc::ChannelArguments args;
  // Results of big matrices stream as many messages; single large raw outputs
  // (emulator JSON) must still fit one message.
  args.SetMaxReceiveMessageSize(64 * 1024 * 1024);
  args.SetInt(GRPC_ARG_MAX_METADATA_SIZE, kMaxMetadataBytes);
  // Keepalive: a dead or frozen server is noticed within ~15 s even on an
  // idle channel or a quiet stream (the scheduler permits pings every 5 s).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // A restarted scheduler is reached again within service::kReconnectBound,
  // which its reaper's grace counts on.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              static_cast<int>(absl::ToInt64Milliseconds(service::kInitialReconnectBackoff)));
  // GRPC_ARG_MIN_RECONNECT_BACKOFF_MS is not a backoff: it is the least time
  // one connection attempt (TCP and TLS handshake) gets, 20 s by default.
  // Left at that: cut to the backoff, a TLS handshake of a client whose calls
  // fail fast (nothing polls the socket but gRPC's 5 s backup poller) never
  // finished, and an mTLS agent never came back after a scheduler restart.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              static_cast<int>(absl::ToInt64Milliseconds(service::kMaxReconnectBackoff)));
  absl::StatusOr<std::string> target = ChannelTarget(options.server);
  FARM_DCHECK(target.ok(), "server list not checked by ApplySecurity");
  const bool several = target.ok() && *target != options.server;
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (options.tls.enabled()) {
    // An address list has no single authority; the servers' certificates are
    // checked against the first address's host, as for one server.
    if (several) {
      absl::StatusOr<HostPort> first =
          SplitHostPort(std::vector<absl::string_view>(absl::StrSplit(options.server, ','))[0]);
      if (first.ok()) args.SetSslTargetNameOverride(first->host);
    }
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls.root_certs;
    ssl.pem_cert_chain = options.tls.cert_chain;
    ssl.pem_private_key = options.tls.private_key;
    creds = grpc::SslCredentials(ssl);
  }
  return grpc::CreateCustomChannel(target.ok() ? *target : options.server, creds, args);
}

std::unique_ptr<grpc::ClientContext> NewContext(const ClientOptions& options,
                                                absl::Duration timeout) {
  auto context = std::make_unique<grpc::ClientContext>();
  if (timeout != absl::InfiniteDuration()) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }
  farm::auth::AttachBearer(context.get(), options.token);
  return context;
}

absl::Status ToAbsl(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

void AddSecurityOptions(CLI::App& app, SecurityFlags* out) {
  service::AddTlsOptions(app, &out->tls, /*server=*/false);
  app.add_option("--token-file", out->token_file,
                 "file whose first line is the bearer token sent with every call (or set "
                 "FARM_TOKEN; never on the command line)")
      ->envname("FARM_TOKEN_FILE");
}

absl::Status ApplySecurity(const SecurityFlags& flags, ClientOptions* options) {
  absl::StatusOr<service::TlsPem> pem = service::LoadTls(flags.tls, /*server=*/false);
  if (!pem.ok()) return pem.status();
  options->tls = *std::move(pem);
  if (!flags.token_file.empty()) {
    absl::StatusOr<std::string> token = service::ReadSecretFile(flags.token_file, "--token-file");
    if (!token.ok()) return token.status();
    options->token = *std::move(token);
  } else if (const char* env = std::getenv("FARM_TOKEN"); env != nullptr && *env != '\0') {
    options->token = env;
  }
  if (absl::StatusOr<std::string> target = ChannelTarget(options->server); !target.ok()) {
    return target.status();
  }
  for (absl::string_view address : absl::StrSplit(options->server, ',')) {
    absl::Status allowed =
        service::CheckPlaintextAllowed(address, options->tls, flags.tls.insecure, "server");
    if (!allowed.ok()) return allowed;
  }
  return absl::OkStatus();
}

}  // namespace farm::client
