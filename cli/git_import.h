// farm::cli git import: turns a range of a kernel git tree's history, merges
// and the branches they merged included, into catalog commits (with their
// parents) for ImportGitCatalog.
//
// git is run with fork/execvp and an argument vector (never a shell), so a
// repository path or range can hold any character without being interpreted.
//
// Thread-safety: reentrant; RunProgram forks, so call it from a process that
// is not holding locks other threads need in the child (farmctl is single
// threaded at that point).
#ifndef CLI_GIT_IMPORT_H_
#define CLI_GIT_IMPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::cli {

// Runs argv[0] (looked up in PATH) with argv, returns its standard output.
// Its standard error goes to ours. Non-zero exit -> error naming the program
// and the exit status.
absl::StatusOr<std::string> RunProgram(const std::vector<std::string>& argv);

// Parses `git log --format=%H%x09%s` output (one "sha<TAB>subject" per line)
// into commits with index = line number, oldest first as given.
absl::StatusOr<std::vector<iommufarm::v1::CatalogCommit>> ParseGitLog(const std::string& output);

// The format ParseGitGraphLog reads: one "sha<TAB>parents<TAB>author<TAB>
// subject" line per commit, parents blank-separated, author "Name <email>".
inline constexpr char kGitGraphLogFormat[] = "--format=%H%x09%P%x09%an <%ae>%x09%s";

// Parses `git log` output in kGitGraphLogFormat into commits with their
// parents and authors, index = line number, in the order given.
absl::StatusOr<std::vector<iommufarm::v1::CatalogCommit>> ParseGitGraphLog(
    const std::string& output);

// The commits of `range` A..B for a catalog, oldest first in topological
// order (parents before children), each with its parents: A itself (the good
// end, which git's A..B leaves out), then every commit of git's A..B, merged
// branches included (`git log --topo-order --reverse`); never empty on
// success. A's parents, and those of a merged branch's first commit, lie
// outside the range: they are kept as given.
// `range` is user input (farmctl catalog import-git --range): anything but the
// form A..B (or a leading '-', which git would read as an option), a `repo`
// that is not a git repository, an A or B that is not a commit of it, and an
// A that is not an ancestor of B are kInvalidArgument naming them; git not
// installed is kNotFound.
absl::StatusOr<std::vector<iommufarm::v1::CatalogCommit>> GitRangeLog(const std::string& repo,
                                                                      const std::string& range);

}  // namespace farm::cli

#endif  // CLI_GIT_IMPORT_H_
