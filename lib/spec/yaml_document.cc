#include "lib/spec/yaml_document.h"

#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/parser.h>

#include "absl/strings/str_cat.h"

namespace farm::spec {
namespace {

struct Refused {
  std::string what;
};

// Follows the maps open at each point of the event stream: in a map, nodes
// alternate key, value; a scalar key is remembered with its line, and a key
// seen before in the same map is refused.
class KeyChecker final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override { Node(m, nullptr); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { Node(m, nullptr); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                const std::string& value) override {
    Node(m, &value);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Node(m, nullptr);
    open_.push_back(Frame{false, true, {}});
  }
  void OnSequenceEnd() override { open_.pop_back(); }
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Node(m, nullptr);
    open_.push_back(Frame{true, true, {}});
  }
  void OnMapEnd() override { open_.pop_back(); }

 private:
  struct Frame {
    bool map = false;
    bool at_key = true;
    std::vector<std::pair<std::string, int>> keys;  // key, line
  };

  void Node(const YAML::Mark& m, const std::string* scalar) {
    if (open_.empty() || !open_.back().map) return;
    Frame& f = open_.back();
    const bool key = f.at_key;
    f.at_key = !f.at_key;
    if (!key || scalar == nullptr) return;
    for (const auto& [k, line] : f.keys) {
      if (k == *scalar)
        throw Refused{absl::StrCat("YAML key \"", k.substr(0, 100),
                                   "\" appears twice in one map (lines ", line, " and ", m.line + 1,
                                   "); say it once")};
    }
    f.keys.emplace_back(*scalar, m.line + 1);
  }

  std::vector<Frame> open_;
};

}  // namespace

absl::Status CheckYamlDocument(std::string_view yaml) {
  std::istringstream in{std::string(yaml)};
  try {
    YAML::Parser parser(in);
    KeyChecker checker;
    int documents = 0;
    while (parser.HandleNextDocument(checker)) {
      if (++documents > 1)
        return absl::InvalidArgumentError(
            "a second YAML document (after `---`) would not be read; one document per file");
    }
  } catch (const Refused& r) {
    return absl::InvalidArgumentError(r.what);
  } catch (const YAML::Exception&) {
    // Left to the loader, which reports the position.
  }
  return absl::OkStatus();
}

absl::Status CheckYamlText(std::string_view text) {
  const bool utf16 = text.size() >= 2 && ((text[0] == '\xff' && text[1] == '\xfe') ||
                                          (text[0] == '\xfe' && text[1] == '\xff'));
  if (utf16)
    return absl::InvalidArgumentError(
        "the text is UTF-16 (it starts with a UTF-16 byte order mark); save it as UTF-8");
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    return absl::InvalidArgumentError(absl::StrCat(
        "a NUL byte at offset ", nul, " (UTF-16 text, or a binary file?); save it as UTF-8 text"));
  return absl::OkStatus();
}

}  // namespace farm::spec
