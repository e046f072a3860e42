// lib/service/testing_pem.h: keys and self-signed certificates made with
// OpenSSL for the service tests (TLS checks, the listener probe).
// Test-only; header-only; thread-safe (no shared state).
#ifndef LIB_SERVICE_TESTING_PEM_H_
#define LIB_SERVICE_TESTING_PEM_H_

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>
#include <string>

#include "absl/time/time.h"

namespace farm::service {

// A fresh P-256 key, PEM.
struct KeyPem {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key{nullptr, &EVP_PKEY_free};
  std::string pem;
};

inline KeyPem NewKey() {
  KeyPem k;
  k.key.reset(EVP_EC_gen("P-256"));
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, k.key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  k.pem.assign(data, static_cast<size_t>(n));
  BIO_free(bio);
  return k;
}

// A self-signed certificate of `key`, valid from now+from to now+to.
inline std::string SelfSigned(EVP_PKEY* key, absl::Duration from, absl::Duration to) {
  X509* x = X509_new();
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), absl::ToInt64Seconds(from));
  X509_gmtime_adj(X509_getm_notAfter(x), absl::ToInt64Seconds(to));
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("farm-scheduler"), -1, -1, 0);
  X509_set_issuer_name(x, name);
  X509_sign(x, key, EVP_sha256());
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, x);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<size_t>(n));
  BIO_free(bio);
  X509_free(x);
  return pem;
}

}  // namespace farm::service

#endif  // LIB_SERVICE_TESTING_PEM_H_
