# emu part 2 (issue 5): commit catalogs and the storage/network workloads.
# Included from emu/CMakeLists.txt; kept apart so the two halves of emu/ can
# change without editing each other's lists.
find_package(absl CONFIG REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)

# The shipped catalog is copied beside the binaries so an installed or moved
# build tree finds it without the source tree.
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/catalogs/linux-iommu.yaml
               ${CMAKE_CURRENT_BINARY_DIR}/catalogs/linux-iommu.yaml COPYONLY)

add_library(farm_emu_catalog STATIC catalog.cc)
farm_warnings(farm_emu_catalog)
target_include_directories(farm_emu_catalog PUBLIC ${FARM_SOURCE_ROOT})
target_compile_definitions(farm_emu_catalog PRIVATE
  FARM_EMU_SOURCE_CATALOG_DIR="${CMAKE_CURRENT_SOURCE_DIR}/catalogs")
target_link_libraries(farm_emu_catalog PUBLIC absl::status absl::statusor absl::strings yaml-cpp)

add_executable(farm_emu_catalog_test catalog_test.cc)
farm_warnings(farm_emu_catalog_test)
target_link_libraries(farm_emu_catalog_test PRIVATE farm_emu_catalog GTest::gtest GTest::gmock
                                                    GTest::gtest_main)
gtest_discover_tests(farm_emu_catalog_test)
