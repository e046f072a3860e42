// The analyzer's two outbound clients, behind interfaces:
//   JobSubmitter  submits confirm/bisect matrices through the scheduler's
//                 JobService.SubmitMatrix (never by inserting jobs itself);
//   AlertSink     posts alerts to Alertmanager's API v2 (/api/v2/alerts) and
//                 creates / expires its silences (/api/v2/silences).
//
// Thread-safety: implementations are thread-safe (gRPC stubs and one HTTP
// request per call). Errors: kUnavailable for transport failures (retry on
// the next tick); other codes as returned by the peer.
#ifndef SERVICES_ANALYZER_CLIENTS_H_
#define SERVICES_ANALYZER_CLIENTS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "iommufarm/v1/farm.pb.h"
#include "lib/client/client.h"

namespace farm::analyzer {

class JobSubmitter {
 public:
  virtual ~JobSubmitter() = default;
  // Submits the typed spec (SubmitMatrixRequest.spec); returns the matrix
  // id. The same idempotency key returns the first matrix again, which is
  // what makes a restarted analyzer safe.
  virtual absl::StatusOr<int64_t> Submit(const iommufarm::v1::MatrixSpec& spec,
                                         const std::string& idempotency_key) = 0;
};

// gRPC JobService client; `target` is HOST:PORT, `token` the bearer token
// (empty: none).
std::unique_ptr<JobSubmitter> NewGrpcJobSubmitter(const std::string& target,
                                                  const std::string& token);
// The same over `options` (server, token, TLS).
std::unique_ptr<JobSubmitter> NewGrpcJobSubmitter(client::ClientOptions options);

struct Alert {
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::string starts_at;      // RFC 3339; empty: Alertmanager's now
  std::string ends_at;        // RFC 3339; set to resolve
  std::string generator_url;  // the page that explains it; empty: none
};

// A silence whose equality matchers are `matchers` (label -> value).
struct Silence {
  std::map<std::string, std::string> matchers;
  std::string starts_at;  // RFC 3339
  std::string ends_at;    // RFC 3339
  std::string created_by;
  std::string comment;
};

class AlertSink {
 public:
  virtual ~AlertSink() = default;
  virtual absl::Status Post(const std::vector<Alert>& alerts) = 0;
  // Returns Alertmanager's silence id.
  virtual absl::StatusOr<std::string> CreateSilence(const Silence& silence) = 0;
  // Expires the silence; one Alertmanager no longer knows counts as expired.
  virtual absl::Status ExpireSilence(const std::string& silence_id) = 0;
};

// How the analyzer authenticates Alertmanager and itself to it (https only).
struct AlertmanagerAuth {
  std::string ca_file;       // PEM CA bundle verifying the server; empty: system CAs
  std::string bearer_token;  // "Authorization: Bearer"; from a file, never argv
  std::string basic_user, basic_password;
};

// The CA path and the credential files of farm-analyzer's flags: the bearer
// file holds the token, the basic file one line USER:PASSWORD (secrets by
// file, never argv). kInvalidArgument / kNotFound with the flag's name.
absl::StatusOr<AlertmanagerAuth> LoadAlertmanagerAuth(const std::string& ca_file,
                                                      const std::string& bearer_file,
                                                      const std::string& basic_file);

// `base_url` like http://127.0.0.1:9093 or https://am.lab:9093 (a path prefix
// is kept). Credentials and a CA need https.
absl::StatusOr<std::unique_ptr<AlertSink>> NewAlertmanagerSink(const std::string& base_url,
                                                               AlertmanagerAuth auth = {});

// The JSON body Alertmanager's POST /api/v2/alerts takes.
std::string AlertsToJson(const std::vector<Alert>& alerts);
// The JSON body of POST /api/v2/silences (postableSilence).
std::string SilenceToJson(const Silence& silence);

}  // namespace farm::analyzer

#endif  // SERVICES_ANALYZER_CLIENTS_H_
