// agent/runners/free_space: whether a real run's files fit where they go.
// The submit check caps what one job may lay out (lib/toolspec/params.h
// kMaxJobFootprintBytes); this is the host's own answer, taken just before
// the tool starts: a job that would fill the disk of a lab host, whose other
// users and logs need it too, is refused there.
//
// Contract: CheckFreeSpace reads the file system's counters (statvfs); no
// other state. Thread-safe.
#ifndef AGENT_RUNNERS_FREE_SPACE_H_
#define AGENT_RUNNERS_FREE_SPACE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace farm::runners {

// What is kept free on a file system whatever a job asks: 5% of its size,
// at most 4 GiB.
std::uint64_t FreeSpaceReserve(std::uint64_t filesystem_bytes);

// ResourceExhausted naming the numbers when `needed` bytes under
// `directory` exceed the space available to unprivileged writers there
// minus FreeSpaceReserve (retryable: another host may have the space);
// Internal when the file system cannot be read; OK otherwise (also for
// needed == 0).
absl::Status CheckFreeSpace(const std::string& directory, std::uint64_t needed);

}  // namespace farm::runners

#endif  // AGENT_RUNNERS_FREE_SPACE_H_
