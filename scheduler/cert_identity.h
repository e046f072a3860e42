// The principal a verified client certificate names: read from the
// certificate's own subject fields (OpenSSL), never from gRPC's printed
// subject string, where a CN of "evil,O=admin" reads like a second O.
//
// The name is the subject's one commonName (or, without one, the first DNS
// SAN gRPC reports); the role is its one organizationName. A certificate
// with two CNs or two Os, or a name outside the agent-name charset
// ([A-Za-z0-9][A-Za-z0-9._-]{0,62}, what scripts/farm-certs writes), names
// nobody: the call is refused, not guessed at.
//
// Thread-safety: pure functions.
#ifndef SCHEDULER_CERT_IDENTITY_H_
#define SCHEDULER_CERT_IDENTITY_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace farm::scheduler {

struct CertIdentity {
  std::string name;
  std::string organization;  // "" when the subject has no O
};

// True for [A-Za-z0-9][A-Za-z0-9._-]{0,62}.
bool IsPrincipalName(absl::string_view name);

// The identity of the PEM certificate `pem` (the peer's leaf, as gRPC
// gives it under GRPC_X509_PEM_CERT_PROPERTY_NAME); `san` is the first
// SAN, used when the subject has no CN. PermissionDenied saying what is
// wrong: no or several CNs, several Os, a name outside the charset;
// InvalidArgument for a PEM that does not parse.
absl::StatusOr<CertIdentity> IdentityFromPem(absl::string_view pem, absl::string_view san);

}  // namespace farm::scheduler

#endif  // SCHEDULER_CERT_IDENTITY_H_
