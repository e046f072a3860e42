// labels: which agents take a job. Agent labels (farm-agent --label K=V, HostFacts.labels) and the
// labels a matrix asks for (a spec's `labels:`, Job.labels).
//
// An agent takes a real run (fio, iozone, dma-map-bench) only when its
// labels hold every label the job asks for. The label "platform" is the
// platform a run on the agent's own host answers to: a job on any platform
// that is not a VM machine (proto/kernel_offers.h VmPlatforms) runs only on
// an agent whose "platform" label is the job's platform. An agent that sets
// none answers to its name, so `platform: <agent name>` picks one host and
// a label shared by several hosts picks any of them.
//
// Keys are 1-63 of [a-z0-9._/-] starting with a letter or digit; values
// 1-128 of [A-Za-z0-9._:/+-] (no spaces: a label list prints as K=V,...).
//
// Pure functions; thread-safe.
#ifndef PROTO_LABELS_H_
#define PROTO_LABELS_H_

#include <map>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "iommufarm/v1/farm.pb.h"

namespace farm::proto {

inline constexpr char kPlatformLabel[] = "platform";

// InvalidArgument naming what is wrong with the key or the value.
absl::Status CheckLabel(absl::string_view key, absl::string_view value);

// "K=V" items (repeatable --label) as a map; InvalidArgument for a malformed
// item or a key given twice.
absl::StatusOr<std::map<std::string, std::string>> ParseLabels(
    const std::vector<std::string>& items);

// True when `have` holds every key of `want` with the same value.
bool LabelsHold(const google::protobuf::Map<std::string, std::string>& have,
                const google::protobuf::Map<std::string, std::string>& want);

// The labels `want` lacks in `have`, as "K=V" (sorted), for error messages.
std::vector<std::string> MissingLabels(const google::protobuf::Map<std::string, std::string>& have,
                                       const google::protobuf::Map<std::string, std::string>& want);

// An agent whose health job ran and failed (farm-agent's health jobs,
// agent/health_check.h) takes no work; one that ran none is healthy.
inline bool AgentHealthy(const iommufarm::v1::AgentHealth& health) {
  return !health.checked() || health.ok();
}

// "k=v,k2=v2" in key order.
std::string LabelsText(const google::protobuf::Map<std::string, std::string>& labels);

}  // namespace farm::proto

#endif  // PROTO_LABELS_H_
