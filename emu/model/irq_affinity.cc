#include "emu/model/irq_affinity.h"

#include <algorithm>
#include <climits>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace farm::emu {
namespace {

// The least-loaded CPU of `mask` by `load` (managed vectors per CPU), with
// the chip's tie rule; both walk the mask upward (for_each_cpu). Read from
// torvalds/linux:
// - matrix_find_best_cpu_managed (kernel/irq/matrix.c, 1adb4d7ad3a5) skips a
//   CPU only when `cm->managed_allocated > allocated`, so a CPU equal to the
//   minimum so far replaces it: of several least-loaded CPUs the LAST wins.
// - cpumask_pick_least_loaded (drivers/irqchip/irq-gic-v3-its.c,
//   c441bfb5f286) takes a CPU only when `this_count < count` (its managed
//   lpi_count, its_read_lpi_count): the FIRST wins.
int PickLeastLoaded(std::vector<int> mask, const std::map<int, int>& load, IrqChip chip) {
  std::sort(mask.begin(), mask.end());
  int best = mask.front();
  int best_load = INT_MAX;
  for (int cpu : mask) {
    auto it = load.find(cpu);
    const int n = it == load.end() ? 0 : it->second;
    if (chip == IrqChip::kX86Vector ? n <= best_load : n < best_load) {
      best = cpu;
      best_load = n;
    }
  }
  return best;
}

}  // namespace

const char* IrqChipName(IrqChip chip) {
  return chip == IrqChip::kGicIts ? "gic-its" : "x86-vector";
}

absl::StatusOr<std::vector<int>> ParseCpuList(const std::string& text) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    part = absl::StripAsciiWhitespace(part);
    std::vector<absl::string_view> ends = absl::StrSplit(part, '-');
    int a = 0, b = 0;
    if (ends.size() == 1 && absl::SimpleAtoi(ends[0], &a)) {
      b = a;
    } else if (ends.size() != 2 || !absl::SimpleAtoi(ends[0], &a) ||
               !absl::SimpleAtoi(ends[1], &b) || b < a) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", part, "' in cpu list '", text, "' is not N or N-M"));
    }
    if (a < 0) return absl::InvalidArgumentError(absl::StrCat("negative cpu in '", text, "'"));
    for (int c = a; c <= b; ++c) out.push_back(c);
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat("empty cpu list '", text, "'"));
  return out;
}

absl::StatusOr<IrqAffinity> IrqAffinity::Parse(const std::string& spec) {
  IrqAffinity a;
  for (absl::string_view item :
       absl::StrSplit(spec, absl::ByAnyChar("; \t\n"), absl::SkipEmpty())) {
    std::vector<absl::string_view> parts = absl::StrSplit(item, '@');
    if (parts.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "irq_affinity: '", item, "' is not <cpu list>@<effective cpu> (e.g. 0-5@4)"));
    }
    Queue q;
    absl::StatusOr<std::vector<int>> cpus = ParseCpuList(std::string(parts[0]));
    if (!cpus.ok())
      return absl::InvalidArgumentError(absl::StrCat("irq_affinity: ", cpus.status().message()));
    q.cpus = *cpus;
    if (!absl::SimpleAtoi(parts[1], &q.effective) || q.effective < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("irq_affinity: bad effective cpu '", parts[1], "' in '", item, "'"));
    }
    a.queues_.push_back(std::move(q));
  }
  if (a.queues_.empty()) return absl::InvalidArgumentError("irq_affinity: no queues given");
  return a;
}

absl::StatusOr<IrqAffinity> IrqAffinity::ParseProcText(const std::string& text, bool skip_first) {
  IrqAffinity a;
  bool first = true;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    size_t cl = line.find("cpu list");
    size_t el = line.find("effective list");
    if (cl == absl::string_view::npos || el == absl::string_view::npos || el < cl) continue;
    absl::string_view list = absl::StripAsciiWhitespace(line.substr(cl + 8, el - cl - 8));
    absl::ConsumeSuffix(&list, ",");
    absl::string_view eff = absl::StripAsciiWhitespace(line.substr(el + 14));
    if (first && skip_first) {
      first = false;
      continue;
    }
    first = false;
    Queue q;
    absl::StatusOr<std::vector<int>> cpus = ParseCpuList(std::string(list));
    if (!cpus.ok()) return cpus.status();
    q.cpus = *cpus;
    absl::StatusOr<std::vector<int>> e = ParseCpuList(std::string(eff));
    if (!e.ok() || e->empty()) {
      return absl::InvalidArgumentError(absl::StrCat("bad effective list in '", line, "'"));
    }
    q.effective = e->front();
    a.queues_.push_back(std::move(q));
  }
  if (a.queues_.empty())
    return absl::InvalidArgumentError("no '... cpu list ..., effective list ...' lines");
  return a;
}

IrqAffinity IrqAffinity::Spread(const Topology& topo, int queues) {
  IrqAffinity a;
  int nodes = std::max(1, topo.num_nodes());
  queues = std::max(1, std::min(queues, topo.num_cpus));
  for (int node = 0; node < nodes; ++node) {
    std::vector<int> cpus = topo.CpusOfNode(nodes == 1 ? -1 : node);
    int nq = queues / nodes + (node < queues % nodes ? 1 : 0);
    nq = std::min<int>(nq, static_cast<int>(cpus.size()));
    if (nq <= 0) continue;
    size_t pos = 0;
    for (int g = 0; g < nq; ++g) {
      size_t n = cpus.size() / nq + (static_cast<size_t>(g) < cpus.size() % nq ? 1 : 0);
      Queue q;
      q.cpus.assign(cpus.begin() + pos, cpus.begin() + pos + n);
      q.effective = q.cpus.front();
      pos += n;
      a.queues_.push_back(std::move(q));
    }
  }
  return a;
}

int IrqAffinity::QueueOf(int cpu) const {
  for (size_t i = 0; i < queues_.size(); ++i) {
    if (std::find(queues_[i].cpus.begin(), queues_[i].cpus.end(), cpu) != queues_[i].cpus.end()) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

int IrqAffinity::IrqCpuFor(int cpu) const {
  int q = QueueOf(cpu);
  return q < 0 ? cpu : queues_[q].effective;
}

// Each device's vectors are activated in queue order, device after device:
// irq_matrix_alloc_managed -> matrix_find_best_cpu_managed on x86
// (assign_managed_vector), its_select_cpu -> cpumask_pick_least_loaded on the
// ITS (managed branch: the affinity mask ANDed with the online CPUs), each
// then counting the vector on the CPU it chose (managed_allocated++,
// its_inc_lpi_count). Device 0's effective CPUs are taken as given, so a
// one-device run keeps the measured map; the order of later devices is the
// model's (nvme probes asynchronously). NVMe's admin vector is a pre_vector,
// not managed, and is not counted.
//
// Other drivers' managed vectors are not listed anywhere, but device 0's map
// shows what the chip saw: it chose `effective`, so every CPU the tie rule
// would have preferred (before it on the ITS, after it on x86) carried more.
// The least load that explains the choice, one vector on each of those CPUs,
// is counted too; without it the next device would land on a CPU the
// measurement says was busier (seed 002's 0-5@4: CPUs 0-3).
std::vector<IrqAffinity> PerDeviceAffinity(const IrqAffinity& first, int devices, IrqChip chip) {
  std::vector<IrqAffinity> out = {first};
  std::map<int, int> load;
  for (const IrqAffinity::Queue& q : first.queues()) {
    std::vector<int> mask = q.cpus;
    std::sort(mask.begin(), mask.end());
    auto at = std::find(mask.begin(), mask.end(), q.effective);
    if (at != mask.end()) {
      auto from = chip == IrqChip::kGicIts ? mask.begin() : at + 1;
      auto to = chip == IrqChip::kGicIts ? at : mask.end();
      for (auto it = from; it != to; ++it) load[*it] = std::max(load[*it], 1);
    }
    ++load[q.effective];
  }
  for (int d = 1; d < devices; ++d) {
    std::vector<IrqAffinity::Queue> queues = first.queues();
    for (IrqAffinity::Queue& q : queues) {
      q.effective = PickLeastLoaded(q.cpus, load, chip);
      ++load[q.effective];
    }
    out.emplace_back(std::move(queues));
  }
  return out;
}

std::string IrqAffinity::ToString() const {
  std::vector<std::string> parts;
  for (const Queue& q : queues_) {
    // Compress the list back into ranges.
    std::string s;
    for (size_t i = 0; i < q.cpus.size();) {
      size_t j = i;
      while (j + 1 < q.cpus.size() && q.cpus[j + 1] == q.cpus[j] + 1) ++j;
      if (!s.empty()) s += ",";
      s += j == i ? absl::StrCat(q.cpus[i]) : absl::StrCat(q.cpus[i], "-", q.cpus[j]);
      i = j + 1;
    }
    parts.push_back(absl::StrCat(s, "@", q.effective));
  }
  return absl::StrJoin(parts, ";");
}

}  // namespace farm::emu
