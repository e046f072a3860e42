// farmctl's commands that need no scheduler: a spec with problems is refused
// before any call, with every problem whole.
#include "cli/commands.h"

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace farm::cli {
namespace {

TEST(SubmitTest, ASpecWithProblemsIsRefusedLocallyWithEveryProblem) {
  const std::string path = ::testing::TempDir() + "/farmctl_bad_spec.yaml";
  std::ofstream(path) << "name: bad\ncatalog: linux-iommu\nplatform: intel-vtd-2s12c\n"
                         "commits: v5.10..v5.12\nmodes: [off, stict, off]\nexecutor: emulator\n"
                         "workloads:\n  - name: dma-map-bench\n    params: {threadz: 2}\n"
                         "typo_field: 1\n";
  std::ostringstream out, err;
  // Nothing listens there: a call would fail UNAVAILABLE after its retries.
  client::ClientOptions options;
  options.server = "127.0.0.1:1";
  Commands commands(options, out, err);
  EXPECT_EQ(commands.RunSubmit(path, /*wait=*/false, /*dry_run=*/true), 1);
  const std::string e = err.str();
  EXPECT_EQ(e.rfind("farmctl: submit " + path + ": INVALID_ARGUMENT: typo_field: unknown field", 0),
            0u)
      << e;
  for (const char* want :
       {"\nmodes[1]: unknown mode \"stict\"", "\nmodes[2]: duplicate mode \"off\"",
        "\nworkloads[0].params.threadz: unknown parameter of dma-map-bench (known: "}) {
    EXPECT_NE(e.find(want), std::string::npos) << "missing: " << want << "\nin:\n" << e;
  }
  EXPECT_EQ(e.find("UNAVAILABLE"), std::string::npos) << e;
  EXPECT_EQ(out.str(), "");
}

TEST(UnavailableHintTest, TellsTheTlsFailureFromNoServer) {
  client::ClientOptions plain;
  plain.server = "10.0.0.1:7070";
  client::ClientOptions tls = plain;
  tls.tls.root_certs = "CA PEM";
  // gRPC 1.51's messages, as farmctl gets them from a mTLS farm-scheduler.
  const std::string refused =
      "failed to connect to all addresses; last error: UNKNOWN: ipv4:10.0.0.1:7070: Failed to "
      "connect to remote host: Connection refused";
  const std::string closed =
      "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:10.0.0.1:7070: Socket "
      "closed";
  const std::string handshake =
      "failed to connect to all addresses; last error: UNKNOWN: ipv4:10.0.0.1:7070: Ssl "
      "handshake failed: SSL_ERROR_SSL: error:0A000086:SSL routines::certificate verify failed";
  EXPECT_EQ(UnavailableHint(refused, plain),
            "is a farm-scheduler listening on 10.0.0.1:7070? set --server or FARM_SERVER");
  EXPECT_NE(UnavailableHint(closed, plain).find("refuses plaintext clients"), std::string::npos);
  EXPECT_NE(UnavailableHint(closed, tls).find("wants a client certificate of its CA"),
            std::string::npos);
  EXPECT_NE(UnavailableHint(handshake, tls).find("TLS handshake with 10.0.0.1:7070 failed"),
            std::string::npos);
}

}  // namespace
}  // namespace farm::cli
