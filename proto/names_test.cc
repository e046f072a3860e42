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

TEST(NamesTest, StoredModeNumbers) {
  EXPECT_EQ(ModeName(static_cast<int>(pb::IOMMU_MODE_LAZY)), "lazy");
  EXPECT_EQ(ModeName(99), "unspecified");
}

}  // namespace
}  // namespace farm::proto
