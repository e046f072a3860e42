#include "scheduler/storable_text.h"

#include <gtest/gtest.h>

#include "iommufarm/v1/farm.pb.h"

namespace farm::scheduler {
namespace {

namespace pb = ::iommufarm::v1;

TEST(StorableTextTest, Utf8) {
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xc3"));              // truncated
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xff"));
}

// Long ASCII runs are checked eight bytes at a time: a bad byte at any
// offset, and a character straddling a word boundary, are still seen.
TEST(StorableTextTest, Utf8AtEveryOffsetOfALongAsciiRun) {
  for (size_t at = 0; at < 24; ++at) {
    std::string s(32, 'a');
    s.replace(at, 2, "\xc3\xa9");
    EXPECT_TRUE(IsValidUtf8(s)) << at;
    s[at] = '\xff';
    EXPECT_FALSE(IsValidUtf8(s)) << at;
    std::string t(32, 'a');
    t.replace(at, 3, "\xe2\x82");  // truncated 3-byte character
    EXPECT_FALSE(IsValidUtf8(t)) << at;
  }
}

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
