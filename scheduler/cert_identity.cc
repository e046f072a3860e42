#include "scheduler/cert_identity.h"

#include <openssl/bio.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace farm::scheduler {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};

// Every value of attribute `nid` in `subject`, as UTF-8.
std::vector<std::string> Values(X509_NAME* subject, int nid) {
  std::vector<std::string> out;
  for (int i = X509_NAME_get_index_by_NID(subject, nid, -1); i >= 0;
       i = X509_NAME_get_index_by_NID(subject, nid, i)) {
    ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i));
    unsigned char* utf8 = nullptr;
    const int n = ASN1_STRING_to_UTF8(&utf8, data);
    out.push_back(n < 0 ? std::string() : std::string(reinterpret_cast<char*>(utf8), n));
    OPENSSL_free(utf8);
  }
  return out;
}

}  // namespace

bool IsPrincipalName(absl::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (!alnum(name[0])) return false;
  for (char c : name) {
    if (!alnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

absl::StatusOr<CertIdentity> IdentityFromPem(absl::string_view pem, absl::string_view san) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  std::unique_ptr<X509, X509Free> cert(
      bio == nullptr ? nullptr : PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr)
    return absl::InvalidArgumentError("client certificate: not a PEM certificate");
  X509_NAME* subject = X509_get_subject_name(cert.get());
  const std::vector<std::string> cns = Values(subject, NID_commonName);
  const std::vector<std::string> orgs = Values(subject, NID_organizationName);
  if (cns.size() > 1) {
    return absl::PermissionDeniedError("client certificate: its subject has several CNs");
  }
  if (orgs.size() > 1) {
    return absl::PermissionDeniedError(
        "client certificate: its subject has several O attributes (the role must be one)");
  }
  CertIdentity id;
  id.name = cns.empty() ? std::string(san) : cns.front();
  if (id.name.empty()) {
    return absl::PermissionDeniedError("client certificate: no CN and no SAN to name it by");
  }
  if (!IsPrincipalName(id.name)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "client certificate: name \"", absl::CEscape(id.name.substr(0, 64)),
        "\" is not letters, digits, . _ - (at most 63, starting with a letter or digit)"));
  }
  if (!orgs.empty()) id.organization = orgs.front();
  return id;
}

}  // namespace farm::scheduler
