#include "lib/metrics/metrics.h"

#include <cstdio>
#include <cstdlib>
#include <memory>

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace farm::metrics {
namespace {

TEST(SchedulerMetricsTest, FamiliesRenderWithStateAndExecutorLabels) {
  MetricsRegistry reg;
  SchedulerMetrics m(reg.registry());
  m.queue_jobs(1).Set(7);
  m.leases_granted.Increment(3);
  m.job_duration(1).Observe(0.5);
  const std::string text = reg.Serialize();
  EXPECT_NE(text.find("farm_queue_jobs{state=\"queued\"} 7"), std::string::npos) << text;
  EXPECT_NE(text.find("farm_leases_granted_total 3"), std::string::npos) << text;
  EXPECT_NE(text.find("farm_job_duration_seconds_count{executor=\"emulator\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("farm_stale_results_rejected_total 0"), std::string::npos) << text;
}

TEST(AgentMetricsTest, ResultLabelAndEventsGauge) {
  MetricsRegistry reg;
  AgentMetrics m(reg.registry());
  m.jobs_stale.Increment();
  m.emulator_events_per_second.Set(12.5);
  const std::string text = reg.Serialize();
  EXPECT_NE(text.find("farm_agent_jobs_total{result=\"stale\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("farm_agent_emulator_events_per_second 12.5"), std::string::npos) << text;
}

TEST(MetricsExposerTest, RejectsAddressWithoutPort) {
  MetricsRegistry reg;
  auto e = MetricsExposer::Start("127.0.0.1", reg);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("host:port"), std::string::npos);
}

TEST(MetricsExposerTest, PortZeroBindsAFreePort) {
  MetricsRegistry reg;
  auto e = MetricsExposer::Start("127.0.0.1:0", reg);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_GT((*e)->port(), 0);
}

// A self-signed P-256 certificate for 127.0.0.1 (made in-process: the unit
// label allows no openssl command), written as PEM files under the test
// temporary directory.
struct SelfSigned {
  std::string cert_file, key_file;
};

SelfSigned MakeSelfSigned(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string base = std::string(dir != nullptr ? dir : "/tmp") + "/metrics_test_" + name;
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -60);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, key);
  X509_NAME* subject = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
  X509_set_issuer_name(x, subject);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
  X509_EXTENSION* san = X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, "IP:127.0.0.1");
  X509_add_ext(x, san, -1);
  X509_EXTENSION_free(san);
  X509_sign(x, key, EVP_sha256());
  SelfSigned out{base + ".pem", base + ".key"};
  std::FILE* f = std::fopen(out.cert_file.c_str(), "w");
  PEM_write_X509(f, x);
  std::fclose(f);
  f = std::fopen(out.key_file.c_str(), "w");
  PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(f);
  X509_free(x);
  EVP_PKEY_free(key);
  return out;
}

TEST(MetricsExposerTest, ServesHttpsWithCertificateAndRefusesPlainHttp) {
  const SelfSigned pem = MakeSelfSigned("https");
  MetricsRegistry reg;
  SchedulerMetrics m(reg.registry());
  m.leases_granted.Increment(4);
  auto e = MetricsExposer::Start("127.0.0.1:0", reg, MetricsTls{pem.cert_file, pem.key_file});
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_TRUE((*e)->tls());
  ASSERT_GT((*e)->port(), 0);

  httplib::SSLClient https("127.0.0.1", (*e)->port());
  https.set_ca_cert_path(pem.cert_file.c_str());
  https.enable_server_certificate_verification(true);
  auto res = https.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->body.find("farm_leases_granted_total 4"), std::string::npos) << res->body;

  // Without the CA the certificate does not verify; plain HTTP gets nothing.
  httplib::SSLClient untrusted("127.0.0.1", (*e)->port());
  untrusted.enable_server_certificate_verification(true);
  untrusted.set_ca_cert_path("/nonexistent-ca.pem");
  EXPECT_FALSE(untrusted.Get("/metrics"));
  httplib::Client plain("127.0.0.1", (*e)->port());
  plain.set_read_timeout(2);
  auto p = plain.Get("/metrics");
  EXPECT_TRUE(!p || p->status != 200);
}

TEST(MetricsExposerTest, TlsNeedsBothFilesAndReadablePem) {
  MetricsRegistry reg;
  auto only_cert = MetricsExposer::Start("127.0.0.1:0", reg, MetricsTls{"/etc/hostname", ""});
  ASSERT_FALSE(only_cert.ok());
  EXPECT_EQ(only_cert.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(only_cert.status().message().find("--metrics-tls-key"), std::string::npos);
  auto garbage =
      MetricsExposer::Start("127.0.0.1:0", reg, MetricsTls{"/etc/hostname", "/etc/hostname"});
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(garbage.status().code(), absl::StatusCode::kInvalidArgument) << garbage.status();
}

}  // namespace
}  // namespace farm::metrics
