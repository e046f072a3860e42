#include "lib/spec/yaml_limits.h"

#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/parser.h>

#include "absl/strings/str_cat.h"

namespace farm::spec {
namespace {

struct Size {
  int64_t nodes = 0;
  int64_t bytes = 0;
};

// Thrown out of the parser's callbacks to stop at the first excess.
struct OverLimit {
  std::string what;
};

// Sums every node's expanded size: an anchored node records its own, an
// alias adds the size of the node it names, so the total is what a full
// expansion would build, computed without building it.
class ExpansionCounter final : public YAML::EventHandler {
 public:
  explicit ExpansionCounter(const YamlExpansionLimits& limits) : limits_(limits) {
    open_.push_back({{}, YAML::NullAnchor});
  }

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t anchor) override { Leaf({1, 0}, anchor); }
  void OnAlias(const YAML::Mark&, YAML::anchor_t anchor) override {
    if (++aliases_ > limits_.max_aliases) {
      throw OverLimit{absl::StrCat("more than ", limits_.max_aliases, " aliases")};
    }
    auto it = anchored_.find(anchor);
    Add(it == anchored_.end() ? Size{1, 0} : it->second);
  }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t anchor,
                const std::string& value) override {
    Leaf({1, static_cast<int64_t>(value.size())}, anchor);
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    Open(anchor);
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    Open(anchor);
  }
  void OnMapEnd() override { Close(); }

 private:
  struct Frame {
    Size size;
    YAML::anchor_t anchor;
  };

  void Leaf(Size s, YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor) anchored_[anchor] = s;
    Add(s);
  }
  void Open(YAML::anchor_t anchor) {
    open_.push_back({{1, 0}, anchor});
    Count({1, 0});
  }
  // A closed collection's nodes were counted as they came; its parent only
  // takes over its size.
  void Close() {
    Frame f = open_.back();
    open_.pop_back();
    if (f.anchor != YAML::NullAnchor) anchored_[f.anchor] = f.size;
    open_.back().size.nodes += f.size.nodes;
    open_.back().size.bytes += f.size.bytes;
  }
  void Add(Size s) {
    open_.back().size.nodes += s.nodes;
    open_.back().size.bytes += s.bytes;
    Count(s);
  }
  void Count(Size s) {
    total_.nodes += s.nodes;
    total_.bytes += s.bytes;
    if (total_.nodes > limits_.max_expanded_nodes) {
      throw OverLimit{absl::StrCat("more than ", limits_.max_expanded_nodes,
                                   " nodes with its aliases expanded")};
    }
    if (total_.bytes > limits_.max_expanded_bytes) {
      throw OverLimit{absl::StrCat("more than ", limits_.max_expanded_bytes,
                                   " bytes of scalars with its aliases expanded")};
    }
  }

  const YamlExpansionLimits& limits_;
  std::vector<Frame> open_;
  std::unordered_map<YAML::anchor_t, Size> anchored_;
  Size total_;
  int64_t aliases_ = 0;
};

}  // namespace

absl::Status CheckYamlExpansion(std::string_view yaml, const YamlExpansionLimits& limits) {
  std::istringstream in{std::string(yaml)};
  try {
    YAML::Parser parser(in);
    ExpansionCounter counter(limits);
    while (parser.HandleNextDocument(counter)) {
    }
  } catch (const OverLimit& over) {
    return absl::InvalidArgumentError(absl::StrCat("spec: YAML document is ", over.what));
  } catch (const YAML::Exception&) {
    // Left to the loader, which reports the position.
  }
  return absl::OkStatus();
}

}  // namespace farm::spec
