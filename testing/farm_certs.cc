#include "testing/farm_certs.h"

#include <sys/wait.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "lib/base/file.h"

namespace farm::testing {
namespace {

// Runs scripts/farm-certs with `args` (already shell-quoted), its chatter
// on stderr dropped: a failure is reported by the exit status.
absl::Status FarmCerts(const std::string& args) {
  const std::string cmd =
      absl::StrCat("'", FARM_SOURCE_DIR, "/scripts/farm-certs' ", args, " 2>/dev/null");
  const int st = std::system(cmd.c_str());
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("scripts/farm-certs ", args, ": exit status ",
                                          WIFEXITED(st) ? WEXITSTATUS(st) : -1));
}

std::string Quoted(const std::string& s) { return absl::StrCat("'", s, "'"); }

}  // namespace

absl::Status MakeFarmCa(const std::string& dir) {
  return FarmCerts(absl::StrCat("init ", Quoted(dir)));
}

absl::Status MakeFarmClientCertificate(const std::string& dir, const std::string& name,
                                       const std::string& role) {
  return FarmCerts(absl::StrCat("client ", Quoted(dir), " ", Quoted(name), " ", Quoted(role)));
}

std::string FarmServerCertPath(const std::string& dir) { return dir + "/server.pem"; }
std::string FarmServerKeyPath(const std::string& dir) { return dir + "/server.key"; }
std::string FarmCaPath(const std::string& dir) { return dir + "/ca.pem"; }

service::TlsPem FarmClientPem(const std::string& dir, const std::string& name) {
  service::TlsPem p;
  p.root_certs = base::ReadFileOrEmpty(FarmCaPath(dir));
  if (!name.empty()) {
    p.cert_chain = base::ReadFileOrEmpty(dir + "/" + name + ".pem");
    p.private_key = base::ReadFileOrEmpty(dir + "/" + name + ".key");
  }
  return p;
}

}  // namespace farm::testing
