#include "cli/kernels.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace farm::cli {
namespace {

namespace pb = ::iommufarm::v1;

kstore::KernelBuild Build(std::string commit, std::string arch, std::string release,
                          std::string version) {
  kstore::KernelBuild b;
  b.commit = std::move(commit);
  b.arch = std::move(arch);
  b.release = std::move(release);
  b.version = std::move(version);
  b.dir = "/store/" + b.commit + "-" + b.arch;
  return b;
}

TEST(KernelCatalogRequest, OneCommitPerIdInVersionOrder) {
  const std::vector<kstore::KernelBuild> builds = {
      Build("v6.1.192", "aarch64", "6.1.0-57-cloud-arm64", "6.1.192-3"),
      Build("v6.1.192", "x86_64", "6.1.0-57-cloud-amd64", "6.1.192-3"),
      Build("v6.1.176", "aarch64", "6.1.0-50-cloud-arm64", "6.1.176-1"),
  };
  pb::ImportGitCatalogRequest r = KernelCatalogRequest(builds, "debian-cloud", "/store");
  EXPECT_EQ(r.catalog(), "debian-cloud");
  EXPECT_EQ(r.range(), "kstore:/store");
  ASSERT_EQ(r.commits_size(), 2);
  EXPECT_EQ(r.commits(0).id(), "v6.1.176");
  EXPECT_EQ(r.commits(0).subject(), "kernel 6.1.0-50-cloud-arm64 (6.1.176-1)");
  EXPECT_EQ(r.commits(1).id(), "v6.1.192");
  EXPECT_EQ(r.commits(1).subject(),
            "kernel 6.1.0-57-cloud-arm64, 6.1.0-57-cloud-amd64 (6.1.192-3)");
  EXPECT_TRUE(r.commits(1).set().empty());
}

TEST(FormatKernelBuilds, OneLinePerBuild) {
  EXPECT_EQ(
      FormatKernelBuilds({Build("k1", "x86_64", "6.1.0-1-amd64", "")}),
      "COMMIT\tARCH\tRELEASE\tVERSION\tDIR\nk1\tx86_64\t6.1.0-1-amd64\t-\t/store/k1-x86_64\n");
}

TEST(FormatKernelBuilds, CsvAndJsonCarryTheFiles) {
  kstore::KernelBuild b = Build("k1", "x86_64", "6.1.0-1-amd64", "");
  b.image = "vmlinuz";
  b.fragments = {"q35.config"};
  EXPECT_EQ(FormatKernelBuilds({b}, OutputFormat::kCsv),
            "commit,arch,release,version,dir,image,initrd,config,modules\n"
            "k1,x86_64,6.1.0-1-amd64,,/store/k1-x86_64,vmlinuz,,,\n");
  auto j = nlohmann::json::parse(FormatKernelBuilds({b}, OutputFormat::kJson));
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["commit"], "k1");
  EXPECT_EQ(j[0]["image"], "vmlinuz");
  EXPECT_EQ(j[0]["fragments"][0], "q35.config");
  EXPECT_EQ(FormatKernelBuilds({}, OutputFormat::kJson), "[]\n");
}

}  // namespace
}  // namespace farm::cli
