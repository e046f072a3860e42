// FARM_DCHECK is live in test builds: a false precondition aborts with its
// location and message; a true one costs nothing observable.
#include "lib/base/check.h"

#include "gtest/gtest.h"

namespace farm::base {
namespace {

int CountedTrue(int* calls) {
  ++*calls;
  return 1;
}

TEST(CheckTest, TrueConditionPassesAndIsEvaluatedOnce) {
  int calls = 0;
  FARM_DCHECK(CountedTrue(&calls) == 1, "never fails");
  EXPECT_EQ(calls, 1);
}

TEST(CheckDeathTest, FalseConditionAbortsWithLocationAndMessage) {
  ASSERT_TRUE(FARM_INVARIANTS) << "tests are built with invariant checks on";
  EXPECT_DEATH(FARM_DCHECK(1 + 1 == 3, "arithmetic broke"),
               "check_test.cc:[0-9]+: precondition failed: 1 \\+ 1 == 3: arithmetic broke");
}

}  // namespace
}  // namespace farm::base
