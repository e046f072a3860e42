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
