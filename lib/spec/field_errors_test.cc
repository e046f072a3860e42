#include "lib/spec/field_errors.h"

#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace farm::spec {
namespace {

TEST(FieldErrorsTest, OneLinePerProblemNamingItsPath) {
  FieldErrors e;
  EXPECT_TRUE(e.ToStatus().ok());
  e.Add("modes[1]", "unknown mode \"stict\"");
  e.Add("", "spec: a problem of the whole spec");
  const absl::Status st = e.ToStatus();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "modes[1]: unknown mode \"stict\"\nspec: a problem of the whole spec");
}

TEST(FieldErrorsTest, AFieldIsReportedOnceWithWhatItHolds) {
  FieldErrors e;
  e.Add("workloads[0]", "expected {name, params}, got a list");
  e.AddIfNew("workloads[0]", "again");
  e.AddIfNew("workloads[0].name", "required");
  e.AddIfNew("workloads[0].params.x", "bad");
  // A sibling whose name starts the same is another field.
  e.AddIfNew("workloads[0]x", "other field");
  e.AddIfNew("workloads[1].name", "required");
  EXPECT_TRUE(e.Covers("workloads[0].params"));
  EXPECT_FALSE(e.Covers("workloads"));
  EXPECT_EQ(e.size(), 3u);
  EXPECT_EQ(e.ToStatus().message(),
            "workloads[0]: expected {name, params}, got a list\n"
            "workloads[0]x: other field\n"
            "workloads[1].name: required");
}

TEST(FieldErrorsTest, ReportsTheFirstLinesCutAndCountsTheRest) {
  FieldErrors e;
  const std::string long_message(5000, 'x');
  const size_t n = FieldErrors::kMaxReported + 25;
  for (size_t i = 0; i < n; ++i) e.Add(absl::StrCat("workloads[", i, "].name"), long_message);
  EXPECT_EQ(e.size(), n);
  const std::string msg(e.ToStatus().message());
  std::vector<std::string> lines = absl::StrSplit(msg, '\n');
  ASSERT_EQ(lines.size(), FieldErrors::kMaxReported + 1);
  for (size_t i = 0; i < FieldErrors::kMaxReported; ++i) {
    const std::string line = absl::StrCat("workloads[", i, "].name: ", long_message);
    EXPECT_EQ(lines[i], line.substr(0, FieldErrors::kMaxLineBytes) + "...");
  }
  EXPECT_EQ(lines.back(), "... and 25 more problems");
}

TEST(FieldErrorsTest, ALineIsCutAtACharactersStart) {
  FieldErrors e;
  // "é" is two bytes; the cut falls inside one of them.
  std::string msg;
  while (msg.size() < FieldErrors::kMaxLineBytes + 10) msg += "\xc3\xa9";
  e.Add("", "x" + msg);
  const std::string line(e.ToStatus().message());
  EXPECT_EQ(line, "x" + msg.substr(0, FieldErrors::kMaxLineBytes - 2) + "...");
}

}  // namespace
}  // namespace farm::spec
