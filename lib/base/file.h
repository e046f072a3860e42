// lib/base/file.h: whole-file reads and writes of the small files the tree
// keeps and reads back: specs, catalogs, kernel configs and manifests, state
// files, PEM files, logs. One copy of each, so that every caller opens, reads
// and reports a failure the same way.
//
// Free functions with no state of their own: thread-safe as far as the files
// are (two writers of one path race as they would with any other writes).
// Files are read and written byte for byte (no newline translation). Errors
// are absl::Status naming the path; callers that must name a file as the user
// did (a flag, a command-line argument) wrap them.
#ifndef LIB_BASE_FILE_H_
#define LIB_BASE_FILE_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace farm::base {

// The whole file. NotFound "cannot read PATH" when it cannot be opened
// (missing, unreadable).
absl::StatusOr<std::string> ReadFile(const std::string& path);

// The whole file, or "" when it cannot be opened: for files whose absence
// means nothing to say (a log a child never wrote, a /proc or /sys entry the
// running kernel lacks).
std::string ReadFileOrEmpty(const std::string& path);

// True when `path` is a directory with nothing in it: a mount point nothing
// is mounted on yet (debugfs, tracefs). False when it is missing, not a
// directory, unreadable or not empty.
bool IsEmptyDirectory(const std::string& path);

// Creates or truncates `path` and writes `contents`. Internal "cannot write
// PATH" when it cannot be opened or written.
absl::Status WriteFile(const std::string& path, absl::string_view contents);

// Writes `contents` to PATH.tmp, fsyncs it and renames it over `path`, so
// that a reader (or a host rebooting mid-way) finds the old contents or the
// new, never a part. `mode` is the new file's permission bits before the
// umask. Internal "cannot write PATH: <errno text>" on any failure; PATH.tmp
// may then be left behind.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents,
                                 mode_t mode = 0666);

}  // namespace farm::base

#endif  // LIB_BASE_FILE_H_
