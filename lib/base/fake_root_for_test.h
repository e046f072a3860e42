// FakeRoot: a temporary directory standing for "/" (or a tracefs, a sysfs
// subtree) in tests of code that reads /proc and /sys under a root (host
// facts, inventory, the monitors' kernel counters, the guest init's shell).
// Header-only, tests only. Removed when it goes out of scope.
//
// Thread-safety: one test thread. Owns its directory.
#ifndef LIB_BASE_FAKE_ROOT_FOR_TEST_H_
#define LIB_BASE_FAKE_ROOT_FOR_TEST_H_

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace farm::base {

class FakeRoot {
 public:
  FakeRoot()
      : root_(std::filesystem::temp_directory_path() /
              ("farm-fakeroot-" + std::to_string(getpid()) + "-" + std::to_string(counter_++))) {
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  ~FakeRoot() { std::filesystem::remove_all(root_); }
  FakeRoot(const FakeRoot&) = delete;
  FakeRoot& operator=(const FakeRoot&) = delete;

  void Write(const std::string& rel, const std::string& text) {
    std::filesystem::path p = root_ / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  void Dir(const std::string& rel) { std::filesystem::create_directories(root_ / rel); }
  // A symlink at `rel` to `target`, relative as sysfs's are, so that it
  // resolves inside the fake tree.
  void Link(const std::string& rel, const std::string& target) {
    std::filesystem::path p = root_ / rel;
    std::filesystem::create_directories(p.parent_path());
    std::filesystem::create_directory_symlink(target, p);
  }
  std::string path() const { return root_.string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path root_;
};

}  // namespace farm::base

#endif  // LIB_BASE_FAKE_ROOT_FOR_TEST_H_
