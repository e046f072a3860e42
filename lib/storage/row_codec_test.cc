// The row encodings a store writes: every value comes back from the JSON
// exactly, whatever characters it holds.
#include "lib/storage/row_codec.h"

#include <cmath>
#include <limits>

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace farm::storage {
namespace {

namespace pb = ::iommufarm::v1;
using json = nlohmann::json;

const char* const kAwkward[] = {
    "",
    "plain",
    "quote \" and backslash \\ and slash /",
    "control \x01\x1f tab\t newline\n return\r",
    "UTF-8: µs, 日本語, 🙂",
    "\x7f del",
};

TEST(RowCodecTest, SamplesReadBackExactlyWhateverTheyHold) {
  google::protobuf::RepeatedPtrField<pb::Sample> in;
  const double values[] = {0.0,
                           -0.0,
                           123.4,
                           512.0,
                           1e-300,
                           1e300,
                           0.1 + 0.2,
                           -7.25,
                           std::numeric_limits<double>::max(),
                           std::numeric_limits<double>::denorm_min()};
  int k = 0;
  for (double v : values) {
    pb::Sample* s = in.Add();
    s->set_metric(kAwkward[k % 6]);
    s->set_unit(kAwkward[(k + 1) % 6]);
    s->set_phase(kAwkward[(k + 2) % 6]);
    s->set_value(v);
    ++k;
  }
  const std::string text = SamplesToJson(in);
  ASSERT_TRUE(json::accept(text)) << text;
  google::protobuf::RepeatedPtrField<pb::Sample> out;
  JsonToSamples(text, &out);
  ASSERT_EQ(out.size(), in.size());
  for (int i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out[i].metric(), in[i].metric()) << i;
    EXPECT_EQ(out[i].unit(), in[i].unit()) << i;
    EXPECT_EQ(out[i].phase(), in[i].phase()) << i;
    EXPECT_EQ(out[i].value(), in[i].value()) << i;
    EXPECT_EQ(std::signbit(out[i].value()), std::signbit(in[i].value())) << i;
  }
}

TEST(RowCodecTest, EmptyUnitAndPhaseAreLeftOut) {
  google::protobuf::RepeatedPtrField<pb::Sample> in;
  pb::Sample* plain = in.Add();
  plain->set_metric("iops");
  plain->set_value(2);
  pb::Sample* full = in.Add();
  full->set_metric("throughput_kb_s");
  full->set_unit("KB/s");
  full->set_phase("write");
  full->set_value(3);
  const json j = json::parse(SamplesToJson(in));
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0], json::parse(R"({"metric": "iops", "value": 2})"));
  EXPECT_EQ(j[1]["phase"], "write");
  EXPECT_EQ(j[1]["unit"], "KB/s");
  google::protobuf::RepeatedPtrField<pb::Sample> out;
  JsonToSamples(SamplesToJson(in), &out);
  ASSERT_EQ(out.size(), 2);
  EXPECT_EQ(out[0].unit(), "");
  EXPECT_EQ(out[0].phase(), "");
  EXPECT_EQ(out[1].phase(), "write");
}

TEST(RowCodecTest, NonFiniteSampleValuesAreKeptAsText) {
  google::protobuf::RepeatedPtrField<pb::Sample> in;
  in.Add()->set_value(std::numeric_limits<double>::infinity());
  in.Add()->set_value(-std::numeric_limits<double>::infinity());
  in.Add()->set_value(std::nan(""));
  const json j = json::parse(SamplesToJson(in));
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["value"], "inf");
  EXPECT_EQ(j[1]["value"], "-inf");
  EXPECT_TRUE(j[2]["value"].is_string());
  google::protobuf::RepeatedPtrField<pb::Sample> out;
  JsonToSamples(SamplesToJson(in), &out);
  ASSERT_EQ(out.size(), 3);
  EXPECT_TRUE(std::isinf(out[0].value()) && out[0].value() > 0);
  EXPECT_TRUE(std::isinf(out[1].value()) && out[1].value() < 0);
  EXPECT_TRUE(std::isnan(out[2].value()));
}

TEST(RowCodecTest, HostFactsReadBackExactly) {
  for (bool guest : {false, true}) {
    pb::HostFacts in;
    in.set_hostname(kAwkward[2]);
    in.set_kernel_release("6.1.0-57-amd64");
    in.set_cpus(24);
    in.set_numa_nodes(2);
    in.set_iommu_mode(pb::IOMMU_MODE_LAZY);
    in.set_iommu_detail(kAwkward[3]);
    in.set_architecture(kAwkward[4]);
    if (guest) {
      pb::GuestFacts* g = in.mutable_guest();
      g->set_provider("qemu");
      g->set_requested_mode(pb::IOMMU_MODE_STRICT);
      g->set_domain_type("DMA");
      g->set_iommu_driver("arm-smmu-v3");
      g->set_cmdline("console=ttyAMA0 iommu.strict=1 \"quoted\"");
      g->set_machine_model("virt,iommu=smmuv3");
      g->set_accel("tcg-icount");
      g->set_icount_shift(7);
      g->set_qemu_version(kAwkward[5]);
    }
    pb::IommuEnvironment* env = in.mutable_iommu_environment();
    (*env->mutable_facts())["unit/dmar0/cap"] = "12008c22260286";
    (*env->mutable_facts())["device/0000:00:04.0/domain"] = kAwkward[2];
    (*env->mutable_unavailable())["device/*/ats"] = kAwkward[3];
    env->set_digest(std::string(64, 'a'));
    const std::string text = HostToJson(in);
    ASSERT_TRUE(json::accept(text)) << text;
    pb::HostFacts out;
    JsonToHost(text, &out);
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(out, in)) << text;
  }
}

}  // namespace
}  // namespace farm::storage
