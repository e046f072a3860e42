// The regression mail end to end: the analyzer's alert of a bisected
// regression posted to a real Alertmanager whose email receiver uses the
// shipped template (dashboards/alert-mail.tmpl), delivered over SMTP to a
// real local server (Debian's python3-aiosmtpd, writing a Maildir), and the
// message read back: the subject names the culprit and the change, the body
// carries the series (a group's members), the reproduce command and the
// trailers.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "lib/base/file.h"
#include "services/analyzer/alerts.h"
#include "services/analyzer/bisect_state.h"
#include "services/analyzer/clients.h"
#include "services/analyzer/groups.h"
#include "testing/child_process.h"
#include "testing/service_harness.h"

namespace farm::analyzer {
namespace {

namespace pb = ::iommufarm::v1;

AlertWork BisectedRegression() {
  AlertWork w;
  w.regression_id = 12;
  w.state = pb::REGRESSION_STATE_CONFIRMED;
  w.primary_metric = true;
  w.platform = "intel-vtd-snb16c";
  w.catalog = "linux-iommu";
  w.workload = "fio-nvme";
  w.params = R"({"numjobs":"4"})";
  w.metric = "throughput";
  w.mode_name = "strict";
  w.magnitude = -0.25;
  w.last_good = "v5.10";
  w.first_bad = "v5.11";
  w.culprit_id = "c588072bba6b";
  w.culprit_subject = "iommu/vt-d: Convert intel iommu driver to the iommu ops";
  w.culprit_author = "A U Thor <author@example.org>";
  w.bisect_steps = 5;
  BisectState st;
  st.series.catalog = w.catalog;
  st.series.platform = w.platform;
  st.series.workload = w.workload;
  st.series.params_json = w.params;
  st.series.metric = w.metric;
  st.series.mode = w.mode_name;
  w.bisect_state_json = BisectStateToJson(st);
  return w;
}

// The path of the one message in Maildir `dir`'s new/, or "" while there
// is none.
std::string OnlyMessage(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/new", ec)) {
    return e.path().string();
  }
  return "";
}

// The message read back by Python's email package (MIME, quoted-printable,
// RFC 2047 headers): "To", "Subject" and the text/plain body, one per line
// up to the body.
struct ReadBack {
  std::string to, subject, body;
};
ReadBack Parse(const std::string& python, const std::string& path, const std::string& dir) {
  testing::ChildProcess p({python, "-c",
                           "import email, email.policy, sys\n"
                           "m = email.message_from_binary_file(open(sys.argv[1], 'rb'),"
                           " policy=email.policy.default)\n"
                           "print(m['To']); print(m['Subject'])\n"
                           "print(m.get_body(('plain',)).get_content(), end='')\n",
                           path},
                          dir + "/parsed.txt", dir + "/parse.err");
  EXPECT_EQ(p.Wait(), 0) << base::ReadFileOrEmpty(dir + "/parse.err");
  const std::string out = p.Out();
  ReadBack r;
  const size_t first = out.find('\n'), second = out.find('\n', first + 1);
  if (second == std::string::npos) return r;
  r.to = out.substr(0, first);
  r.subject = out.substr(first + 1, second - first - 1);
  r.body = out.substr(second + 1);
  return r;
}

// A real local SMTP server and a real Alertmanager whose email receiver
// uses the shipped template; Mail posts one alert and reads its mail back.
class AlertMailTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(python_)) << "python3 (scripts/install-deps)";
    std::string tmpl = testing::HarnessTempBase() + "/farm-mail-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    const int smtp_port = testing::PickFreePort();
    smtp_ = std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{python_, "-m", "aiosmtpd", "-n", "-l",
                                 absl::StrCat("127.0.0.1:", smtp_port), "-c",
                                 "aiosmtpd.handlers.Mailbox", dir_ + "/maildir"},
        dir_ + "/smtp.log");
    ASSERT_TRUE(testing::PollUntil(
                    [&]() -> absl::StatusOr<bool> {
                      if (!smtp_->Alive()) return absl::FailedPreconditionError(smtp_->Out());
                      return std::filesystem::exists(dir_ + "/maildir/new");
                    },
                    absl::Seconds(30), "aiosmtpd's Maildir")
                    .ok())
        << "aiosmtpd (python3-aiosmtpd, scripts/install-deps): " << smtp_->Out();
    testing::AlertmanagerOptions o;
    o.email_smarthost = absl::StrCat("127.0.0.1:", smtp_port);
    o.email_from = "iommu-farm@localhost";
    o.email_to = "iommu-regressions@example.org";
    o.email_subject = R"({{ template "iommu_farm.mail.subject" . }})";
    o.email_text = R"({{ template "iommu_farm.mail.text" . }})";
    o.template_files = {std::string(FARM_SOURCE_DIR) + "/dashboards/alert-mail.tmpl"};
    auto am = testing::AlertmanagerInstance::Start(o);
    ASSERT_TRUE(am.ok()) << am.status();
    am_ = *std::move(am);
  }

  void TearDown() override {
    if (smtp_ != nullptr) smtp_->Terminate();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // The mail Alertmanager sends for `alert`; empty fields on a failure
  // (reported as one).
  ReadBack Mail(const Alert& alert) {
    auto sink = NewAlertmanagerSink(am_->BaseUrl());
    if (!sink.ok()) {
      ADD_FAILURE() << sink.status();
      return {};
    }
    if (absl::Status s = (*sink)->Post({alert}); !s.ok()) {
      ADD_FAILURE() << s << am_->LogTail();
      return {};
    }
    std::string path;
    absl::Status got = testing::PollUntil(
        [&]() -> absl::StatusOr<bool> {
          path = OnlyMessage(dir_ + "/maildir");
          return !path.empty();
        },
        absl::Seconds(60), "the mail in the Maildir");
    if (!got.ok()) {
      ADD_FAILURE() << got << "\nalertmanager: " << am_->LogTail() << "\nsmtp: " << smtp_->Out();
      return {};
    }
    return Parse(python_, path, dir_);
  }

  const std::string python_ = "/usr/bin/python3";
  std::string dir_;
  std::unique_ptr<testing::ChildProcess> smtp_;
  std::unique_ptr<testing::AlertmanagerInstance> am_;
};

TEST_F(AlertMailTest, TheShippedTemplateMailsABisectedRegression) {
  AlertOptions options;
  options.report_url = "https://reports.lab:8088";
  std::optional<Alert> alert =
      BuildAlert(BisectedRegression(), options, "2026-12-05T18:00:00Z", {12});
  ASSERT_TRUE(alert.has_value());
  const ReadBack mail = Mail(*alert);
  const std::string& body = mail.body;
  EXPECT_EQ(mail.to, "iommu-regressions@example.org");
  EXPECT_EQ(mail.subject,
            "[iommu-farm] [linux-iommu] c588072bba6b (\"iommu/vt-d: Convert intel iommu driver "
            "to the iommu ops\"): fio-nvme.throughput -25.0% regression (strict, "
            "intel-vtd-snb16c)")
      << body;
  EXPECT_NE(body.find("commit: c588072bba6b (\"iommu/vt-d: Convert intel iommu driver to the "
                      "iommu ops\")\nauthor: A U Thor <author@example.org>\n"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("range:    v5.10..v5.11 (last good..first bad), 5 bisect steps"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("series:   intel-vtd-snb16c fio-nvme{numjobs=4} throughput (strict)"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("farmctl try --patch-commit v5.11 - <<'EOF'"), std::string::npos) << body;
  EXPECT_NE(body.find("farmctl report --mail 12"), std::string::npos) << body;
  EXPECT_NE(body.find("| Reported-by: iommu-farm <iommu-farm@localhost>"), std::string::npos)
      << body;
  EXPECT_NE(body.find("| Link: https://reports.lab:8088/regressions/12"), std::string::npos)
      << body;
}

// A regression group's one alert carries no series labels of its own: the
// mail names the group, lists every member and still points at the
// representative's report.
TEST_F(AlertMailTest, AGroupsMailListsItsMembers) {
  AlertWork strict = BisectedRegression();
  strict.group_id = 7;
  strict.strength = 9;
  AlertWork other = BisectedRegression();
  other.regression_id = 13;
  other.platform = "intel-vtd-spr";
  other.magnitude = -0.2;
  other.group_id = 7;
  other.strength = 4;
  AlertOptions options;
  options.report_url = "https://reports.lab:8088";
  const GroupAlertPlan plan = PlanGroupAlerts({strict, other}, options, "2026-12-05T18:00:00Z");
  ASSERT_EQ(plan.alerts.count(12), 1u);
  ASSERT_TRUE(plan.alerts.at(12).has_value());
  const ReadBack mail = Mail(*plan.alerts.at(12));
  const std::string& body = mail.body;
  EXPECT_EQ(mail.subject,
            "[iommu-farm] [linux-iommu] c588072bba6b (\"iommu/vt-d: Convert intel iommu driver "
            "to the iommu ops\"): 2 regressions of group 7 (strict; intel-vtd-snb16c/fio-nvme, "
            "intel-vtd-spr/fio-nvme)")
      << body;
  EXPECT_NE(body.find("members (2, one bisect for all):\n"
                      "    regression 12: intel-vtd-snb16c fio-nvme{numjobs=4} throughput strict "
                      "-25.0%\n"
                      "    regression 13: intel-vtd-spr fio-nvme{numjobs=4} throughput strict "
                      "-20.0%\n"),
            std::string::npos)
      << body;
  EXPECT_EQ(body.find("series:"), std::string::npos) << body;
  EXPECT_NE(body.find("farmctl report --mail 12 "), std::string::npos) << body;
  EXPECT_NE(body.find("| Link: https://reports.lab:8088/regressions/12"), std::string::npos)
      << body;
}

}  // namespace
}  // namespace farm::analyzer
