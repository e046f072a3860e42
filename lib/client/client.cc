#include "lib/client/client.h"

#include <chrono>

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
  return grpc::CreateCustomChannel(options.server, grpc::InsecureChannelCredentials(), args);
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

}  // namespace farm::client
