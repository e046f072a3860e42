#include "agent/storable_report.h"

#include <string>

#include <gtest/gtest.h>

#include "iommufarm/v1/farm.pb.h"
#include "lib/base/utf8.h"

namespace farm::agent {
namespace {

namespace pb = ::iommufarm::v1;

TEST(StorableReportTest, InvalidUtf8InAnyStringFieldBecomesReplacementCharacters) {
  pb::ReportResultRequest req;
  req.add_samples()->set_metric("throughput");
  req.add_samples()->set_unit("ops/\xB5s");  // Latin-1 micro sign
  req.set_raw_output("dev \xFF\xFE ok");
  req.mutable_host()->mutable_guest()->set_cmdline("iommu=\xC3");
  EXPECT_EQ(MakeStringsValidUtf8(&req), 4u);
  EXPECT_EQ(req.samples(0).metric(), "throughput");
  EXPECT_EQ(req.samples(1).unit(), "ops/\xEF\xBF\xBDs");
  EXPECT_EQ(req.raw_output(), "dev \xEF\xBF\xBD\xEF\xBF\xBD ok");
  EXPECT_EQ(req.host().guest().cmdline(), "iommu=\xEF\xBF\xBD");
  // What the scheduler's parser would refuse is gone; a second pass finds nothing.
  EXPECT_EQ(MakeStringsValidUtf8(&req), 0u);
}

TEST(StorableReportTest, MapValuesAreRepairedToo) {
  pb::Job job;
  (*job.mutable_model_set())["fq.kind"] =
      "per\x80"
      "cpu";
  EXPECT_EQ(MakeStringsValidUtf8(&job), 1u);
  EXPECT_EQ(job.model_set().at("fq.kind"),
            "per\xEF\xBF\xBD"
            "cpu");
}

// NUL is valid UTF-8: the scheduler refuses it by field, so the job fails
// with the reason rather than being stored altered.
TEST(StorableReportTest, NulIsLeftForTheSchedulerToRefuse) {
  pb::ReportResultRequest req;
  req.add_samples()->set_metric(std::string("through\0put", 11));
  EXPECT_EQ(MakeStringsValidUtf8(&req), 0u);
  EXPECT_EQ(req.samples(0).metric(), std::string("through\0put", 11));
}

TEST(StorableReportTest, RawOutputIsCutAtACharacterBoundaryAndSaysSo) {
  std::string small = "fits";
  EXPECT_FALSE(CapRawOutput(&small));
  EXPECT_EQ(small, "fits");
  // A three-byte character straddles the limit: the cut goes before it.
  std::string big(kMaxRawOutputBytes - 1, 'a');
  big += "\xE2\x82\xAC tail";
  const size_t total = big.size();
  EXPECT_TRUE(CapRawOutput(&big));
  EXPECT_TRUE(base::IsValidUtf8(big));
  const std::string note = "\n[farm-agent: raw output cut at " +
                           std::to_string(kMaxRawOutputBytes - 1) + " of " + std::to_string(total) +
                           " bytes]\n";
  ASSERT_GT(big.size(), note.size());
  EXPECT_EQ(big.substr(big.size() - note.size()), note);
  EXPECT_EQ(big.size(), kMaxRawOutputBytes - 1 + note.size());
}

}  // namespace
}  // namespace farm::agent
