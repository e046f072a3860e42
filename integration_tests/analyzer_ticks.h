// TickUntil: the analyzer integration tests' wait. The tests run the
// analyzer in-process and drive its passes themselves; a pass's errors are
// the test's to read from the store, so they are not asserted here.
// Thread-compatible; borrows the analyzer.
#ifndef INTEGRATION_TESTS_ANALYZER_TICKS_H_
#define INTEGRATION_TESTS_ANALYZER_TICKS_H_

#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "absl/time/time.h"
#include "services/analyzer/analyzer.h"
#include "testing/service_harness.h"

namespace farm::analyzer {

// Runs passes of `a`, `interval` apart, until `done` holds or `timeout`
// passes (a test failure naming `what`, with `context`, e.g. an agent's
// log).
inline void TickUntil(Analyzer& a, const std::function<bool()>& done, const std::string& what,
                      absl::Duration timeout = absl::Seconds(120),
                      const std::function<std::string()>& context = {},
                      absl::Duration interval = absl::Milliseconds(50)) {
  const absl::Status s = testing::PollUntil(
      [&]() -> absl::StatusOr<bool> {
        (void)a.Tick();
        return done();
      },
      timeout, what, interval);
  ASSERT_TRUE(s.ok()) << s << "\n" << (context ? context() : std::string());
}

}  // namespace farm::analyzer

#endif  // INTEGRATION_TESTS_ANALYZER_TICKS_H_
