// lib/kbuild/test_tree.h: scripts/make-test-kernel-tree's report, for the
// tests that build its tree (label kbuild, and the farm's build jobs).
// Header-only, tests only. Thread-safety: reentrant (runs the script).
#ifndef LIB_KBUILD_TEST_TREE_H_
#define LIB_KBUILD_TEST_TREE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/process/process.h"

namespace farm::kbuild {

struct TestTree {
  std::string dir;
  std::vector<std::string> commits;  // main's, oldest first
  std::string planted, broken;
  // The regression inside the merged topic branch, and branch merged's tip
  // (the merge of that branch into main's last commit).
  std::string merged_planted, merge;
  // The commit of branch strict-forced that makes every default DMA domain
  // translated and strict whatever the command line asks; its parent is
  // the branch's first commit, its fork main's tip.
  std::string mode_forced;
  // The small regression of branch small-cost (forked from main's tip):
  // about 3% of the strict unmap under instruction counting.
  std::string planted_small;
};

// Runs `script` (instant once the tree is cached) and reads its report:
// `tree DIR`, one line per commit of main, then the marked commits
// (`planted <sha>`, `broken <sha>`, `merged-planted <sha>`, `merge <sha>`,
// `mode-forced <sha>`, `planted-small <sha>`);
// a marker it does not know is skipped.
inline absl::StatusOr<TestTree> MakeTestTree(const std::string& script) {
  process::ProcessOptions p;
  p.argv = {script};
  p.timeout = absl::Minutes(20);
  absl::StatusOr<process::ProcessResult> r = process::RunProcess(p);
  if (!r.ok()) return r.status();
  if (!r->ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(script, ": ", r->stderr_data, " (run it as root once)"));
  }
  TestTree t;
  for (absl::string_view line : absl::StrSplit(r->stdout_data, '\n', absl::SkipEmpty())) {
    std::vector<std::string> w = absl::StrSplit(line, absl::MaxSplits(' ', 1));
    if (w[0] == "tree") {
      t.dir = w[1];
    } else if (w[0] == "planted") {
      t.planted = w[1];
    } else if (w[0] == "broken") {
      t.broken = w[1];
    } else if (w[0] == "merged-planted") {
      t.merged_planted = w[1];
    } else if (w[0] == "merge") {
      t.merge = w[1];
    } else if (w[0] == "mode-forced") {
      t.mode_forced = w[1];
    } else if (w[0] == "planted-small") {
      t.planted_small = w[1];
    } else if (w[0].size() == 40 &&
               w[0].find_first_not_of("0123456789abcdef") == std::string::npos) {
      t.commits.push_back(w[0]);
    }
  }
  return t;
}

}  // namespace farm::kbuild

#endif  // LIB_KBUILD_TEST_TREE_H_
