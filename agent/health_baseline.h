// farm::agent health baseline: a lab host's own recent health-job figures
// (fio's read IOPS), per kernel release and IOMMU mode, kept in the agent's
// --state-dir across reboots and kexecs, so that the health job fails a
// device that slowed down (a disk that throttles, a link that trained down,
// a controller that came back from a kexec half reset) and not only one
// that stopped answering.
//
// A figure is judged only against figures of the same key: the kernel
// release (a farm build's release names its commit) and the mode it ran
// in. A kernel under test that makes the host slower is the farm's
// finding, never the host's fault, so it is compared with nothing but
// itself. Only passing figures are kept (the last kKept of each key): a
// degraded device does not lower its own bar.
//
// Thread-safety: not thread-safe; the agent calls it from its health check
// only, under its own serialisation. Owns nothing but its figures.
#ifndef AGENT_HEALTH_BASELINE_H_
#define AGENT_HEALTH_BASELINE_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace farm::agent {

class HealthBaseline {
 public:
  static constexpr int kKept = 5;     // figures kept per key
  static constexpr int kNeeded = 3;   // figures a key needs before it judges
  static constexpr int kVersion = 1;  // the file's format

  // The baseline kept in `path`; an absent file is an empty baseline. A file
  // that does not parse is an error (the caller starts afresh and says so).
  static absl::StatusOr<HealthBaseline> Load(const std::string& path);
  // An empty baseline to be saved to `path`.
  static HealthBaseline Empty(const std::string& path) { return HealthBaseline(path); }

  struct Verdict {
    bool ok = true;
    std::string line;  // for the health detail
  };
  // Judges `figure` of `key` ("6.1.0-57-amd64 strict fio read IOPS"): it
  // fails below `band` times the median of the key's kept figures once the
  // key has kNeeded of them; band 0 judges nothing. A passing figure is
  // kept (the oldest beyond kKept dropped); a failing one is not.
  Verdict Judge(const std::string& key, double figure, double band);

  // Writes the baseline to the path it was loaded from, as the kexec state
  // is written (write, fsync, rename).
  absl::Status Save() const;

  const std::map<std::string, std::vector<double>>& figures() const { return figures_; }

 private:
  explicit HealthBaseline(std::string path) : path_(std::move(path)) {}

  std::string path_;
  std::map<std::string, std::vector<double>> figures_;  // oldest first
};

}  // namespace farm::agent

#endif  // AGENT_HEALTH_BASELINE_H_
