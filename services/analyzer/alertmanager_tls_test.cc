// The analyzer's Alertmanager client against a real Alertmanager over HTTPS
// with basic auth (--web.config.file: tls_server_config + basic_auth_users),
// certificates from scripts/farm-certs, the credential from a file as
// farm-analyzer reads it (--alertmanager-ca, --alertmanager-basic-file).
// Accepted with the right CA and credential; a wrong CA, a wrong password
// and no credential each fail with an error that says which.
#include <crypt.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#include <gtest/gtest.h>
#include <httplib.h>

#include "services/analyzer/clients.h"
#include "testing/service_harness.h"

namespace farm::analyzer {
namespace {

int Sh(const std::string& cmd) {
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// bcrypt through libcrypt (libxcrypt), the hash Alertmanager's web config
// takes; no htpasswd or python bcrypt needed.
std::string Bcrypt(const std::string& password) {
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  if (crypt_gensalt_rn("$2b$", 8, nullptr, 0, salt, sizeof salt) == nullptr) return "";
  crypt_data data{};
  const char* hash = crypt_r(password.c_str(), salt, &data);
  return hash != nullptr && hash[0] == '$' ? hash : "";
}

void WriteSecret(const std::string& path, const std::string& text) {
  std::ofstream(path) << text << "\n";
  ::chmod(path.c_str(), 0600);
}

Alert TestAlert(const std::string& name) {
  Alert a;
  a.labels = {{"alertname", name}, {"severity", "info"}};
  a.annotations = {{"summary", "posted over https by the analyzer's client"}};
  return a;
}

class AlertmanagerTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = testing::HarnessTempBase() + "/farm-am-tls-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    const std::string certs = std::string(FARM_SOURCE_DIR) + "/scripts/farm-certs";
    ASSERT_EQ(Sh(certs + " init " + dir_ + "/ca 2>/dev/null"), 0);
    ASSERT_EQ(Sh(certs + " init " + dir_ + "/other 2>/dev/null"), 0);
    const std::string hash = Bcrypt("s3cret pass");
    ASSERT_FALSE(hash.empty()) << "libcrypt has no bcrypt";
    testing::AlertmanagerOptions o;
    o.tls_cert_file = dir_ + "/ca/server.pem";
    o.tls_key_file = dir_ + "/ca/server.key";
    o.basic_auth_user = "farm";
    o.basic_auth_bcrypt = hash;
    auto am = testing::AlertmanagerInstance::Start(o);
    ASSERT_TRUE(am.ok()) << am.status();
    am_ = std::move(*am);
    ASSERT_EQ(am_->BaseUrl().rfind("https://", 0), 0u) << am_->BaseUrl();
    WriteSecret(dir_ + "/basic", "farm:s3cret pass");
    WriteSecret(dir_ + "/wrong", "farm:guess");
  }
  void TearDown() override {
    am_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<AlertSink> Sink(const std::string& ca, const std::string& basic_file) {
    absl::StatusOr<AlertmanagerAuth> auth = LoadAlertmanagerAuth(ca, "", basic_file);
    EXPECT_TRUE(auth.ok()) << auth.status();
    if (!auth.ok()) return nullptr;
    auto sink = NewAlertmanagerSink(am_->BaseUrl(), *auth);
    EXPECT_TRUE(sink.ok()) << sink.status();
    return sink.ok() ? std::move(*sink) : nullptr;
  }

  // The alerts Alertmanager holds, read over https with the credential.
  std::string AlertsJson() {
    httplib::Client c(am_->BaseUrl());
    c.set_ca_cert_path((dir_ + "/ca/ca.pem").c_str());
    c.enable_server_certificate_verification(true);
    c.set_basic_auth("farm", "s3cret pass");
    auto res = c.Get("/api/v2/alerts");
    if (!res) return "error: " + httplib::to_string(res.error());
    return std::to_string(res->status) + " " + res->body;
  }

  std::string dir_;
  std::unique_ptr<testing::AlertmanagerInstance> am_;
};

TEST_F(AlertmanagerTlsTest, PostsWithCaAndCredentialFile) {
  std::unique_ptr<AlertSink> sink = Sink(dir_ + "/ca/ca.pem", dir_ + "/basic");
  ASSERT_NE(sink, nullptr);
  absl::Status st = sink->Post({TestAlert("FarmHttpsAlert")});
  ASSERT_TRUE(st.ok()) << st << "\n" << am_->LogTail();
  const std::string alerts = AlertsJson();
  EXPECT_EQ(alerts.rfind("200 ", 0), 0u) << alerts;
  EXPECT_NE(alerts.find("FarmHttpsAlert"), std::string::npos) << alerts;

  // Silences go the same way (CA and credential on every call).
  Silence s;
  s.matchers = {{"alertname", "FarmHttpsAlert"}};
  s.starts_at = "2026-01-01T00:00:00Z";
  s.ends_at = "2099-01-01T00:00:00Z";
  s.created_by = "alertmanager_tls_test";
  s.comment = "https";
  absl::StatusOr<std::string> id = sink->CreateSilence(s);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_FALSE(id->empty());
  EXPECT_TRUE(sink->ExpireSilence(*id).ok());
}

TEST_F(AlertmanagerTlsTest, WrongCaFailsWithAClearError) {
  std::unique_ptr<AlertSink> sink = Sink(dir_ + "/other/ca.pem", dir_ + "/basic");
  ASSERT_NE(sink, nullptr);
  absl::Status st = sink->Post({TestAlert("FarmUntrusted")});
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_NE(st.message().find("does not verify"), std::string::npos) << st;
  EXPECT_NE(st.message().find("--alertmanager-ca"), std::string::npos) << st;
  EXPECT_EQ(AlertsJson().find("FarmUntrusted"), std::string::npos);
}

TEST_F(AlertmanagerTlsTest, WrongOrNoCredentialIsRefused) {
  std::unique_ptr<AlertSink> wrong = Sink(dir_ + "/ca/ca.pem", dir_ + "/wrong");
  ASSERT_NE(wrong, nullptr);
  absl::Status st = wrong->Post({TestAlert("FarmWrongPassword")});
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal) << st;
  EXPECT_NE(st.message().find("401"), std::string::npos) << st;
  std::unique_ptr<AlertSink> none = Sink(dir_ + "/ca/ca.pem", "");
  ASSERT_NE(none, nullptr);
  st = none->Post({TestAlert("FarmNoCredential")});
  EXPECT_NE(st.message().find("401"), std::string::npos) << st;
  const std::string alerts = AlertsJson();
  EXPECT_EQ(alerts.find("FarmWrongPassword"), std::string::npos) << alerts;
  EXPECT_EQ(alerts.find("FarmNoCredential"), std::string::npos) << alerts;

  // The credential file itself: one line USER:PASSWORD.
  WriteSecret(dir_ + "/bad", "no-colon");
  auto bad = LoadAlertmanagerAuth("", "", dir_ + "/bad");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("USER:PASSWORD"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace farm::analyzer
