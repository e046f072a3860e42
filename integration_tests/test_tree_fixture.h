// integration_tests/test_tree_fixture.h: the test kernel tree
// (scripts/make-test-kernel-tree, lib/kbuild/test_tree.h) for the fixtures
// that build kernels from it. A gtest helper: call it from SetUp and return
// on HasFatalFailure(). Thread-safety: as MakeTestTree (runs the script).
#ifndef INTEGRATION_TESTS_TEST_TREE_FIXTURE_H_
#define INTEGRATION_TESTS_TEST_TREE_FIXTURE_H_

#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "lib/kbuild/test_tree.h"

namespace farm::testing {

// Makes (or finds cached) the test tree into `tree`: a fatal failure when
// the script fails or main has fewer than three commits.
inline void MakeTestTreeOrFail(kbuild::TestTree* tree) {
  absl::StatusOr<kbuild::TestTree> made =
      kbuild::MakeTestTree(std::string(FARM_SOURCE_DIR) + "/scripts/make-test-kernel-tree");
  ASSERT_TRUE(made.ok()) << made.status();
  *tree = *std::move(made);
  ASSERT_GE(tree->commits.size(), 3u);
}

}  // namespace farm::testing

#endif  // INTEGRATION_TESTS_TEST_TREE_FIXTURE_H_
