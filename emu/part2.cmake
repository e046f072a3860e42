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

# The part-2 workloads run on the core's engine and DMA API, so their sources
# join the core library (one library, no link cycle between the workload
# registry and the workloads). Guarded until the core's target exists.
if(TARGET farm_emu)
  find_package(nlohmann_json CONFIG REQUIRED)
  target_sources(farm_emu PRIVATE
    irq_affinity.cc
    tool_formats.cc
    workloads_io.cc
    workload_iozone_nfsrdma.cc
    workload_fio_nvme.cc
    workload_tcp_stream.cc
    workloads_io_core.cc
    workload_io_adapter.cc)
  target_link_libraries(farm_emu PUBLIC farm_emu_catalog nlohmann_json::nlohmann_json)

  add_executable(farm_emu_io_test workloads_io_test.cc)
  farm_warnings(farm_emu_io_test)
  target_link_libraries(farm_emu_io_test PRIVATE farm_emu GTest::gtest GTest::gmock
                                                 GTest::gtest_main)
  gtest_discover_tests(farm_emu_io_test)

  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/fidelity_part2_test.cc)
    add_executable(farm_emu_fidelity2_test fidelity_part2_test.cc)
    farm_warnings(farm_emu_fidelity2_test)
    target_link_libraries(farm_emu_fidelity2_test PRIVATE farm_emu GTest::gtest GTest::gtest_main)
    gtest_discover_tests(farm_emu_fidelity2_test DISCOVERY_TIMEOUT 60)
  endif()
endif()

if(TARGET farm-emu)
  add_test(NAME emu2.cli.list_commits COMMAND farm-emu list commits)
  set_tests_properties(emu2.cli.list_commits PROPERTIES PASS_REGULAR_EXPRESSION
    "c588072bba6b\tiommu/vt-d: Convert intel iommu driver to the iommu ops")
  # The demo's command: the regression is visible at c588072bba6b in strict mode.
  add_test(NAME emu2.cli.iozone_format
    COMMAND farm-emu run --platform intel-vtd-2s12c --kernel c588072bba6b --mode strict
            --workload iozone-nfsrdma --param threads=12 --param record=256k --format iozone)
  set_tests_properties(emu2.cli.iozone_format PROPERTIES PASS_REGULAR_EXPRESSION
    "Children see throughput for 12 initial writers *= *[0-9]+\\.[0-9][0-9] kB/sec")
  add_test(NAME emu2.cli.bad_commit
    COMMAND farm-emu run --platform intel-vtd-2s12c --kernel deadbeef99 --mode strict
            --workload iozone-nfsrdma)
  set_tests_properties(emu2.cli.bad_commit PROPERTIES WILL_FAIL TRUE)
endif()

