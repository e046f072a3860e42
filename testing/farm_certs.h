// testing/farm_certs.h: a farm's certificates made the way docs/security.md
// sets a lab farm up -- by scripts/farm-certs, the script an operator runs --
// so tests of the deployed configuration (mTLS, an agent certificate per agent
// name) use the same subjects and extensions a lab gets.
//
// Pure functions that run the script (and openssl under it) synchronously;
// thread-safe apart from two calls writing the same directory at once.
// Ownership: the files belong to the caller, who removes the directory.
#ifndef TESTING_FARM_CERTS_H_
#define TESTING_FARM_CERTS_H_

#include <string>

#include "absl/status/status.h"
#include "lib/service/tls.h"

namespace farm::testing {

// `scripts/farm-certs init DIR`: DIR/ca.pem + ca.key (the farm CA) and
// DIR/server.pem + server.key (valid for localhost, 127.0.0.1 and ::1).
// Internal with the script's exit status if it failed.
absl::Status MakeFarmCa(const std::string& dir);

// `scripts/farm-certs client DIR NAME ROLE`: DIR/NAME.pem + NAME.key signed
// by DIR's CA, CN = name, O = role (viewer, submitter, agent or admin).
absl::Status MakeFarmClientCertificate(const std::string& dir, const std::string& name,
                                       const std::string& role);

// The PEM files of DIR's scheduler: server pair and CA (client certificates
// required and verified).
std::string FarmServerCertPath(const std::string& dir);
std::string FarmServerKeyPath(const std::string& dir);
std::string FarmCaPath(const std::string& dir);

// A client's TLS material: DIR's CA verifies the server; `name` (empty:
// none) is the client pair DIR/NAME.pem + NAME.key. Unreadable files are
// empty strings.
service::TlsPem FarmClientPem(const std::string& dir, const std::string& name);

}  // namespace farm::testing

#endif  // TESTING_FARM_CERTS_H_
