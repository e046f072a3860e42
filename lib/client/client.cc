#include "lib/client/client.h"

#include <chrono>
#include <cstdlib>

#include "lib/auth/auth.h"

namespace farm::client {

std::shared_ptr<grpc::Channel> MakeChannel(const ClientOptions& options) {
  grpc::ChannelArguments args;
  // Results of big matrices stream as many messages; single large raw outputs
  // (emulator JSON) must still fit one message.
  args.SetMaxReceiveMessageSize(64 * 1024 * 1024);
  // Keepalive: a dead or frozen server is noticed within ~15 s even on an
  // idle channel or a quiet stream (the scheduler permits pings every 5 s).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (options.tls.enabled()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls.root_certs;
    ssl.pem_cert_chain = options.tls.cert_chain;
    ssl.pem_private_key = options.tls.private_key;
    creds = grpc::SslCredentials(ssl);
  }
  return grpc::CreateCustomChannel(options.server, creds, args);
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
  return service::CheckPlaintextAllowed(options->server, options->tls, flags.tls.insecure,
                                        "server");
}

}  // namespace farm::client
