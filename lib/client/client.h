// farm::client: how farmctl and farm-agent reach a farm server.
//
// One small shared helper so that both clients agree on the default server
// address and on how the token travels: as "authorization: Bearer <token>"
// metadata on every call. (The FARM_SERVER / FARM_TOKEN fallbacks are the
// mains' CLI11 `envname`, see lib/service/flags.h.) The token is set on
// each ClientContext rather than through call credentials because gRPC drops
// call credentials on insecure (loopback) channels.
//
// Thread-safety: ClientOptions is a plain value; MakeChannel and NewContext are
// reentrant. Ownership: callers own what these functions return.
#ifndef LIB_CLIENT_CLIENT_H_
#define LIB_CLIENT_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace farm::client {

inline constexpr char kDefaultServer[] = "127.0.0.1:7070";

struct ClientOptions {
  std::string server;  // HOST:PORT
  std::string token;   // empty: no authorization metadata
};

// An insecure channel to options.server (loopback / private network farms).
std::shared_ptr<grpc::Channel> MakeChannel(const ClientOptions& options);

// A context with a deadline of now + timeout (no deadline when timeout is
// absl::InfiniteDuration()) and the bearer token attached.
std::unique_ptr<grpc::ClientContext> NewContext(const ClientOptions& options,
                                                absl::Duration timeout);

// grpc::Status -> absl::Status with the same code and message.
absl::Status ToAbsl(const grpc::Status& status);

}  // namespace farm::client

#endif  // LIB_CLIENT_CLIENT_H_
