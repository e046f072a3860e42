#include "emu/run/run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "emu/engine/engine.h"
#include "emu/iommu/dma_api.h"
#include "emu/iommu/sim.h"
#include "emu/model/effective_mode.h"
#include "emu/model/kernel.h"
#include "emu/model/platform.h"
#include "emu/workloads/workload.h"
#include "nlohmann/json.hpp"

namespace farm::emu {

RunSpec NoiseFreeSpec(const std::string& platform, const std::string& kernel,
                      const std::string& mode, const std::string& workload,
                      std::map<std::string, std::string> params) {
  RunSpec s;
  s.platform = platform;
  s.kernel = kernel;
  s.mode = mode;
  s.workload = workload;
  s.params = std::move(params);
  s.sets = {{"noise.cv", "0"}};
  return s;
}

absl::StatusOr<ModelConfig> ResolveModel(const RunSpec& spec) {
  auto platform = FindPlatform(spec.platform);
  if (!platform.ok()) return platform.status();
  auto kernel = ResolveKernel(spec.kernel, spec.catalog);
  if (!kernel.ok()) return kernel.status();
  ModelConfig cfg;
  auto c1 = cfg.Apply((*platform)->settings);
  if (!c1.ok()) return absl::InternalError(absl::StrCat("platform table: ", c1.status().message()));
  auto c2 = c1->Apply(*kernel);
  if (!c2.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel '", spec.kernel, "': ", c2.status().message()));
  }
  auto c3 = c2->Apply(spec.sets);
  if (!c3.ok()) return absl::InvalidArgumentError(absl::StrCat("--set: ", c3.status().message()));
  return c3;
}

namespace {

// The run seed mixed with the kernel and the mode (FNV-1a over both).
uint64_t NoiseSeed(const RunSpec& spec) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const std::string* part : {&spec.kernel, &spec.mode}) {
    for (unsigned char ch : *part) h = (h ^ ch) * 0x100000001b3ULL;
    h = (h ^ 0xff) * 0x100000001b3ULL;  // separator
  }
  return spec.seed ^ h;
}

}  // namespace

absl::StatusOr<RunResult> RunEmulation(const RunSpec& spec, const DmaPathFactory& dma_path) {
  auto platform_or = FindPlatform(spec.platform);
  if (!platform_or.ok()) return platform_or.status();
  const Platform& platform = **platform_or;
  auto mode = ParseMode(spec.mode);
  if (!mode.ok()) return mode.status();
  auto info = FindWorkload(spec.workload);
  if (!info.ok()) return info.status();
  auto params = ResolveWorkloadParams(**info, spec.params);
  if (!params.ok()) return params.status();
  auto cfg = ResolveModel(spec);
  if (!cfg.ok()) return cfg.status();
  auto model_or = Model::From(*cfg);
  if (!model_or.ok()) return model_or.status();
  Model model = *model_or;
  // noise.cv=workload (the default): the real tool's run-to-run CV. Runs
  // of other commits or modes are other runs: their noise is drawn apart
  // even where the farm gives them the same seed.
  const double noise_cv = model.noise_cv.value_or((*info)->noise_cv);
  const RunNoise noise = RunNoise::Draw(NoiseSeed(spec), noise_cv);
  model.ApplyNoise(noise.cpu, noise.device);

  if (absl::Status s = params->Validate(&platform); !s.ok()) return s;
  std::unique_ptr<Workload> workload = (*info)->make();
  if (absl::Status s = workload->Configure(*params, platform); !s.ok()) return s;

  Engine engine(platform.topology, model.line, spec.seed);
  if (spec.stop) engine.SetStopCheck(spec.stop);
  Sim sim;
  sim.engine = &engine;
  sim.model = &model;
  // The kernel's own rules decide what the requested mode becomes.
  const EffectiveMode effective = ResolveEffectiveMode(model, *mode);
  DmaApi dma(&sim, effective.mode, platform.devices, platform.topology.num_cpus);
  std::unique_ptr<DmaPath> fake = dma_path ? dma_path() : nullptr;
  WorkloadContext ctx;
  ctx.engine = &engine;
  ctx.dma = fake ? fake.get() : &dma;
  ctx.platform = &platform;
  ctx.model = &model;
  ctx.seed = spec.seed;
  ctx.noise = noise;
  if (absl::Status s = workload->Setup(ctx); !s.ok()) return s;
  size_t workload_cpus = engine.cpus().size();
  dma.StartDaemons(engine);

  auto wall0 = std::chrono::steady_clock::now();
  if (absl::Status s = engine.Run(); !s.ok()) return s;
  auto wall1 = std::chrono::steady_clock::now();

  RunResult r;
  r.platform = spec.platform;
  r.kernel = spec.kernel;
  r.mode = spec.mode;
  r.effective_mode = iommu_mode::Word(effective.mode);
  r.effective_detail = effective.decided_by;
  r.workload = spec.workload;
  r.seed = spec.seed;
  r.params = params->values();
  r.model = cfg->values();
  WorkloadReport report = workload->Report();
  r.throughput = report.throughput;
  r.throughput_unit = report.throughput_unit;
  r.throughput_per_cpu = report.throughput_per_cpu;
  r.operations = report.operations;
  r.errors = report.errors;
  r.map_latency = report.map_latency;
  r.unmap_latency = report.unmap_latency;
  r.interval_throughput = std::move(report.interval_throughput);
  r.interval_ns = report.interval_ns;
  r.extra = std::move(report.extra);
  r.kernel_output = std::move(report.tool_output);
  r.limit = std::move(report.limit);

  // Profile over every CPU (workload and timer daemons), percent of busy.
  std::array<int64_t, kNumSyms> prof{};
  int64_t busy = 0, idle = 0, busy_workload = 0, vend = 0;
  for (size_t i = 0; i < engine.cpus().size(); ++i) {
    const Cpu& c = *engine.cpus()[i];
    for (int s = 0; s < kNumSyms; ++s) {
      prof[s] += c.profile()[s];
      busy += c.profile()[s];
      if (i < workload_cpus) busy_workload += c.profile()[s];
    }
    if (i < workload_cpus) {
      idle += c.idle_time();
      vend = std::max(vend, c.now());
    }
  }
  for (int s = 0; s < kNumSyms; ++s) {
    if (prof[s] == 0) continue;
    ProfileEntry e;
    e.symbol = s == static_cast<int>(Sym::kApp) ? absl::StrCat("[", spec.workload, "]")
                                                : std::string(SymName(static_cast<Sym>(s)));
    e.ns = prof[s];
    e.percent = busy > 0 ? 100.0 * static_cast<double>(prof[s]) / static_cast<double>(busy) : 0;
    r.profile.push_back(e);
  }
  std::sort(r.profile.begin(), r.profile.end(), [](const ProfileEntry& a, const ProfileEntry& b) {
    return a.ns != b.ns ? a.ns > b.ns : a.symbol < b.symbol;
  });
  r.cpu_busy_percent = busy_workload + idle > 0 ? 100.0 * static_cast<double>(busy_workload) /
                                                      static_cast<double>(busy_workload + idle)
                                                : 0;
  r.counters = sim.counters;
  r.iotlb_hits = dma.iotlb_hits();
  r.iotlb_misses = dma.iotlb_misses();
  r.counters.iotlb_hits = r.iotlb_hits;
  r.counters.iotlb_misses = r.iotlb_misses;
  uint64_t lookups = sim.counters.rcache_hits + sim.counters.rcache_misses;
  r.rcache_hit_rate =
      lookups ? static_cast<double>(sim.counters.rcache_hits) / static_cast<double>(lookups) : 0;
  std::map<std::string, LockReport> locks;
  for (const SpinLock* l : sim.locks) {
    LockReport& lr = locks[l->name()];
    lr.name = l->name();
    lr.acquisitions += l->stats().acquisitions;
    lr.contended += l->stats().contended;
    lr.wait_ns += l->stats().wait_ns;
    r.lock_wait_ns += l->stats().wait_ns;
  }
  for (auto& [name, lr] : locks) {
    if (lr.acquisitions) r.locks.push_back(lr);
  }
  std::sort(r.locks.begin(), r.locks.end(), [](const LockReport& a, const LockReport& b) {
    return a.wait_ns != b.wait_ns ? a.wait_ns > b.wait_ns : a.name < b.name;
  });
  r.virtual_ns = vend;
  r.events = engine.events();
  r.switches = engine.switches();
  r.wall_seconds = std::chrono::duration<double>(wall1 - wall0).count();
  return r;
}

namespace {

nlohmann::json Lat(const LatencySummary& s) {
  return {{"mean", s.mean}, {"stddev", s.stddev}, {"p50", s.p50},
          {"p99", s.p99},   {"max", s.max},       {"count", s.count}};
}

double Round(double v, int digits) {
  double f = std::pow(10.0, digits);
  return std::round(v * f) / f;
}

}  // namespace

std::string FormatJson(const RunResult& r) {
  nlohmann::json j;
  j["platform"] = r.platform;
  j["kernel"] = r.kernel;
  j["mode"] = r.mode;
  j["effective_mode"] = {{"mode", r.effective_mode}, {"decided_by", r.effective_detail}};
  j["workload"] = r.workload;
  j["seed"] = r.seed;
  j["params"] = r.params;
  j["throughput"] = {{"value", r.throughput}, {"unit", r.throughput_unit}};
  j["throughput_per_cpu"] = {{"value", r.throughput_per_cpu}, {"unit", r.throughput_unit}};
  j["operations"] = r.operations;
  j["errors"] = r.errors;
  j["latency_ns"] = {{"map", Lat(r.map_latency)}, {"unmap", Lat(r.unmap_latency)}};
  if (!r.interval_throughput.empty()) {
    j["throughput_intervals"] = {{"interval_ns", r.interval_ns}, {"values", r.interval_throughput}};
  }
  nlohmann::json prof = nlohmann::json::array();
  for (const ProfileEntry& e : r.profile) {
    prof.push_back({{"symbol", e.symbol}, {"percent", Round(e.percent, 3)}});
  }
  j["profile"] = prof;
  j["cpu_busy_percent"] = Round(r.cpu_busy_percent, 3);
  const Counters& c = r.counters;
  j["counters"] = {
      {"dma_maps", c.dma_maps},
      {"dma_unmaps", c.dma_unmaps},
      {"dma_map_sgs", c.dma_map_sgs},
      {"dma_unmap_sgs", c.dma_unmap_sgs},
      {"invalidations", c.inv_range + c.inv_domain + c.inv_global},
      {"invalidations_range", c.inv_range},
      {"invalidations_domain", c.inv_domain},
      {"invalidations_global", c.inv_global},
      {"syncs", c.syncs},
      {"qi_descriptors", c.qi_descriptors},
      {"cmdq_commands", c.cmdq_commands},
      {"cmdq_batches", c.cmdq_batches},
      {"cmdq_cmpxchg_attempts", c.cmdq_cmpxchg_attempts},
      {"cmdq_cmpxchg_failures", c.cmdq_cmpxchg_failures},
      {"tlb_sync_polls", c.tlb_sync_polls},
      {"tlb_sync_timeouts", c.tlb_sync_timeouts},
      {"tlbi_va", c.tlbi_va},
      {"tlb_flush_walks", c.tlb_flush_walks},
      {"pgtables_freed", c.pgtables_freed},
      {"rcache_hits", c.rcache_hits},
      {"rcache_misses", c.rcache_misses},
      {"rcache_hit_rate", Round(r.rcache_hit_rate, 6)},
      {"rcache_depot_loads", c.depot_loads},
      {"rcache_depot_stores", c.depot_stores},
      {"rcache_depot_full_frees", c.depot_full_frees},
      {"rcache_depot_trims", c.depot_trims},
      {"rcache_flushes", c.rcache_flushes},
      {"rbtree_allocs", c.rbtree_allocs},
      {"rbtree_frees", c.rbtree_frees},
      {"rbtree_nodes_visited", c.rbtree_nodes_visited},
      {"rbtree_alloc_failures", c.rbtree_alloc_failures},
      {"max32_fast_fails", c.max32_fast_fails},
      {"find_iova", c.find_iova},
      {"ptes_written", c.ptes_written},
      {"ptes_cleared", c.ptes_cleared},
      {"pgtables_allocated", c.pgtables_allocated},
      {"clflush_lines", c.clflush_lines},
      {"iommu_map_calls", c.iommu_map_calls},
      {"write_buffer_flushes", c.write_buffer_flushes},
      {"fq_queued", c.fq_queued},
      {"fq_flushes", c.fq_flushes},
      {"fq_full_flushes", c.fq_full_flushes},
      {"fq_timer_flushes", c.fq_timer_flushes},
      {"iotlb_hits", c.iotlb_hits},
      {"iotlb_misses", c.iotlb_misses},
      {"dma_faults", c.dma_faults},
      {"lock_wait_ns", r.lock_wait_ns},
  };
  nlohmann::json locks = nlohmann::json::array();
  for (const LockReport& l : r.locks) {
    locks.push_back({{"name", l.name},
                     {"acquisitions", l.acquisitions},
                     {"contended", l.contended},
                     {"wait_ns", l.wait_ns}});
  }
  j["locks"] = locks;
  j["virtual_duration_ns"] = r.virtual_ns;
  j["events"] = r.events;
  j["switches"] = r.switches;
  j["extra"] = r.extra;
  j["model"] = r.model;
  j["wall"] = {{"seconds", r.wall_seconds},
               {"events_per_second",
                r.wall_seconds > 0 ? static_cast<double>(r.events) / r.wall_seconds : 0}};
  return j.dump(2) + "\n";
}

std::string FormatText(const RunResult& r) {
  std::string out;
  absl::StrAppendFormat(&out, "%s | kernel %s | mode %s | %s | seed %d\n", r.platform, r.kernel,
                        r.mode, r.workload, r.seed);
  if (r.effective_mode != r.mode) {
    absl::StrAppendFormat(&out, "effective mode: %s, not %s (%s)\n", r.effective_mode, r.mode,
                          r.effective_detail);
  }
  absl::StrAppendFormat(&out, "throughput: %.0f %s (%.0f per CPU), %d operations, %d errors\n",
                        r.throughput, r.throughput_unit, r.throughput_per_cpu, r.operations,
                        r.errors);
  if (!r.limit.empty()) absl::StrAppend(&out, "limit: ", r.limit, "\n");
  if (!r.interval_throughput.empty()) {
    absl::StrAppendFormat(&out, "throughput per %.3g s:", static_cast<double>(r.interval_ns) / 1e9);
    for (double v : r.interval_throughput) absl::StrAppendFormat(&out, " %.0f", v);
    absl::StrAppend(&out, "\n");
  }
  auto lat = [&](const char* name, const LatencySummary& s) {
    absl::StrAppendFormat(&out,
                          "%-6s latency ns: mean %.0f stddev %.0f p50 %.0f p99 %.0f max %.0f\n",
                          name, s.mean, s.stddev, s.p50, s.p99, s.max);
  };
  lat("map", r.map_latency);
  lat("unmap", r.unmap_latency);
  absl::StrAppendFormat(&out, "cpu busy %.1f%%; profile (%% of busy cycles):\n",
                        r.cpu_busy_percent);
  int shown = 0;
  for (const ProfileEntry& e : r.profile) {
    if (shown++ == 15) break;
    absl::StrAppendFormat(&out, "  %6.2f%%  %s\n", e.percent, e.symbol);
  }
  const Counters& c = r.counters;
  absl::StrAppendFormat(&out,
                        "invalidations %d (range %d, domain %d, global %d), syncs %d, rcache hit "
                        "rate %.3f, rbtree nodes visited %d, lock wait %.3f ms\n",
                        c.inv_range + c.inv_domain + c.inv_global, c.inv_range, c.inv_domain,
                        c.inv_global, c.syncs, r.rcache_hit_rate, c.rbtree_nodes_visited,
                        static_cast<double>(r.lock_wait_ns) / 1e6);
  for (const LockReport& l : r.locks) {
    if (l.contended == 0) continue;
    absl::StrAppendFormat(&out, "  lock %-24s acquisitions %d contended %d wait %.3f ms\n", l.name,
                          l.acquisitions, l.contended, static_cast<double>(l.wait_ns) / 1e6);
  }
  absl::StrAppendFormat(&out, "virtual %.6f s, %d events, wall %.3f s\n",
                        static_cast<double>(r.virtual_ns) / 1e9, r.events, r.wall_seconds);
  return out;
}

absl::StatusOr<std::string> FormatKernel(const RunResult& r) {
  if (r.kernel_output.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--format kernel is only defined for dma-map-bench, not ", r.workload));
  }
  return r.kernel_output;
}

}  // namespace farm::emu
