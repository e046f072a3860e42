// `farmctl kernels catalog` against a real farm-scheduler (in-process) on
// real PostgreSQL: a kernel store's commits land in a catalog with their
// kernel releases in the subject, in version order, and a second run adds
// nothing. Also `farmctl kernels list` through the binary.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/git_import.h"
#include "scheduler/server.h"
#include "testing/farm_fixture.h"

namespace farm {
namespace {

namespace fs = std::filesystem;
namespace pb = ::iommufarm::v1;

void WriteBuild(const fs::path& dir, const std::string& manifest) {
  fs::create_directories(dir);
  std::ofstream(dir / "kernel.yaml") << manifest;
  std::ofstream(dir / "vmlinuz") << "image";
}

class KernelStorePgTest : public testing::FarmTest {};

TEST_F(KernelStorePgTest, CatalogFromAStore) {
  StartScheduler(testing::FarmMode::kPlaintext);
  ASSERT_FALSE(HasFatalFailure());
  const std::string address = SchedulerAddress();

  const fs::path store = fs::path(TestDir()) / "kstore";
  WriteBuild(store / "v6.1.192-aarch64",
             "commit: v6.1.192\nrelease: 6.1.0-57-cloud-arm64\narch: aarch64\nimage: vmlinuz\n"
             "version: 6.1.192-3\n");
  WriteBuild(store / "v6.1.176-aarch64",
             "commit: v6.1.176\nrelease: 6.1.0-50-cloud-arm64\narch: aarch64\nimage: vmlinuz\n"
             "version: 6.1.176-1\n");
  WriteBuild(store / "broken", "commit: x\n");

  client::ClientOptions client_options;
  client_options.server = address;
  std::ostringstream out, err;
  cli::Commands commands(client_options, out, err);
  ASSERT_EQ(commands.RunKernelsCatalog(store.string(), "debian-cloud"), 0) << err.str();
  EXPECT_EQ(out.str(),
            absl::StrCat("catalog debian-cloud: added 2 of 2 kernel commits from ", store.string(),
                         "\n  v6.1.176\tkernel 6.1.0-50-cloud-arm64 (6.1.176-1)\n"
                         "  v6.1.192\tkernel 6.1.0-57-cloud-arm64 (6.1.192-3)\n"));
  EXPECT_NE(err.str().find("skipped: " + (store / "broken" / "kernel.yaml").string() +
                           ": missing 'release'"),
            std::string::npos)
      << err.str();

  // What the scheduler stored, read back through the farmctl binary.
  auto shown =
      cli::RunProgram({FARMCTL_BIN, "--server", address, "catalog", "show", "debian-cloud"});
  ASSERT_TRUE(shown.ok()) << shown.status();
  const size_t older = shown->find("v6.1.176");
  const size_t newer = shown->find("v6.1.192");
  ASSERT_NE(older, std::string::npos) << *shown;
  ASSERT_NE(newer, std::string::npos) << *shown;
  EXPECT_LT(older, newer) << *shown;
  EXPECT_NE(shown->find("kernel 6.1.0-57-cloud-arm64 (6.1.192-3)"), std::string::npos) << *shown;

  // Again: nothing new.
  out.str("");
  ASSERT_EQ(commands.RunKernelsCatalog(store.string(), "debian-cloud"), 0) << err.str();
  EXPECT_EQ(
      out.str().substr(0, out.str().find('\n')),
      absl::StrCat("catalog debian-cloud: added 0 of 2 kernel commits from ", store.string()));

  auto listed = cli::RunProgram({FARMCTL_BIN, "kernels", "list", "--store", store.string()});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_NE(listed->find("v6.1.176\taarch64\t6.1.0-50-cloud-arm64\t6.1.176-1\t"), std::string::npos)
      << *listed;

  // An empty store is an error that says so.
  fs::create_directories(store / "empty");
  std::ostringstream out2, err2;
  cli::Commands again(client_options, out2, err2);
  EXPECT_EQ(again.RunKernelsCatalog((store / "empty").string(), "debian-cloud"), 1);
  EXPECT_NE(err2.str().find("holds no build"), std::string::npos) << err2.str();
  fs::remove_all(store);
}

}  // namespace
}  // namespace farm
