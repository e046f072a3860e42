// lib/base/check.h: FARM_DCHECK, the check behind a documented precondition
// (the "REQUIRES:" of a contract). In builds with FARM_INVARIANTS=1 (every
// build but Release, so every test run) a false condition prints the file,
// line, condition and message to stderr and aborts; in Release builds the
// condition is compiled (so it cannot rot) but never evaluated.
//
// Use it for programming errors only: states a correct caller can never
// reach. Bad input from users, files or the network is an absl::Status.
// Header-only and dependency-free, so every layer may include it, emu/engine
// included.
// Thread-safety: stateless.
#ifndef LIB_BASE_CHECK_H_
#define LIB_BASE_CHECK_H_

#include <cstdio>
#include <cstdlib>

namespace farm::base {

[[noreturn]] inline void CheckFailed(const char* file, int line, const char* condition,
                                     const char* message) {
  std::fprintf(stderr, "%s:%d: precondition failed: %s: %s\n", file, line, condition, message);
  std::fflush(stderr);
  std::abort();
}

}  // namespace farm::base

#if FARM_INVARIANTS
#define FARM_DCHECK(condition, message) \
  (static_cast<bool>(condition)         \
       ? static_cast<void>(0)           \
       : ::farm::base::CheckFailed(__FILE__, __LINE__, #condition, message))
#else
#define FARM_DCHECK(condition, message) static_cast<void>(sizeof(static_cast<bool>(condition)))
#endif

#endif  // LIB_BASE_CHECK_H_
