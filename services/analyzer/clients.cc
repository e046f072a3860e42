#include "services/analyzer/clients.h"

#include <grpcpp/grpcpp.h>
// https Alertmanager URLs (pkg-config's cpp-httplib defines it already).
// Only this file includes httplib, so the define holds for every use.
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "iommufarm/v1/farm.grpc.pb.h"
#include "lib/client/client.h"
#include "lib/service/tls.h"

namespace farm::analyzer {
namespace {

// The scheduler reached the way farmctl and farm-agent reach it (lib/client):
// one channel, the bearer token on every call.
class GrpcJobSubmitter final : public JobSubmitter {
 public:
  explicit GrpcJobSubmitter(client::ClientOptions options)
      : options_(std::move(options)),
        stub_(iommufarm::v1::JobService::NewStub(client::MakeChannel(options_))) {}

  absl::StatusOr<int64_t> Submit(const iommufarm::v1::MatrixSpec& spec,
                                 const std::string& idempotency_key) override {
    std::unique_ptr<grpc::ClientContext> ctx = client::NewContext(options_, absl::Seconds(30));
    iommufarm::v1::SubmitMatrixRequest req;
    *req.mutable_spec() = spec;
    req.set_idempotency_key(idempotency_key);
    iommufarm::v1::SubmitMatrixResponse resp;
    const absl::Status s = client::ToAbsl(stub_->SubmitMatrix(ctx.get(), req, &resp));
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat("SubmitMatrix: ", s.message()));
    return resp.matrix().id();
  }

 private:
  const client::ClientOptions options_;
  std::unique_ptr<iommufarm::v1::JobService::Stub> stub_;
};

class AlertmanagerSink final : public AlertSink {
 public:
  AlertmanagerSink(std::string origin, std::string prefix, AlertmanagerAuth auth)
      : origin_(std::move(origin)), prefix_(std::move(prefix)), auth_(std::move(auth)) {}

  absl::Status Post(const std::vector<Alert>& alerts) override {
    if (alerts.empty()) return absl::OkStatus();
    std::unique_ptr<httplib::Client> cli = Client();
    auto res = cli->Post(prefix_ + "/api/v2/alerts", AlertsToJson(alerts), "application/json");
    if (!res) return Unreachable(res.error());
    if (res->status / 100 != 2) {
      return absl::InternalError(
          absl::StrCat("alertmanager answered ", res->status, ": ", res->body));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> CreateSilence(const Silence& silence) override {
    std::unique_ptr<httplib::Client> cli = Client();
    auto res = cli->Post(prefix_ + "/api/v2/silences", SilenceToJson(silence), "application/json");
    if (!res) return Unreachable(res.error());
    if (res->status / 100 != 2) {
      return absl::InternalError(
          absl::StrCat("alertmanager answered ", res->status, " to a silence: ", res->body));
    }
    const nlohmann::json body = nlohmann::json::parse(res->body, nullptr, false);
    if (!body.is_object() || !body.contains("silenceID") || !body["silenceID"].is_string()) {
      return absl::InternalError(absl::StrCat("alertmanager silence answer: ", res->body));
    }
    return body["silenceID"].get<std::string>();
  }

  absl::Status ExpireSilence(const std::string& silence_id) override {
    std::unique_ptr<httplib::Client> cli = Client();
    auto res = cli->Delete(prefix_ + "/api/v2/silence/" + silence_id);
    if (!res) return Unreachable(res.error());
    // 404: Alertmanager lost it (no persistence, or it expired long ago);
    // 500 "silence ... already expired" on some versions: done either way.
    if (res->status == 404 || absl::StrContains(res->body, "already expired")) {
      return absl::OkStatus();
    }
    if (res->status / 100 != 2) {
      return absl::InternalError(absl::StrCat("alertmanager answered ", res->status,
                                              " to expiring silence ", silence_id, ": ",
                                              res->body));
    }
    return absl::OkStatus();
  }

 private:
  // Every call (alerts and silences) verifies the server and carries the
  // credential.
  std::unique_ptr<httplib::Client> Client() const {
    auto cli = std::make_unique<httplib::Client>(origin_);
    cli->set_connection_timeout(5);
    cli->set_read_timeout(10);
    if (!auth_.ca_file.empty()) cli->set_ca_cert_path(auth_.ca_file.c_str());
    if (absl::StartsWith(origin_, "https://")) cli->enable_server_certificate_verification(true);
    if (!auth_.bearer_token.empty()) cli->set_bearer_token_auth(auth_.bearer_token.c_str());
    if (!auth_.basic_user.empty()) {
      cli->set_basic_auth(auth_.basic_user.c_str(), auth_.basic_password.c_str());
    }
    return cli;
  }

  absl::Status Unreachable(httplib::Error error) const {
    if (error == httplib::Error::SSLServerVerification) {
      return absl::UnavailableError(
          absl::StrCat("alertmanager ", origin_, ": its TLS certificate does not verify against ",
                       auth_.ca_file.empty() ? "the system CAs" : auth_.ca_file,
                       " (give the CA that signed it with --alertmanager-ca)"));
    }
    return absl::UnavailableError(
        absl::StrCat("alertmanager ", origin_, ": ", httplib::to_string(error)));
  }

  const std::string origin_;
  const std::string prefix_;
  const AlertmanagerAuth auth_;
};

}  // namespace

std::unique_ptr<JobSubmitter> NewGrpcJobSubmitter(const std::string& target,
                                                  const std::string& token) {
  client::ClientOptions options;
  options.server = target;
  options.token = token;
  return std::make_unique<GrpcJobSubmitter>(std::move(options));
}

std::unique_ptr<JobSubmitter> NewGrpcJobSubmitter(client::ClientOptions options) {
  return std::make_unique<GrpcJobSubmitter>(std::move(options));
}

std::string AlertsToJson(const std::vector<Alert>& alerts) {
  nlohmann::json arr = nlohmann::json::array();
  for (const Alert& a : alerts) {
    nlohmann::json j;
    j["labels"] = a.labels;
    j["annotations"] = a.annotations;
    if (!a.starts_at.empty()) j["startsAt"] = a.starts_at;
    if (!a.ends_at.empty()) j["endsAt"] = a.ends_at;
    if (!a.generator_url.empty()) j["generatorURL"] = a.generator_url;
    arr.push_back(std::move(j));
  }
  return arr.dump();
}

std::string SilenceToJson(const Silence& silence) {
  nlohmann::json matchers = nlohmann::json::array();
  for (const auto& [name, value] : silence.matchers) {
    matchers.push_back({{"name", name}, {"value", value}, {"isRegex", false}, {"isEqual", true}});
  }
  return nlohmann::json{{"matchers", matchers},
                        {"startsAt", silence.starts_at},
                        {"endsAt", silence.ends_at},
                        {"createdBy", silence.created_by},
                        {"comment", silence.comment}}
      .dump();
}

absl::StatusOr<AlertmanagerAuth> LoadAlertmanagerAuth(const std::string& ca_file,
                                                      const std::string& bearer_file,
                                                      const std::string& basic_file) {
  AlertmanagerAuth auth;
  auth.ca_file = ca_file;
  if (!bearer_file.empty()) {
    auto t = service::ReadSecretFile(bearer_file, "--alertmanager-bearer-file");
    if (!t.ok()) return t.status();
    auth.bearer_token = *t;
  }
  if (!basic_file.empty()) {
    auto t = service::ReadSecretFile(basic_file, "--alertmanager-basic-file");
    if (!t.ok()) return t.status();
    const size_t colon = t->find(':');
    if (colon == std::string::npos || colon == 0) {
      return absl::InvalidArgumentError(
          "--alertmanager-basic-file: expected one line USER:PASSWORD");
    }
    auth.basic_user = t->substr(0, colon);
    auth.basic_password = t->substr(colon + 1);
  }
  return auth;
}

absl::StatusOr<std::unique_ptr<AlertSink>> NewAlertmanagerSink(const std::string& base_url,
                                                               AlertmanagerAuth auth) {
  if (!absl::StartsWith(base_url, "http://") && !absl::StartsWith(base_url, "https://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--alertmanager: expected http://HOST:PORT, got \"", base_url, "\""));
  }
  const size_t scheme_end = base_url.find("://") + 3;
  const size_t path = base_url.find('/', scheme_end);
  std::string origin = path == std::string::npos ? base_url : base_url.substr(0, path);
  std::string prefix = path == std::string::npos ? "" : base_url.substr(path);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (!auth.ca_file.empty() && !absl::StartsWith(origin, "https://")) {
    return absl::InvalidArgumentError("--alertmanager-ca needs an https:// --alertmanager URL");
  }
  if ((!auth.bearer_token.empty() || !auth.basic_user.empty()) &&
      !absl::StartsWith(origin, "https://")) {
    return absl::InvalidArgumentError(
        "--alertmanager credentials travel only over https: use an https:// URL");
  }
  return std::unique_ptr<AlertSink>(new AlertmanagerSink(origin, prefix, std::move(auth)));
}

}  // namespace farm::analyzer
