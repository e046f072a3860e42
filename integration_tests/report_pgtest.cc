// farmctl report on the seed-000 scenario, through the real pipeline: real
// PostgreSQL, the real farm-scheduler (in-process), two farm-agent processes
// running the emulator, the farm-analyzer process detecting, confirming and
// bisecting, then the farmctl binary writing the HTML report of the matrix
// and of the regression. The report is checked twice: as HTML (the SVG's
// series per mode, its change-point and culprit markers against what the API
// says) and as rendered by headless Chromium (Debian's chromium): no console
// message, and a screenshot that is not blank and shows the mode colours.
#include <png.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/git_import.h"
#include "scheduler/server.h"
#include "testing/child_process.h"
#include "testing/farm_fixture.h"

namespace farm {
namespace {

namespace pb = ::iommufarm::v1;

constexpr char kChromium[] = "/usr/bin/chromium";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int Count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

struct Rendered {
  int exit_status = -1;
  std::string log;  // Chromium's stderr
};

// Headless Chromium screenshots `html` into `png`; the browser's log
// (console messages included, --enable-logging=stderr) is returned.
Rendered Screenshot(const std::string& html, const std::string& png, const std::string& dir) {
  const std::string profile = dir + "/chromium-profile";
  std::vector<std::string> argv = {
      "/usr/bin/timeout",        "120",           kChromium,           "--headless=new",
      "--disable-gpu",           "--no-sandbox",  "--no-first-run",    "--user-data-dir=" + profile,
      "--enable-logging=stderr", "--v=0",         "--hide-scrollbars", "--window-size=1400,3000",
      "--screenshot=" + png,     "file://" + html};
  testing::ChildProcess chromium(argv, dir + "/chromium.out", dir + "/chromium.err");
  const int status = chromium.Wait();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, chromium.Err()};
}

// Chromium logs a page's console messages (--enable-logging=stderr) as
// "[pid:tid:time:INFO:CONSOLE:line] "message", source: URL (line)".
std::vector<std::string> ConsoleLines(const std::string& log) {
  std::vector<std::string> out;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(":CONSOLE") != std::string::npos) out.push_back(line);
  }
  return out;
}

struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgba;
};

Image ReadPng(const std::string& path) {
  Image img;
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, path.c_str())) return img;
  image.format = PNG_FORMAT_RGBA;
  std::vector<uint8_t> buffer(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, buffer.data(), 0, nullptr)) return img;
  img.width = static_cast<int>(image.width);
  img.height = static_cast<int>(image.height);
  img.rgba = std::move(buffer);
  return img;
}

// Pixels within `tolerance` (per channel) of the colour #rrggbb.
int PixelsNear(const Image& img, uint32_t rgb, int tolerance) {
  const int r = (rgb >> 16) & 0xff, g = (rgb >> 8) & 0xff, b = rgb & 0xff;
  int n = 0;
  for (size_t i = 0; i + 3 < img.rgba.size(); i += 4) {
    if (std::abs(img.rgba[i] - r) <= tolerance && std::abs(img.rgba[i + 1] - g) <= tolerance &&
        std::abs(img.rgba[i + 2] - b) <= tolerance) {
      ++n;
    }
  }
  return n;
}

class ReportPgTest : public testing::FarmTest {
 protected:
  void SetUp() override {
    FarmTest::SetUp();
    dir_ = TestDir();
  }
  std::string dir_;
};

TEST_F(ReportPgTest, Seed000ReportRendersInChromiumWithSeriesAndCulprits) {
  ASSERT_EQ(access(kChromium, X_OK), 0) << "chromium is missing: run scripts/install-deps";
  StartScheduler(testing::FarmMode::kPlaintext, [](scheduler::ServerOptions& options) {
    options.catalog_dir = std::string(FARM_SOURCE_DIR) + "/emu/model/catalogs";
  });
  ASSERT_FALSE(HasFatalFailure());
  const std::string address = SchedulerAddress();

  std::vector<std::unique_ptr<testing::ChildProcess>> agents;
  for (int i = 1; i <= 2; ++i) {
    agents.push_back(
        StartAgent({.name = absl::StrCat("report-agent-", i), .slots = 2, .metrics = true}));
  }
  testing::ChildProcess analyzer({FARM_ANALYZER_BIN, "--db", DbUri(), "--scheduler", address,
                                  "--metrics", "127.0.0.1:0", "--poll-interval", "200ms"},
                                 dir_ + "/analyzer.log");

  client::ClientOptions client_options;
  client_options.server = address;
  std::ostringstream out, err;
  cli::Commands commands(client_options, out, err);
  const std::string spec = ReadAll(std::string(FARM_SOURCE_DIR) + "/examples/seed000-demo.yaml");
  ASSERT_FALSE(spec.empty());
  auto submitted = commands.SubmitSpec(spec, /*dry_run=*/false);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const int64_t matrix_id = submitted->matrix().id();
  auto done = commands.WaitForMatrix(matrix_id, nullptr);
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->state(), pb::MATRIX_STATE_COMPLETED) << agents[0]->Out();

  // The analyzer's primary regression with a finished bisect.
  auto channel = client::MakeChannel(client_options);
  auto analysis = pb::AnalysisService::NewStub(channel);
  pb::Regression reg;
  pb::Bisect bisect;
  const absl::Status bisected = testing::PollUntil(
      [&]() -> absl::StatusOr<bool> {
        pb::ListRegressionsRequest request;
        request.set_matrix_id(matrix_id);
        pb::ListRegressionsResponse response;
        grpc::ClientContext ctx;
        if (!analysis->ListRegressions(&ctx, request, &response).ok()) return false;
        for (const auto& r : response.regressions()) {
          if (r.metric_rank() != "primary" || r.bisect_id() == 0) continue;
          pb::GetBisectRequest b;
          b.set_bisect_id(r.bisect_id());
          grpc::ClientContext bctx;
          pb::Bisect got;
          if (!analysis->GetBisect(&bctx, b, &got).ok() || got.state() != "done") continue;
          // The regression row carries the culprits once the bisect is done.
          pb::GetRegressionRequest g;
          g.set_regression_id(r.id());
          grpc::ClientContext gctx;
          if (!analysis->GetRegression(&gctx, g, &reg).ok() || reg.culprits().empty()) continue;
          bisect = got;
          return true;
        }
        return false;
      },
      absl::Seconds(240), "a bisected primary regression", absl::Milliseconds(500));
  ASSERT_TRUE(bisected.ok()) << bisected << "\n" << analyzer.Out();

  const std::string html_path = dir_ + "/report.html";
  const std::string reg_path = dir_ + "/regression.html";
  auto wrote = cli::RunProgram(
      {FARMCTL_BIN, "--server", address, "report", std::to_string(matrix_id), "-o", html_path});
  ASSERT_TRUE(wrote.ok()) << wrote.status();
  EXPECT_NE(wrote->find("wrote " + html_path), std::string::npos) << *wrote;
  auto wrote_reg = cli::RunProgram({FARMCTL_BIN, "--server", address, "report", "--regression",
                                    std::to_string(reg.id()), "-o", reg_path});
  ASSERT_TRUE(wrote_reg.ok()) << wrote_reg.status();
  for (auto& agent : agents) EXPECT_EQ(agent->Terminate(), 0) << agent->Out();
  analyzer.Terminate();
  server_->Shutdown();

  // The HTML: series per mode, ratio series per translated mode, markers.
  const std::string html = ReadAll(html_path);
  ASSERT_FALSE(html.empty());
  EXPECT_EQ(html.find("<script"), std::string::npos);
  const int plots = Count(html, "<svg ");
  const int ratio_plots = Count(html, "class=\"plot ratio\"");
  EXPECT_GE(ratio_plots, 1);
  EXPECT_EQ(Count(html, "class=\"plot\""), plots - ratio_plots);
  // off in every plot of values, not in the ratios (mode / off).
  EXPECT_EQ(Count(html, "<g class=\"series\" data-mode=\"off\""), plots - ratio_plots);
  EXPECT_EQ(Count(html, "<g class=\"series\" data-mode=\"strict\""), plots);
  EXPECT_EQ(Count(html, "<g class=\"series\" data-mode=\"lazy\""), plots);
  // Each absolute series has the matrix's three commits (v5.10, v5.11, v5.12).
  EXPECT_NE(html.find("data-mode=\"strict\" data-points=\"3\""), std::string::npos);
  const std::regex band(R"re(<path class="band" d="M[0-9.,L]+Z")re");
  EXPECT_EQ(
      std::distance(std::sregex_iterator(html.begin(), html.end(), band), std::sregex_iterator()),
      Count(html, "class=\"band\""));
  EXPECT_GE(Count(html, "class=\"band\""), plots);
  // The change point and every culprit of the API, with its subject.
  EXPECT_GE(Count(html, "<g class=\"marker change\" data-commit=\"" + reg.first_bad() + "\""), 2);
  for (const pb::Culprit& c : reg.culprits()) {
    EXPECT_GE(Count(html, "<g class=\"marker culprit\" data-commit=\"" + c.commit_id() + "\""), 2)
        << c.commit_id();
    EXPECT_NE(html.find(c.subject().substr(0, 20)), std::string::npos) << c.subject();
  }
  // The summary names the regression and its culprits; the bisect steps and
  // the versions are in tables.
  const size_t pre = html.find("<pre class=\"summary\">");
  ASSERT_NE(pre, std::string::npos);
  const std::string summary = html.substr(pre, html.find("</pre>", pre) - pre);
  EXPECT_NE(summary.find(absl::StrCat("R", reg.id(), " ")), std::string::npos) << summary;
  for (const pb::Culprit& c : reg.culprits()) {
    EXPECT_NE(summary.find("culprit " + c.commit_id()), std::string::npos) << summary;
  }
  EXPECT_NE(html.find(absl::StrCat("Bisect ", bisect.id(), " of regression ", reg.id())),
            std::string::npos);
  for (const auto& step : bisect.steps()) {
    EXPECT_NE(html.find("<td>" + step.verdict() + "</td>"), std::string::npos) << step.verdict();
  }
  EXPECT_NE(html.find("iommu-farm (farmctl)"), std::string::npos);
  EXPECT_NE(html.find("report-agent-"), std::string::npos);  // hosts table

  // The regression's report: only its workload and metric.
  const std::string reg_html = ReadAll(reg_path);
  EXPECT_EQ(Count(reg_html, "<svg "), 2);
  // Its bisect's steps on the bisected series, one diamond per measured step.
  int measured_steps = 0;
  for (const auto& step : bisect.steps()) measured_steps += step.verdict() != "pending";
  EXPECT_GT(measured_steps, 0);
  EXPECT_EQ(Count(reg_html, "<path class=\"step\""), measured_steps);
  EXPECT_NE(reg_html.find(absl::StrCat("regression ", reg.id(), " of matrix ", matrix_id)),
            std::string::npos);

  // Chromium: the capture sees console messages (a page that logs one)...
  const std::string probe = dir_ + "/probe.html";
  std::ofstream(probe) << "<!DOCTYPE html><html><body><script>console.error('farm-probe-"
                          "message')</script></body></html>\n";
  Rendered probed = Screenshot(probe, dir_ + "/probe.png", dir_);
  ASSERT_EQ(probed.exit_status, 0) << probed.log;
  ASSERT_EQ(ConsoleLines(probed.log).size(), 1u) << probed.log;
  ASSERT_NE(ConsoleLines(probed.log)[0].find("farm-probe-message"), std::string::npos)
      << "chromium's log did not carry the console message:\n"
      << probed.log;
  // ...and the report logs none.
  const std::string png = dir_ + "/report.png";
  Rendered rendered = Screenshot(html_path, png, dir_);
  ASSERT_EQ(rendered.exit_status, 0) << rendered.log;
  EXPECT_TRUE(ConsoleLines(rendered.log).empty()) << rendered.log;
  const Image img = ReadPng(png);
  ASSERT_EQ(img.width, 1400) << png;
  ASSERT_EQ(img.height, 3000) << png;
  std::set<uint32_t> colours;
  for (size_t i = 0; i + 3 < img.rgba.size(); i += 4) {
    colours.insert(img.rgba[i] << 16 | img.rgba[i + 1] << 8 | img.rgba[i + 2]);
  }
  EXPECT_GT(colours.size(), 64u);
  // The mode colours (legend squares, lines, points) and the culprit colour.
  EXPECT_GT(PixelsNear(img, 0x4d4d4d, 8), 100);  // off
  EXPECT_GT(PixelsNear(img, 0xd62728, 8), 100);  // strict
  EXPECT_GT(PixelsNear(img, 0x1f77b4, 8), 100);  // lazy
  EXPECT_GT(PixelsNear(img, 0xe07000, 24), 20);  // culprit markers
  std::cout << "report: " << plots << " plots, " << colours.size() << " colours in " << png << "\n";
}

}  // namespace
}  // namespace farm
