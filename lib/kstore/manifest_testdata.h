// A valid kernel.yaml: the manifest the kernel store tests start from.
//
// Test data only: constants, no state; include from tests.
#ifndef LIB_KSTORE_MANIFEST_TESTDATA_H_
#define LIB_KSTORE_MANIFEST_TESTDATA_H_

namespace farm::kstore::testdata {

inline constexpr char kGood[] =
    "commit: v6.1.192\n"
    "release: 6.1.0-57-cloud-arm64\n"
    "arch: aarch64\n"
    "image: vmlinuz\n"
    "config: config\n"
    "version: 6.1.192-3\n";

}  // namespace farm::kstore::testdata

#endif  // LIB_KSTORE_MANIFEST_TESTDATA_H_
