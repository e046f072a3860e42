#include "cli/report_server.h"

#include <gtest/gtest.h>

#include <httplib.h>

#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"

namespace farm::cli {
namespace {

struct Call {
  int64_t matrix;
  std::optional<int64_t> regression;
};

// Routes map to the render call they stand for; the render function's
// errors keep their meaning as HTTP statuses.
TEST(ReportServerTest, RoutesRegressionsAndMatricesToTheirReports) {
  std::vector<Call> calls;
  std::mutex mu;
  auto server = ReportServer::Start(
      "127.0.0.1:0", [&](int64_t m, std::optional<int64_t> r) -> absl::StatusOr<std::string> {
        std::lock_guard<std::mutex> lock(mu);
        calls.push_back({m, r});
        if (r == 404 || m == 404) return absl::NotFoundError("regression 404 not found");
        if (r == 500) return absl::UnavailableError("scheduler away");
        return absl::StrCat("<html>", m, "/", r.value_or(0), "</html>");
      });
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);
  httplib::Client c("127.0.0.1", (*server)->port());

  auto r = c.Get("/regressions/12");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "<html>0/12</html>");
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(r->get_header_value("Content-Security-Policy").find("default-src 'none'"),
            std::string::npos);
  r = c.Get("/matrices/3");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "<html>3/0</html>");

  r = c.Get("/regressions/404");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_NE(r->body.find("regression 404 not found"), std::string::npos);
  r = c.Get("/regressions/500");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 502);
  r = c.Get("/regressions/x12");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  r = c.Get("/regressions/0");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  r = c.Get("/elsewhere");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  r = c.Get("/");
  ASSERT_TRUE(r);
  EXPECT_NE(r->body.find("/regressions/ID"), std::string::npos);

  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(calls.size(), 4u);  // the malformed ids never reach the API
  EXPECT_EQ(calls[0].regression, 12);
  EXPECT_EQ(calls[1].matrix, 3);
  EXPECT_FALSE(calls[1].regression.has_value());
}

TEST(ReportServerTest, BadListenAddressesAreRefused) {
  auto render = [](int64_t, std::optional<int64_t>) -> absl::StatusOr<std::string> { return ""; };
  EXPECT_EQ(ReportServer::Start("8088", render).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReportServer::Start("127.0.0.1:http", render).status().code(),
            absl::StatusCode::kInvalidArgument);
  ReportServer::Tls half;
  half.cert_file = "/nonexistent.pem";
  EXPECT_EQ(ReportServer::Start("127.0.0.1:0", render, half).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace farm::cli
