#include "agent/monitors/monitors.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace farm::monitors {
namespace {

namespace pb = ::iommufarm::v1;

std::vector<absl::string_view> Words(absl::string_view line) {
  return absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
}

std::vector<absl::string_view> Lines(absl::string_view text) {
  std::vector<absl::string_view> out = absl::StrSplit(text, '\n');
  for (absl::string_view& l : out) absl::ConsumeSuffix(&l, "\r");
  return out;
}

// One labelled line: the counts (up to one per CPU) and the description.
InterruptLine ReadInterruptLine(absl::string_view label, absl::string_view rest, size_t ncpus) {
  InterruptLine line;
  line.irq = std::string(label);
  std::vector<absl::string_view> words = Words(rest);
  size_t i = 0;
  for (; i < words.size() && i < ncpus; ++i) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(words[i], &v)) break;
    line.counts.push_back(v);
  }
  // ERR and MIS carry one system-wide count, not one per CPU.
  line.per_cpu = line.counts.size() == ncpus || ncpus == 1;
  line.description = absl::StrJoin(words.begin() + i, words.end(), " ");
  return line;
}

int64_t Sum(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

// A counter that went down was reset (its IRQ freed and given again).
int64_t CountDelta(int64_t before, int64_t after) {
  return after >= before ? after - before : after;
}

void DiffInterrupts(const InterruptTable& before, const InterruptTable& after, pb::Monitors& out) {
  std::map<std::string, size_t> cpu_before;
  for (size_t i = 0; i < before.cpus.size(); ++i) cpu_before[before.cpus[i]] = i;
  std::map<std::string, const InterruptLine*> lines_before;
  for (const InterruptLine& l : before.lines) lines_before[l.irq] = &l;
  for (const std::string& c : after.cpus) out.add_cpus(c);
  for (const InterruptLine& l : after.lines) {
    auto b = lines_before.find(l.irq);
    const InterruptLine* old = b == lines_before.end() ? nullptr : b->second;
    pb::InterruptDelta d;
    d.set_irq(l.irq);
    d.set_source(InterruptSource(l));
    d.set_description(l.description);
    if (l.per_cpu) {
      for (size_t i = 0; i < l.counts.size() && i < after.cpus.size(); ++i) {
        int64_t was = 0;
        auto c = cpu_before.find(after.cpus[i]);
        if (old != nullptr && old->per_cpu && c != cpu_before.end() &&
            c->second < old->counts.size()) {
          was = old->counts[c->second];
        }
        d.add_per_cpu(CountDelta(was, l.counts[i]));
      }
      d.set_total(Sum({d.per_cpu().begin(), d.per_cpu().end()}));
    } else {
      d.set_total(CountDelta(old == nullptr ? 0 : Sum(old->counts), Sum(l.counts)));
    }
    if (d.total() != 0) *out.add_interrupts() = std::move(d);
  }
}

// The IOMMU name of a "IOMMU: dmar0 ..." / "... on IOMMU: dmar0" line.
std::string IommuName(absl::string_view line) {
  size_t at = line.find("IOMMU: ");
  if (at == absl::string_view::npos) return "";
  std::vector<absl::string_view> w = Words(line.substr(at + 7));
  return w.empty() ? "" : std::string(w[0]);
}

// The event parts of a snapshot (monitors.h's layout); others are skipped.
void ReadEventPart(const std::string& kind, const std::string& argument, const std::string& part,
                   Snapshot& s) {
  if (kind == "trace") {
    s.events[absl::StrCat("trace/", argument)] = ParseTraceStats(part);
  } else if (kind == "trace-hist") {
    const int64_t bytes = ParseHistBytes(part);
    if (bytes >= 0) s.events[absl::StrCat("trace/", argument, "/bytes")] = bytes;
  } else if (kind == "perf-stat") {
    for (const auto& [name, v] : ParsePerfStat(part)) s.events[name] = v;
  } else if (kind == "event-note") {
    s.event_notes.push_back(argument);
  }
}

}  // namespace

absl::StatusOr<InterruptTable> ParseInterrupts(absl::string_view text) {
  InterruptTable table;
  bool header = false;
  for (absl::string_view raw : Lines(text)) {
    if (absl::StripAsciiWhitespace(raw).empty()) continue;
    if (!header) {
      for (absl::string_view w : Words(raw)) {
        if (!absl::StartsWith(w, "CPU")) {
          return absl::InvalidArgumentError(
              absl::StrCat("/proc/interrupts: header '", raw, "' is not CPU columns"));
        }
        table.cpus.emplace_back(w);
      }
      header = true;
      continue;
    }
    absl::string_view line = absl::StripLeadingAsciiWhitespace(raw);
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos || colon == 0 ||
        absl::StrContains(line.substr(0, colon), ' ')) {
      return absl::InvalidArgumentError(absl::StrCat("/proc/interrupts: no label in '", raw, "'"));
    }
    table.lines.push_back(
        ReadInterruptLine(line.substr(0, colon), line.substr(colon + 1), table.cpus.size()));
  }
  if (!header) return absl::InvalidArgumentError("/proc/interrupts: empty");
  return table;
}

absl::StatusOr<std::map<std::string, int64_t>> ParseVmstat(absl::string_view text) {
  std::map<std::string, int64_t> out;
  for (absl::string_view line : Lines(text)) {
    std::vector<absl::string_view> w = Words(line);
    if (w.empty()) continue;
    int64_t v = 0;
    if (w.size() != 2 || !absl::SimpleAtoi(w[1], &v)) {
      return absl::InvalidArgumentError(absl::StrCat("/proc/vmstat: cannot read '", line, "'"));
    }
    out[std::string(w[0])] = v;
  }
  return out;
}

std::map<std::string, IommuValue> ParseDmarPerfLatency(absl::string_view text) {
  std::map<std::string, IommuValue> out;
  std::string iommu;
  std::vector<std::string> columns;
  for (absl::string_view line : Lines(text)) {
    if (absl::StartsWith(line, "IOMMU: ")) {
      iommu = IommuName(line);
      columns.clear();
      continue;
    }
    std::vector<absl::string_view> w = Words(line);
    if (w.empty() || iommu.empty()) continue;
    if (columns.empty()) {
      for (absl::string_view c : w) columns.emplace_back(c);
      continue;
    }
    if (w.size() != columns.size() + 1) continue;
    for (size_t i = 0; i < columns.size(); ++i) {
      double v = 0;
      if (!absl::SimpleAtod(w[i + 1], &v)) continue;
      // min(us), max(us), average(us): levels, not counts of events.
      const bool gauge = absl::StrContains(columns[i], "(us)");
      out[absl::StrCat("dmar_perf_latency/", iommu, "/", w[0], "/", columns[i])] = {v, gauge};
    }
  }
  return out;
}

std::map<std::string, IommuValue> ParseInvalidationQueue(absl::string_view text) {
  std::map<std::string, IommuValue> out;
  std::string iommu;
  for (absl::string_view line : Lines(text)) {
    if (absl::StartsWith(line, "Invalidation queue on IOMMU: ")) {
      iommu = IommuName(line);
      continue;
    }
    if (iommu.empty() || !absl::StrContains(line, "Head:")) continue;
    std::vector<absl::string_view> w = Words(line);
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      double v = 0;
      if ((w[i] == "Head:" || w[i] == "Tail:") && absl::SimpleAtod(w[i + 1], &v)) {
        std::string key = absl::AsciiStrToLower(absl::StripSuffix(w[i], ":"));
        out[absl::StrCat("invalidation_queue/", iommu, "/", key)] = {v, true};
      }
    }
  }
  return out;
}

int64_t ParseTraceStats(absl::string_view text) {
  static constexpr absl::string_view kFired[] = {
      "entries:", "overrun:", "commit overrun:", "dropped events:", "read events:"};
  int64_t total = 0;
  for (absl::string_view line : Lines(text)) {
    for (absl::string_view key : kFired) {
      absl::string_view rest = line;
      int64_t v = 0;
      if (absl::ConsumePrefix(&rest, key) &&
          absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &v)) {
        total += v;
      }
    }
  }
  return total;
}

int64_t ParseHistBytes(absl::string_view text) {
  // "{ size:       4096 } hitcount:        123"
  int64_t bytes = 0;
  bool any = false;
  for (absl::string_view line : Lines(text)) {
    std::vector<absl::string_view> w = Words(line);
    if (!w.empty() && w[0] == "Hits:") any = true;
    if (w.size() < 6 || w[0] != "{" || w[3] != "}" || w[4] != "hitcount:") continue;
    int64_t size = 0, hits = 0;
    if (absl::SimpleAtoi(w[2], &size) && absl::SimpleAtoi(w[5], &hits)) {
      bytes += size * hits;
      any = true;
    }
  }
  return any ? bytes : -1;
}

std::map<std::string, int64_t> ParsePerfStat(absl::string_view text) {
  std::map<std::string, int64_t> out;
  for (absl::string_view line : Lines(text)) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ',');
    if (f.size() < 3 || absl::StartsWith(line, "#")) continue;
    int64_t v = 0;
    if (!absl::SimpleAtoi(f[0], &v)) continue;  // "<not counted>", a comment
    // "smmuv3_pmcg_100020/tlb_miss/" (perf may add a modifier after the slash).
    std::vector<absl::string_view> ev = absl::StrSplit(f[2], '/', absl::SkipEmpty());
    if (ev.size() < 2) continue;
    out[absl::StrCat("pmcg/", ev[0], "/", ev[1])] += v;
  }
  return out;
}

absl::StatusOr<Snapshot> ParseSnapshot(absl::string_view text) {
  std::map<std::string, std::string> parts;  // "<part> [<argument>]" -> body
  std::string* body = nullptr;
  for (absl::string_view line : Lines(text)) {
    if (absl::ConsumePrefix(&line, "%% ")) {
      body = &parts[std::string(absl::StripAsciiWhitespace(line))];
    } else if (body != nullptr) {
      absl::StrAppend(body, line, "\n");
    }
  }
  Snapshot s;
  for (const auto& [head, part] : parts) {
    std::pair<std::string, std::string> kv = absl::StrSplit(head, absl::MaxSplits(' ', 1));
    const std::string& kind = kv.first;
    if (kind == "interrupts") {
      absl::StatusOr<InterruptTable> t = ParseInterrupts(part);
      if (!t.ok()) return t.status();
      s.interrupts = *std::move(t);
    } else if (kind == "vmstat") {
      absl::StatusOr<std::map<std::string, int64_t>> v = ParseVmstat(part);
      if (!v.ok()) return v.status();
      s.vmstat = *std::move(v);
    } else if (kind == "iommu-files") {
      for (absl::string_view f : Lines(part)) {
        if (!absl::StripAsciiWhitespace(f).empty()) s.iommu_files.emplace_back(f);
      }
    } else if (kind == "iommu-note") {
      s.iommu_note = kv.second;
    } else if (kind == "iommu" && absl::EndsWith(kv.second, "dmar_perf_latency")) {
      s.iommu.merge(ParseDmarPerfLatency(part));
    } else if (kind == "iommu" && absl::EndsWith(kv.second, "invalidation_queue")) {
      s.iommu.merge(ParseInvalidationQueue(part));
    } else {
      ReadEventPart(kind, kv.second, part, s);
    }
  }
  if (parts.count("interrupts") == 0 || parts.count("vmstat") == 0) {
    return absl::InvalidArgumentError("monitor snapshot: no interrupts or vmstat part");
  }
  return s;
}

std::string InterruptSource(const InterruptLine& line) {
  const bool numbered = !line.irq.empty() && absl::ascii_isdigit(line.irq[0]);
  if (!numbered || line.description.empty()) return line.irq;
  return std::string(absl::string_view(line.description).substr(line.description.rfind(' ') + 1));
}

pb::Monitors Diff(const Snapshot& before, const Snapshot& after, absl::string_view where) {
  pb::Monitors out;
  out.set_where(std::string(where));
  DiffInterrupts(before.interrupts, after.interrupts, out);
  for (const auto& [name, v] : after.vmstat) {
    auto b = before.vmstat.find(name);
    const int64_t d = v - (b == before.vmstat.end() ? 0 : b->second);
    if (d != 0) (*out.mutable_vmstat())[name] = d;
  }
  for (const auto& [name, v] : after.iommu) {
    pb::IommuCounter* c = out.add_iommu();
    c->set_name(name);
    c->set_after(v.value);
    c->set_gauge(v.gauge);
    auto b = before.iommu.find(name);
    if (!v.gauge) c->set_delta(v.value - (b == before.iommu.end() ? 0 : b->second.value));
  }
  for (const auto& [name, v] : after.events) {
    auto b = before.events.find(name);
    (*out.mutable_events())[name] = v - (b == before.events.end() ? 0 : b->second);
  }
  for (const std::string& n : after.event_notes) out.add_event_notes(n);
  if (!after.iommu_note.empty()) {
    out.set_iommu_note(after.iommu_note);
  } else if (after.iommu_files.empty()) {
    out.set_iommu_note("none exposed (debugfs has no iommu/ directory)");
  } else {
    out.set_iommu_note(absl::StrCat("debugfs iommu/: ", absl::StrJoin(after.iommu_files, " ")));
  }
  return out;
}

std::vector<pb::PerfSymbol> ParsePerfReport(absl::string_view text, int max) {
  std::vector<pb::PerfSymbol> out;
  for (absl::string_view line : Lines(text)) {
    std::vector<absl::string_view> w = Words(line);
    if (w.size() < 3 || w[0].empty() || w[0].front() == '#' || !absl::EndsWith(w[0], "%")) continue;
    double share = 0;
    if (!absl::SimpleAtod(absl::StripSuffix(w[0], "%"), &share)) continue;
    if (w[1] != "[k]" && w[1] != "[.]") continue;
    pb::PerfSymbol s;
    s.set_share(share);
    s.set_kernel(w[1] == "[k]");
    s.set_symbol(absl::StrJoin(w.begin() + 2, w.end(), " "));
    out.push_back(std::move(s));
  }
  std::stable_sort(out.begin(), out.end(), [](const pb::PerfSymbol& a, const pb::PerfSymbol& b) {
    return a.share() > b.share();
  });
  if (static_cast<int>(out.size()) > max) out.resize(static_cast<size_t>(max));
  return out;
}

int64_t SampledIotlbInvalidations(const pb::Monitors& m) {
  int64_t n = -1;
  for (const pb::IommuCounter& c : m.iommu()) {
    if (!absl::StartsWith(c.name(), "dmar_perf_latency/")) continue;
    n = std::max<int64_t>(n, 0);
    if (!c.gauge() && absl::StrContains(c.name(), "/inv_iotlb/")) {
      n += static_cast<int64_t>(c.delta());
    }
  }
  return n;
}

}  // namespace farm::monitors
