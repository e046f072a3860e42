// farmctl report --serve: the HTML reports of cli/report.h over HTTP, so
// that an alert can link one (farm-analyzer --report-url). Each request is
// rendered from the scheduler's API at that moment, with farmctl's
// credentials:
//   GET /regressions/ID   the report of regression ID
//   GET /matrices/ID      the report of matrix ID
//   GET /                 a plain-text index of the two
// Errors answer plain text: 400 for a malformed id, 404 for an unknown path
// or an id the API does not know, 502 for any other API failure.
// Whoever reaches the port reads what farmctl's token may read: listen on
// loopback behind a proxy that authenticates, or give it a certificate.
//
// Thread-safety: `render` is called from the server's worker threads
// concurrently and must be thread-safe. Stop() may be called from any thread
// (a signal handler's thread included); the destructor stops and joins.
#ifndef CLI_REPORT_SERVER_H_
#define CLI_REPORT_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace farm::cli {

class ReportServer {
 public:
  // The HTML of matrix `matrix_id`'s report, or regression `regression_id`'s
  // when it is set.
  using Render = std::function<absl::StatusOr<std::string>(int64_t matrix_id,
                                                           std::optional<int64_t> regression_id)>;
  struct Tls {
    std::string cert_file, key_file;  // both empty: plain HTTP
  };
  // `listen` is HOST:PORT (port 0 picks a free one).
  static absl::StatusOr<std::unique_ptr<ReportServer>> Start(const std::string& listen,
                                                             Render render, const Tls& tls = {});
  ~ReportServer();
  ReportServer(const ReportServer&) = delete;
  ReportServer& operator=(const ReportServer&) = delete;

  int port() const { return port_; }
  // Blocks until Stop().
  void Wait();
  void Stop();

 private:
  ReportServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace farm::cli

#endif  // CLI_REPORT_SERVER_H_
