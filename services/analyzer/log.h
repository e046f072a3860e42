// The analyzer's log: one timestamped line on stderr per event, and the
// number formats its lines and alerts share.
//
// Thread-safety: each line is one fprintf, so lines of several threads do
// not interleave.
#ifndef SERVICES_ANALYZER_LOG_H_
#define SERVICES_ANALYZER_LOG_H_

#include <cstdio>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/names.h"

namespace farm::analyzer {

inline void Log(const std::string& msg) {
  std::fprintf(stderr, "%s farm-analyzer: %s\n",
               absl::FormatTime("%H:%M:%S", absl::Now(), absl::UTCTimeZone()).c_str(), msg.c_str());
}

// A relative change as a signed percentage, e.g. "-12.5%"; a change from a
// zero baseline (kFromZero) as "rose from 0" or "fell from 0".
inline std::string Percent(double rel) { return proto::RelativeChangeText(rel); }

}  // namespace farm::analyzer

#endif  // SERVICES_ANALYZER_LOG_H_
