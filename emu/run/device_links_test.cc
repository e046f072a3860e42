// Device bandwidth and many-device scaling of fio-nvme, against the platform
// facts (emu/model/platform.h: each NVMe's PCIe link and datasheet rate, each
// machine's root-complex lanes). Nothing here restates a figure: the limits
// come from the DeviceSpec, and the runs go through the run driver.
#include <cstdio>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "emu/model/platform.h"
#include "emu/run/run.h"

namespace farm::emu {
namespace {

absl::StatusOr<RunResult> RunFio(const std::string& platform, const std::string& noise,
                                 const std::map<std::string, std::string>& params) {
  RunSpec spec;
  spec.platform = platform;
  spec.kernel = "latest";
  spec.mode = "passthrough";
  spec.workload = "fio-nvme";
  spec.params = params;
  spec.sets = {{"noise.cv", noise}};
  return RunEmulation(spec);
}

const DeviceSpec* Nvme(const Platform& p) {
  for (const DeviceSpec& d : p.devices) {
    if (absl::StartsWith(d.name, "nvme")) return &d;
  }
  return nullptr;
}

// Large blocks from many jobs: every NVMe is driven past what it can move,
// and moves the smaller of its link's and its own rate, never more. With
// the workload's run-to-run noise too (a device may run slower, not faster).
TEST(DeviceBandwidthTest, NoNvmeExceedsItsLinkOrItsOwnRate) {
  for (const Platform& p : AllPlatforms()) {
    const DeviceSpec* nvme = Nvme(p);
    if (nvme == nullptr) continue;  // intel-vtd-snb16c: no NVMe
    const double limit = DeviceDmaBytesPerSec(*nvme, /*to_device=*/false);
    ASSERT_GT(limit, 0) << p.name;
    ASSERT_LE(limit, PcieLinkBytesPerSec(nvme->pcie_gen, nvme->pcie_lanes)) << p.name;
    for (const std::string bs : {"128k", "256k"}) {
      for (const std::string noise : {"0", "workload"}) {
        absl::StatusOr<RunResult> r =
            RunFio(p.name, noise, {{"devices", "4"}, {"numjobs", "16"}, {"bs", bs}});
        ASSERT_TRUE(r.ok()) << r.status();
        const double bytes = bs == "128k" ? 131072 : 262144;
        const double per_device = r->throughput * bytes / 4;
        std::printf("%s bs=%s noise=%s: %.2f GB/s per NVMe, limit %.2f GB/s\n", p.name.c_str(),
                    bs.c_str(), noise.c_str(), per_device / 1e9, limit / 1e9);
        EXPECT_LE(per_device, limit) << p.name << " bs=" << bs;
        for (int d = 0; d < 4; ++d) {
          auto it = r->extra.find(absl::StrCat("nvme", d, "_bytes_per_s"));
          ASSERT_NE(it, r->extra.end()) << p.name;
          EXPECT_LE(it->second, limit) << p.name << " nvme" << d << " bs=" << bs;
          // 16 jobs can drive more: the limit is what binds.
          EXPECT_GT(it->second, 0.9 * limit) << p.name << " nvme" << d << " bs=" << bs;
        }
      }
    }
  }
}

// Writes are held to the write rate, and dev_mb_per_s overrides the platform.
TEST(DeviceBandwidthTest, WritesAndTheParameter) {
  const Platform& spr = **FindPlatform("intel-spr-2s56c");
  const double write_limit = DeviceDmaBytesPerSec(*Nvme(spr), /*to_device=*/true);
  absl::StatusOr<RunResult> w =
      RunFio(spr.name, "0", {{"numjobs", "8"}, {"bs", "256k"}, {"rw", "write"}});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_LE(w->extra.at("nvme0_bytes_per_s"), write_limit);
  EXPECT_GT(w->extra.at("nvme0_bytes_per_s"), 0.9 * write_limit);
  absl::StatusOr<RunResult> slow =
      RunFio(spr.name, "0", {{"numjobs", "8"}, {"bs", "256k"}, {"dev_mb_per_s", "1000"}});
  ASSERT_TRUE(slow.ok()) << slow.status();
  EXPECT_LE(slow->extra.at("nvme0_bytes_per_s"), 1e9);
  EXPECT_GT(slow->extra.at("nvme0_bytes_per_s"), 0.9e9);
}

// Eight NVMe drives, one fio job each (no cpus_allowed), against one: on
// every platform with the root-complex lanes for eight x4 drives and the CPUs
// for eight jobs and their interrupts, hardware scales near linearly; the
// model must give at least 6x.
TEST(DeviceScalingTest, EightNvmeAtOneJobEachScaleAtLeastSixFold) {
  int checked = 0;
  for (const Platform& p : AllPlatforms()) {
    const DeviceSpec* nvme = Nvme(p);
    if (nvme == nullptr || p.pcie_lanes < 8 * nvme->pcie_lanes || p.topology.num_cpus < 16) {
      std::printf("%s: skipped (no NVMe, lanes not published or too few, or < 16 CPUs)\n",
                  p.name.c_str());
      continue;
    }
    absl::StatusOr<RunResult> one = RunFio(p.name, "0", {{"devices", "1"}, {"numjobs", "1"}});
    absl::StatusOr<RunResult> eight = RunFio(p.name, "0", {{"devices", "8"}, {"numjobs", "8"}});
    ASSERT_TRUE(one.ok() && eight.ok());
    const double scale = eight->throughput / one->throughput;
    std::printf("%s: 1 NVMe %.0f IOPS, 8 NVMe %.0f IOPS, %.2fx\n", p.name.c_str(), one->throughput,
                eight->throughput, scale);
    EXPECT_GE(scale, 6.0) << p.name;
    ++checked;
  }
  // intel-vtd-2s12c, kunpeng920-smmuv3, intel-spr-2s56c, amd-genoa-2s96c,
  // nvidia-grace-2s72c.
  EXPECT_EQ(checked, 5);
}

}  // namespace
}  // namespace farm::emu
