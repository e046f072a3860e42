#include "proto/names.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace farm::proto {
namespace {
namespace pb = ::iommufarm::v1;

// Every value the API defines has its own word, and the word reads back as
// that value: the generated descriptor, not a second list, says which exist.
template <typename E>
void ExpectRoundTrip(const google::protobuf::EnumDescriptor* d, std::string (*name)(E),
                     E (*from_name)(std::string_view)) {
  std::set<std::string> seen;
  for (int i = 0; i < d->value_count(); ++i) {
    E value = static_cast<E>(d->value(i)->number());
    std::string word = name(value);
    if (d->value(i)->number() == 0) {
      EXPECT_EQ(word, "unspecified");
      continue;
    }
    EXPECT_NE(word, "unspecified") << d->value(i)->name();
    EXPECT_TRUE(seen.insert(word).second) << word << " spelled twice";
    if (from_name != nullptr) {
      EXPECT_EQ(from_name(word), value) << word;
    }
  }
  if (from_name != nullptr) {
    EXPECT_EQ(static_cast<int>(from_name("no-such-word")), 0);
  }
}

TEST(NamesTest, EveryEnumValueHasOneWordThatReadsBack) {
  ExpectRoundTrip<pb::IommuMode>(pb::IommuMode_descriptor(), &ModeName, &ModeFromName);
  ExpectRoundTrip<pb::Executor>(pb::Executor_descriptor(), &ExecutorName, &ExecutorFromName);
  ExpectRoundTrip<pb::JobState>(pb::JobState_descriptor(), &JobStateName, nullptr);
  ExpectRoundTrip<pb::MatrixState>(pb::MatrixState_descriptor(), &MatrixStateName, nullptr);
  ExpectRoundTrip<pb::RegressionState>(pb::RegressionState_descriptor(), &RegressionStateName,
                                       &RegressionStateFromName);
}

// The name lists are the same words, each reading back, in enum order.
template <typename E>
void ExpectListed(const std::vector<std::string>& names, const google::protobuf::EnumDescriptor* d,
                  std::string (*name)(E), E (*from_name)(std::string_view)) {
  std::vector<std::string> expected;
  for (int i = 0; i < d->value_count(); ++i) {
    if (d->value(i)->number() != 0) expected.push_back(name(static_cast<E>(d->value(i)->number())));
  }
  EXPECT_EQ(names, expected);
  for (const std::string& word : names) {
    EXPECT_NE(static_cast<int>(from_name(word)), 0) << word;
    EXPECT_EQ(name(from_name(word)), word);
  }
}

TEST(NamesTest, NameListsHoldEveryWordOnce) {
  ExpectListed<pb::IommuMode>(ModeNames(), pb::IommuMode_descriptor(), &ModeName, &ModeFromName);
  ExpectListed<pb::Executor>(ExecutorNames(), pb::Executor_descriptor(), &ExecutorName,
                             &ExecutorFromName);
  ExpectListed<pb::RegressionState>(RegressionStateNames(), pb::RegressionState_descriptor(),
                                    &RegressionStateName, &RegressionStateFromName);
  EXPECT_EQ(ModeNames(), (std::vector<std::string>{"off", "passthrough", "strict", "lazy"}));
  EXPECT_EQ(ExecutorNames(),
            (std::vector<std::string>{"emulator", "fio", "iozone", "kbuild", "dma-map-bench"}));
  EXPECT_EQ(ModeName(pb::IOMMU_MODE_UNSPECIFIED), kUnspecifiedName);
}

TEST(NamesTest, ModesConvertToTheTableAndBack) {
  EXPECT_EQ(ModeOf(pb::IOMMU_MODE_OFF), iommu_mode::Mode::kOff);
  EXPECT_EQ(ModeOf(pb::IOMMU_MODE_PASSTHROUGH), iommu_mode::Mode::kPassthrough);
  EXPECT_EQ(ModeOf(pb::IOMMU_MODE_STRICT), iommu_mode::Mode::kStrict);
  EXPECT_EQ(ModeOf(pb::IOMMU_MODE_LAZY), iommu_mode::Mode::kLazy);
  EXPECT_EQ(ModeOf(pb::IOMMU_MODE_UNSPECIFIED), std::nullopt);
  EXPECT_EQ(ModeOf(static_cast<pb::IommuMode>(17)), std::nullopt);
  for (const iommu_mode::ModeSpelling& s : iommu_mode::kModes) {
    EXPECT_EQ(ModeOf(ProtoMode(s.mode)), s.mode) << s.word;
    EXPECT_EQ(ModeName(ProtoMode(s.mode)), s.word);
  }
}

TEST(NamesTest, StoredModeNumbers) {
  EXPECT_EQ(ModeName(static_cast<int>(pb::IOMMU_MODE_LAZY)), "lazy");
  EXPECT_EQ(ModeName(99), "unspecified");
}

}  // namespace
TEST(NamesTest, RelativeChangeTextSaysAChangeFromZeroInWords) {
  EXPECT_EQ(RelativeChangeText(-0.125), "-12.5%");
  EXPECT_EQ(RelativeChangeText(0.0), "+0.0%");
  EXPECT_EQ(RelativeChangeText(kChangeFromZero), "rose from 0");
  EXPECT_EQ(RelativeChangeText(-kChangeFromZero), "fell from 0");
}

}  // namespace farm::proto
