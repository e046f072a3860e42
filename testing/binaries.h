// testing/binaries.h: the farm binaries a multi-process test starts, and
// starting one with its output kept beside the test's other files.
//
// Pure helpers over ChildProcess (testing/child_process.h); thread-safety and
// lifetime as ChildProcess (start children from the test's main thread).
// Ownership: the caller owns the returned process.
#ifndef TESTING_BINARIES_H_
#define TESTING_BINARIES_H_

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "testing/child_process.h"

namespace farm::testing {

// A binary under test: the compiled-in build path, overridable by the
// environment variable `env` (e.g. $FARM_SCHEDULER_BIN, to test installed
// binaries).
inline std::string BinaryPath(const char* env, const char* built) {
  const char* e = std::getenv(env);
  return e != nullptr && *e != '\0' ? e : built;
}

// A child process with stdout/stderr in <prefix>.out / <prefix>.err.
inline std::unique_ptr<ChildProcess> SpawnLogged(const std::vector<std::string>& argv,
                                                 const std::string& prefix) {
  return std::make_unique<ChildProcess>(argv, prefix + ".out", prefix + ".err");
}

}  // namespace farm::testing

#endif  // TESTING_BINARIES_H_
