#include "cli/report_server.h"

#include <chrono>

// Before httplib.h: SSLServer for --serve-tls-cert.
#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#include <httplib.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace farm::cli {
namespace {

constexpr char kIndex[] =
    "farmctl report --serve: HTML reports of iommu-farm\n"
    "  /regressions/ID  a regression: its series, bisect and results\n"
    "  /matrices/ID     a matrix: every series, regression and result\n";

int HttpStatusOf(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kInvalidArgument:
      return 400;
    default:
      return 502;  // the scheduler behind this gateway failed
  }
}

void Answer(const ReportServer::Render& render, const httplib::Request& req, httplib::Response& res,
            bool regression) {
  int64_t id = 0;
  if (!absl::SimpleAtoi(req.matches[1].str(), &id) || id <= 0) {
    res.status = 400;
    res.set_content(absl::StrCat("not an id: ", req.matches[1].str(), "\n"), "text/plain");
    return;
  }
  absl::StatusOr<std::string> html =
      regression ? render(0, id) : render(id, std::optional<int64_t>());
  if (!html.ok()) {
    res.status = HttpStatusOf(html.status());
    res.set_content(html.status().ToString() + "\n", "text/plain");
    return;
  }
  res.set_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'");
  res.set_content(*html, "text/html; charset=utf-8");
}

}  // namespace

absl::StatusOr<std::unique_ptr<ReportServer>> ReportServer::Start(const std::string& listen,
                                                                  Render render, const Tls& tls) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--serve \"", listen, "\": expected HOST:PORT (port 0 picks a free one)"));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError("--serve-tls-cert and --serve-tls-key go together");
  }
  std::unique_ptr<ReportServer> out(new ReportServer());
  if (tls.cert_file.empty()) {
    out->server_ = std::make_unique<httplib::Server>();
  } else {
    auto ssl = std::make_unique<httplib::SSLServer>(tls.cert_file.c_str(), tls.key_file.c_str());
    if (!ssl->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat("cannot load certificate ", tls.cert_file,
                                                     " with key ", tls.key_file, " (PEM files)"));
    }
    out->server_ = std::move(ssl);
  }
  httplib::Server& s = *out->server_;
  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kIndex, "text/plain");
  });
  s.Get(R"(/regressions/([^/]+))", [render](const httplib::Request& req, httplib::Response& res) {
    Answer(render, req, res, /*regression=*/true);
  });
  s.Get(R"(/matrices/([^/]+))", [render](const httplib::Request& req, httplib::Response& res) {
    Answer(render, req, res, /*regression=*/false);
  });
  const int bound = port == 0 ? s.bind_to_any_port(host) : (s.bind_to_port(host, port) ? port : -1);
  if (bound <= 0) return absl::UnavailableError(absl::StrCat("cannot listen on ", listen));
  out->port_ = bound;
  out->thread_ = std::thread([&s] { s.listen_after_bind(); });
  // stop() before the loop runs would be lost (and the join would hang).
  for (int i = 0; i < 5000 && !s.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return out;
}

void ReportServer::Wait() {
  if (thread_.joinable()) thread_.join();
}

void ReportServer::Stop() { server_->stop(); }

ReportServer::~ReportServer() {
  Stop();
  Wait();
}

}  // namespace farm::cli
