#include "scheduler/storable_text.h"

#include <gtest/gtest.h>

#include "iommufarm/v1/farm.pb.h"

namespace farm::scheduler {
namespace {

namespace pb = ::iommufarm::v1;

TEST(StorableTextTest, NulInANestedRepeatedFieldIsNamed) {
  pb::ReportResultRequest req;
  req.add_samples()->set_metric("throughput");
  req.add_samples()->set_metric(std::string("iops\0x", 6));
  absl::Status st = CheckStorableText(req);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("samples[1].metric"), std::string::npos) << st;
  EXPECT_NE(st.message().find("NUL"), std::string::npos) << st;
}

TEST(StorableTextTest, InvalidUtf8InAMapValueIsNamed) {
  pb::SubmitMatrixRequest ok;
  ok.set_spec_yaml("catalog: linux-iommu\n");
  EXPECT_TRUE(CheckStorableText(ok).ok());
  pb::CatalogCommit c;
  c.set_id("v5.10");
  (*c.mutable_set())["iova.allocator"] = "rb\xfftree";
  absl::Status st = CheckStorableText(c);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("set"), std::string::npos) << st;
  EXPECT_NE(st.message().find("UTF-8"), std::string::npos) << st;
}

}  // namespace
}  // namespace farm::scheduler
