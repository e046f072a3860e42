// The Alertmanager sink's URL and credential rules (no server needed: the
// sink is only built).
#include "services/analyzer/clients.h"

#include <gtest/gtest.h>

namespace farm::analyzer {
namespace {

TEST(AlertmanagerSinkTest, HttpsAcceptedCredentialsOnlyOverHttps) {
  EXPECT_TRUE(NewAlertmanagerSink("http://127.0.0.1:9093").ok());
  AlertmanagerAuth tls;
  tls.ca_file = "/etc/iommu-farm/tls/ca.pem";
  tls.bearer_token = "t0ken";
  EXPECT_TRUE(NewAlertmanagerSink("https://am.lab:9093/prefix", tls).ok());
  AlertmanagerAuth bearer;
  bearer.bearer_token = "t0ken";
  auto plain = NewAlertmanagerSink("http://am.lab:9093", bearer);
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("https"), std::string::npos) << plain.status();
  AlertmanagerAuth basic;
  basic.basic_user = "farm";
  basic.basic_password = "pw";
  EXPECT_FALSE(NewAlertmanagerSink("http://am.lab:9093", basic).ok());
  AlertmanagerAuth ca;
  ca.ca_file = "/x.pem";
  EXPECT_FALSE(NewAlertmanagerSink("http://am.lab:9093", ca).ok());
  EXPECT_FALSE(NewAlertmanagerSink("ftp://am.lab").ok());
}

}  // namespace
}  // namespace farm::analyzer
