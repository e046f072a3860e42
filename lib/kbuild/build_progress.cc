#include "lib/kbuild/build_progress.h"

#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace farm::kbuild {

const char* BuildPhaseName(BuildPhase phase) {
  switch (phase) {
    case BuildPhase::kConfig:
      return "config";
    case BuildPhase::kCompile:
      return "compile";
    case BuildPhase::kLink:
      return "link";
    case BuildPhase::kModules:
      return "modules";
    case BuildPhase::kTool:
      return "tool";
    case BuildPhase::kStore:
      return "store";
  }
  return "?";
}

void MakeOutputReader::Feed(absl::string_view chunk) {
  for (;;) {
    const size_t nl = chunk.find('\n');
    if (nl == absl::string_view::npos) break;
    if (partial_.empty()) {
      ReadLine(chunk.substr(0, nl));
    } else {
      partial_.append(chunk.data(), nl);
      ReadLine(partial_);
      partial_.clear();
    }
    chunk.remove_prefix(nl + 1);
  }
  // A line longer than any kbuild prints is not one of its steps.
  if (partial_.size() + chunk.size() <= 4096) partial_.append(chunk.data(), chunk.size());
}

// "  <TAG>[ [M]]  <target>": kbuild's quiet step lines start with two blanks
// and an upper-case tag.
void MakeOutputReader::ReadLine(absl::string_view line) {
  if (!absl::ConsumePrefix(&line, "  ") || line.empty() || !absl::ascii_isupper(line[0])) return;
  std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
  if (words.size() < 2) return;
  const absl::string_view tag = words[0];
  const bool module = words[1] == "[M]";
  const absl::string_view target = words.back();
  if ((tag == "CC" || tag == "AS") && absl::EndsWith(target, ".o")) ++objects_;
  const bool vmlinux =
      absl::StartsWith(target, "vmlinux") || absl::StartsWith(target, ".tmp_vmlinux");
  const bool modules = module || target == "modules.order" ||
                       (tag == "MODPOST" && absl::StartsWith(target, "Module"));
  if (vmlinux && phase_ == BuildPhase::kCompile) phase_ = BuildPhase::kLink;
  if (modules && phase_ == BuildPhase::kLink) phase_ = BuildPhase::kModules;
}

void ProgressReporter::Phase(BuildPhase phase, absl::Time now) {
  if (phase == phase_) return;
  phase_ = phase;
  in_make_ = phase == BuildPhase::kCompile;
  if (in_make_) compile_start_ = now;
  Report(now);
}

void ProgressReporter::MakeOutput(absl::string_view chunk, absl::Time now) {
  reader_.Feed(chunk);
  if (!in_make_) return;
  if (reader_.phase() != phase_) {
    phase_ = reader_.phase();
    Report(now);
  } else if (now - last_report_ >= interval_) {
    Report(now);
  }
}

void ProgressReporter::Report(absl::Time now) {
  last_report_ = now;
  if (!sink_) return;
  BuildProgress p;
  p.phase = phase_;
  p.objects = reader_.objects();
  p.expected_objects = expected_;
  p.elapsed = now - start_;
  if (phase_ == BuildPhase::kCompile) {
    p.remaining = RemainingCompile(p.objects, expected_, now - compile_start_);
  }
  sink_(p);
}

absl::Duration RemainingCompile(int64_t objects, int64_t expected, absl::Duration compile_elapsed) {
  if (expected <= 0 || objects <= 0 || objects >= expected) return absl::Seconds(-1);
  return compile_elapsed * (static_cast<double>(expected - objects) / static_cast<double>(objects));
}

}  // namespace farm::kbuild
