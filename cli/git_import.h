// farm::cli git import: turns a kernel git tree's first-parent history into
// catalog commits for ImportGitCatalog.
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

// The commits of `range` A..B for a catalog, oldest first: A itself (the good
// end, which git's A..B leaves out), then
// `git -C repo log --first-parent --reverse --format=%H%x09%s A..B`, parsed
// and indexed from 0; never empty on success.
// `range` is user input (farmctl catalog import-git --range): anything but the
// form A..B (or a leading '-', which git would read as an option), and an A
// that is not on B's first-parent line, are kInvalidArgument, not a
// precondition.
absl::StatusOr<std::vector<iommufarm::v1::CatalogCommit>> GitFirstParentLog(
    const std::string& repo, const std::string& range);

}  // namespace farm::cli

#endif  // CLI_GIT_IMPORT_H_
