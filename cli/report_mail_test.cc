#include "cli/report_mail.h"

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_split.h"
#include "lib/spec/spec_yaml.h"

namespace farm::cli {
namespace {

namespace pb = ::iommufarm::v1;

void AddRuns(ReportSources& s, const std::string& commit, pb::IommuMode mode,
             const std::vector<double>& iops) {
  for (double v : iops) {
    pb::Result r;
    pb::Job* j = r.mutable_job();
    j->set_commit_id(commit);
    j->set_mode(mode);
    j->set_platform("intel-vtd-snb16c");
    j->mutable_workload()->set_name("fio-nvme");
    (*j->mutable_workload()->mutable_params())["numjobs"] = "4";
    for (const auto& [metric, unit, value] :
         std::vector<std::tuple<std::string, std::string, double>>{
             {"throughput", "IOPS", v}, {"map_latency_p99", "ns", 100}}) {
      pb::Sample* sample = r.add_samples();
      sample->set_metric(metric);
      sample->set_unit(unit);
      sample->set_value(value);
    }
    s.results.push_back(r);
  }
}

// A bisected strict regression of fio-nvme between v5.10 and v5.11,
// culprit c588072bba6b, whose subject is not ASCII.
ReportSources Sources() {
  ReportSources s;
  s.farm_version = "0.1.0";
  s.matrix.set_id(12);
  s.matrix.set_name("nightly");
  s.matrix.set_executor(pb::EXECUTOR_EMULATOR);
  s.matrix.set_spec_yaml(
      "name: nightly\ncatalog: linux-iommu\nplatform: [intel-vtd-snb16c, amd-rome-2s64c]\n"
      "commits: [v5.10, v5.11]\nmodes: [off, strict, lazy]\nworkloads:\n"
      "  - name: fio-nvme\n    params: {numjobs: 4}\n  - name: dma-map-bench\n"
      "repeats: 4\nexecutor: emulator\nanalysis: {bisect: true}\n");
  pb::CatalogCommit c;
  c.set_id("c588072bba6b");
  c.set_subject("iommu/vt-d: Convert intel iommu driver to the iommu ops \xe2\x80\x94 dma-iommu");
  c.set_author("A U Thor <author@example.org>");
  s.commits.push_back(c);
  for (const char* commit : {"v5.10", "v5.11"}) {
    AddRuns(s, commit, pb::IOMMU_MODE_OFF, {1000, 1010, 990, 1000});
    const double strict = std::string(commit) == "v5.10" ? 800 : 600;
    AddRuns(s, commit, pb::IOMMU_MODE_STRICT, {strict, strict + 8, strict - 8, strict});
  }
  pb::Regression r;
  r.set_id(7);
  r.set_catalog("linux-iommu");
  r.set_direction(pb::CHANGE_DIRECTION_REGRESSION);
  r.set_platform("intel-vtd-snb16c");
  r.set_workload("fio-nvme");
  (*r.mutable_params())["numjobs"] = "4";
  r.set_metric("throughput");
  r.set_mode(pb::IOMMU_MODE_STRICT);
  r.set_last_good("v5.10");
  r.set_first_bad("v5.11");
  r.set_magnitude(-0.25);
  r.set_bisect_id(3);
  r.set_culprit_id("c588072bba6b");
  s.regressions.push_back(r);
  s.focus_regression = 7;
  pb::Bisect b;
  b.set_id(3);
  b.set_regression_id(7);
  b.set_state("done");
  for (const auto& [step, commit, verdict] : std::vector<std::tuple<int, std::string, std::string>>{
           {1, "58a8bb39490d", "good"}, {2, "c588072bba6b", "bad"}}) {
    pb::BisectStep* st = b.add_steps();
    st->set_step(step);
    st->set_commit_id(commit);
    st->set_verdict(verdict);
    st->set_repeats(4);
  }
  s.bisects.push_back(b);
  return s;
}

struct Message {
  std::map<std::string, std::string> headers;
  std::string body;
};

// RFC 5322 read back: header lines up to the first empty line.
Message Parse(const std::string& mail) {
  Message m;
  const size_t end = mail.find("\n\n");
  EXPECT_NE(end, std::string::npos) << mail;
  for (absl::string_view line : absl::StrSplit(mail.substr(0, end), '\n')) {
    const size_t colon = line.find(": ");
    EXPECT_NE(colon, std::string_view::npos) << line;
    m.headers[std::string(line.substr(0, colon))] = std::string(line.substr(colon + 2));
  }
  m.body = mail.substr(end + 2);
  return m;
}

TEST(ReportMailTest, AZeroDayStyleMailOfABisectedRegression) {
  MailOptions o;
  o.to = {"Dev <dev@example.org>"};
  o.report_url = "https://reports.lab:8088/";
  o.date = "Sat, 05 Dec 2026 18:00:00 +0000";
  absl::StatusOr<std::string> mail = FormatRegressionMail(Sources(), o);
  ASSERT_TRUE(mail.ok()) << mail.status();
  const Message m = Parse(*mail);
  EXPECT_EQ(m.headers.at("To"), "Dev <dev@example.org>");
  EXPECT_EQ(m.headers.at("Content-Type"), "text/plain; charset=UTF-8");
  // A subject of other than ASCII travels as an RFC 2047 word.
  const std::string& subject = m.headers.at("Subject");
  ASSERT_EQ(subject.rfind("=?UTF-8?B?", 0), 0u) << subject;
  std::string decoded;
  ASSERT_TRUE(absl::Base64Unescape(subject.substr(10, subject.size() - 12), &decoded));
  EXPECT_EQ(decoded.rfind("[iommu-farm] [linux-iommu] c588072bba6b (\"iommu/vt-d: Convert", 0), 0u)
      << decoded;
  EXPECT_NE(decoded.find(": fio-nvme.throughput -25.0% regression (strict, intel-vtd-snb16c)"),
            std::string::npos)
      << decoded;

  const std::string& body = m.body;
  EXPECT_NE(body.find("range:      v5.10..v5.11 (last good..first bad), bisected in 2 steps"),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("parameters: numjobs=4"), std::string::npos) << body;
  EXPECT_NE(body.find("author:     A U Thor <author@example.org>\n"), std::string::npos) << body;
  // The before/after table: the primary metric per mode, not the latency.
  EXPECT_NE(body.find("strict  throughput  IOPS  4/4   800    600    -25.0%"), std::string::npos)
      << body;
  EXPECT_NE(body.find("60.0%"), std::string::npos) << "strict at 60% of off after: " << body;
  EXPECT_EQ(body.find("map_latency_p99"), std::string::npos) << body;
  EXPECT_NE(body.find("58a8bb39490d"), std::string::npos) << "the bisect log: " << body;
  EXPECT_NE(body.find("| Reported-by: iommu-farm <iommu-farm@localhost>\n"
                      "| Link: https://reports.lab:8088/regressions/7\n"),
            std::string::npos)
      << body;

  // The reproduce command's spec is one cell at the last good commit and
  // the culprit.
  const std::string open = "--candidate c588072bba6b <<'EOF'\n";
  const size_t from = body.find(open);
  ASSERT_NE(from, std::string::npos) << body;
  const size_t to = body.find("\n  EOF\n", from);
  ASSERT_NE(to, std::string::npos) << body;
  std::string yaml;
  for (absl::string_view line :
       absl::StrSplit(body.substr(from + open.size(), to - from - open.size()), '\n')) {
    yaml += std::string(line.substr(std::min<size_t>(2, line.size()))) + "\n";
  }
  absl::StatusOr<pb::MatrixSpec> spec = spec::MatrixSpecFromYaml(yaml, spec::SpecLimits{});
  ASSERT_TRUE(spec.ok()) << spec.status() << "\n" << yaml;
  ASSERT_EQ(spec->commit_list().ids_size(), 2);
  EXPECT_EQ(spec->commit_list().ids(0), "v5.10");
  EXPECT_EQ(spec->commit_list().ids(1), "c588072bba6b");
  ASSERT_EQ(spec->platform_size(), 1);
  EXPECT_EQ(spec->platform(0), "intel-vtd-snb16c");
  ASSERT_EQ(spec->modes_size(), 1);
  ASSERT_EQ(spec->workloads_size(), 1);
  EXPECT_EQ(spec->workloads(0).params().at("numjobs"), "4");
  EXPECT_FALSE(spec->analysis().bisect());
}

TEST(ReportMailTest, AnUnbisectedRegressionNamesItsFirstBadCommitAndSaysSo) {
  ReportSources s = Sources();
  s.regressions[0].clear_culprit_id();
  s.bisects.clear();
  absl::StatusOr<std::string> mail = FormatRegressionMail(s, MailOptions{});
  ASSERT_TRUE(mail.ok()) << mail.status();
  const Message m = Parse(*mail);
  EXPECT_EQ(m.headers.count("To"), 0u);
  EXPECT_NE(m.headers.at("Subject").find("[iommu-farm] [linux-iommu] v5.11: fio-nvme.throughput"),
            std::string::npos);
  EXPECT_NE(m.body.find("not bisected: the first bad commit of the range is named"),
            std::string::npos);
  EXPECT_NE(m.body.find("author:     not recorded in the catalog\n"), std::string::npos) << m.body;
  EXPECT_EQ(m.body.find("| Link:"), std::string::npos) << "no report URL, no Link";
}

TEST(ReportMailTest, WithoutAFocusRegressionThereIsNoMail) {
  ReportSources s = Sources();
  s.focus_regression.reset();
  EXPECT_EQ(FormatRegressionMail(s, MailOptions{}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace farm::cli
