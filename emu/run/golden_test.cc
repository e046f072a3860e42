// Golden outputs of the emulator: `farm-emu run --format json` for every
// platform x workload x IOMMU mode at two kernels (the catalog's oldest
// commit and its latest), zero noise (--set noise.cv=0, whatever the
// default), short windows, with the wall-clock fields dropped. The model is deterministic for a
// given input and seed, so any difference is a model change: it must come with regenerated files
// (scripts/emu-golden) in the same commit, and the commit says why.
//
// One file per platform and workload under testdata/golden/, keyed
// "KERNEL MODE"; a run that fails records its exit status and message.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "emu/model/platform.h"
#include "emu/workloads/workload.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace farm::emu {
namespace {

constexpr const char* kModes[] = {"off", "passthrough", "strict", "lazy"};
constexpr const char* kKernels[] = {"v4.6", "latest"};

// Short windows keep the whole set within a few seconds; every mechanism
// still runs (ramp, measured window, timers, flush queues).
const std::map<std::string, std::vector<std::string>>& ShortParams() {
  static const auto* params = new std::map<std::string, std::vector<std::string>>{
      {"dma-map-bench", {"seconds=0.001", "threads=4"}},
      {"memcached", {"seconds=0.002", "warmup=0.001", "instances=4"}},
      {"fio-nvme", {"runtime_ms=1", "ramp_ms=1", "numjobs=2"}},
      {"iozone-nfsrdma", {"threads=2", "size=16m", "sim_records=4"}},
      {"tcp-stream", {"runtime_ms=1", "ramp_ms=1", "sessions=2"}},
      {"nvmf-target", {"runtime_ms=1", "ramp_ms=1", "jobs=2", "ssds=2"}},
  };
  return *params;
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

// Runs farm-emu; returns the stripped JSON, or {exit, output} on failure.
nlohmann::json RunFarmEmu(const std::string& platform, const std::string& workload,
                          const std::string& mode, const std::string& kernel) {
  const char* bin = std::getenv("FARM_EMU_BIN");  // another build's, to compare two trees
  std::string cmd = std::string(bin != nullptr && *bin ? bin : FARM_EMU_BIN) +
                    " run --format json --platform " + Quote(platform) + " --workload " +
                    Quote(workload) + " --mode " + mode + " --kernel " + kernel +
                    " --set noise.cv=0";
  auto it = ShortParams().find(workload);
  if (it != ShortParams().end()) {
    for (const std::string& p : it->second) cmd += " --param " + Quote(p);
  }
  cmd += " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {{"exit", -1}, {"output", "popen failed"}};
  std::string out;
  std::array<char, 4096> buf;
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  int status = pclose(pipe);
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code != 0) return {{"exit", code}, {"output", out}};
  nlohmann::json j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return {{"exit", code}, {"unparsable", out}};
  j.erase("wall");
  return j;
}

std::filesystem::path GoldenFile(const std::string& platform, const std::string& workload) {
  return std::filesystem::path(FARM_GOLDEN_DIR) / (platform + "." + workload + ".json");
}

struct Case {
  std::string platform, workload;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.platform << " " << c.workload; }

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (const Platform& p : AllPlatforms()) {
    for (const WorkloadInfo& w : AllWorkloads()) cases.push_back({p.name, w.name});
  }
  return cases;
}

class GoldenTest : public ::testing::TestWithParam<Case> {};

TEST_P(GoldenTest, MatchesCommittedOutput) {
  const Case& c = GetParam();
  nlohmann::json now = nlohmann::json::object();
  for (const char* kernel : kKernels) {
    for (const char* mode : kModes) {
      now[std::string(kernel) + " " + mode] = RunFarmEmu(c.platform, c.workload, mode, kernel);
    }
  }
  const std::filesystem::path file = GoldenFile(c.platform, c.workload);
  if (const char* update = std::getenv("FARM_GOLDEN_UPDATE"); update && *update == '1') {
    std::ofstream(file) << now.dump(1) << "\n";
    GTEST_SKIP() << "wrote " << file;
  }
  std::ifstream in(file);
  ASSERT_TRUE(in.good()) << file << " is missing: run scripts/emu-golden";
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json want = nlohmann::json::parse(text.str(), nullptr, false);
  ASSERT_FALSE(want.is_discarded()) << file << " is not JSON";
  for (auto& [key, value] : want.items()) {
    ASSERT_TRUE(now.contains(key)) << file << ": no run '" << key << "' any more";
    // Field by field, so a failure names what moved instead of two dumps.
    nlohmann::json diff = nlohmann::json::diff(value, now[key]);
    EXPECT_TRUE(diff.empty()) << c.platform << " " << c.workload << " " << key << " differs from "
                              << file << ":\n"
                              << diff.dump(1).substr(0, 4000);
  }
  EXPECT_EQ(want.size(), now.size()) << file << ": run set changed";
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  std::string name = info.param.platform + "_" + info.param.workload;
  for (char& ch : name) {
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(EveryPlatformAndWorkload, GoldenTest, ::testing::ValuesIn(AllCases()),
                         CaseName);

}  // namespace
}  // namespace farm::emu
