#include "scheduler/cert_identity.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace farm::scheduler {
namespace {

using Entries = std::vector<std::pair<std::string, std::string>>;  // (field, value)

// A self-signed certificate whose subject holds `entries` in order, each its
// own RDN, values taken verbatim (commas and '=' included).
std::string MakePem(const Entries& entries) {
  EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), 0);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  for (const auto& [field, value] : entries) {
    X509_NAME_add_entry_by_txt(name, field.c_str(), MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(value.data()),
                               static_cast<int>(value.size()), -1, 0);
  }
  X509_set_issuer_name(x, name);
  X509_sign(x, key, EVP_sha256());
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, x);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<size_t>(n));
  BIO_free(bio);
  X509_free(x);
  EVP_PKEY_free(key);
  return pem;
}

// Written out by hand: what each subject must come to. An empty name means
// refused (PermissionDenied).
struct Case {
  Entries subject;
  std::string san;
  std::string name;
  std::string organization;
};

TEST(IdentityFromPemTest, HandWrittenTable) {
  const std::vector<Case> cases = {
      {{{"CN", "alice"}, {"O", "admin"}}, "", "alice", "admin"},
      {{{"O", "agent"}, {"CN", "agent-a"}}, "", "agent-a", "agent"},
      {{{"CN", "norole"}}, "", "norole", ""},
      // The attack: O=viewer, and a CN spelled to look like a second O in
      // gRPC's printed subject "CN=evil,O=admin,O=viewer".
      {{{"O", "viewer"}, {"CN", "evil,O=admin"}}, "", "", ""},
      {{{"CN", "bob"}, {"O", "viewer"}, {"O", "admin"}}, "", "", ""},
      {{{"CN", "a"}, {"CN", "b"}, {"O", "admin"}}, "", "", ""},
      {{{"CN", "-dash-first"}, {"O", "viewer"}}, "", "", ""},
      {{{"CN", "new\nline"}, {"O", "viewer"}}, "", "", ""},
      {{{"CN", std::string(64, 'x')}, {"O", "viewer"}}, "", "", ""},
      {{{"CN", std::string(63, 'x')}, {"O", "viewer"}}, "", std::string(63, 'x'), "viewer"},
      {{{"O", "submitter"}}, "ci.example.org", "ci.example.org", "submitter"},
      {{{"O", "submitter"}}, "", "", ""},
  };
  for (const Case& c : cases) {
    const std::string pem = MakePem(c.subject);
    absl::StatusOr<CertIdentity> id = IdentityFromPem(pem, c.san);
    std::string what;
    for (const auto& [f, v] : c.subject) what += "/" + f + "=" + v;
    if (c.name.empty()) {
      EXPECT_TRUE(absl::IsPermissionDenied(id.status())) << what << ": " << id.status();
      continue;
    }
    ASSERT_TRUE(id.ok()) << what << ": " << id.status();
    EXPECT_EQ(id->name, c.name) << what;
    EXPECT_EQ(id->organization, c.organization) << what;
  }
}

TEST(IdentityFromPemTest, GarbageIsNotACertificate) {
  EXPECT_TRUE(absl::IsInvalidArgument(IdentityFromPem("not a pem", "").status()));
}

}  // namespace
}  // namespace farm::scheduler
