# Every external dependency of the tree, found once here (imported targets
# found in the top directory are visible in every folder below it). All come
# from Debian packages; scripts/install-deps installs them.
include(GNUInstallDirs)
# FARM_BUILD_TESTS=OFF configures the product alone: no tests, benchmarks or
# source checks, so GoogleTest, Google Benchmark, libpng and clang-format are
# not needed (scripts/demo builds this way; scripts/install-deps --demo
# installs only what it needs).
option(FARM_BUILD_TESTS "configure the tests, benchmarks and source checks" ON)
find_package(Threads REQUIRED)
if(FARM_BUILD_TESTS)
  find_package(GTest REQUIRED)
  find_package(benchmark CONFIG REQUIRED)
endif()
find_package(absl CONFIG REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)
find_package(spdlog REQUIRED)
find_package(prometheus-cpp CONFIG REQUIRED)
find_package(Boost REQUIRED)
find_package(CURL REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(PQ REQUIRED IMPORTED_TARGET libpq)
pkg_check_modules(PQXX REQUIRED IMPORTED_TARGET libpqxx)
# Results' raw tool output is stored zstd-compressed (lib/storage/pg/pg_raw_outputs.h).
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
# Debian builds cpp-httplib as a shared library (not header-only).
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
if(FARM_BUILD_TESTS)
  # Tests only: reads the screenshot of the HTML report back.
  pkg_check_modules(PNG REQUIRED IMPORTED_TARGET libpng)
  find_program(FARM_CLANG_FORMAT clang-format REQUIRED)
endif()
find_program(FARM_GIT git REQUIRED)

# farm_warnings(target): the project's warning set, applied per target.
function(farm_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow
                                           -Wnon-virtual-dtor -Wno-unused-parameter)
endfunction()

# Unity build of the product libraries and binaries (tests stay one file per
# object). Most of a cold build goes into what every source repeats: parsing
# grpcpp, protobuf, the generated farm.pb.h, CLI11, pqxx and nlohmann, and
# compiling the same inline code again in each object. Compiling a folder's
# sources as one translation unit does that once per batch. Off by default:
# an incremental build then recompiles only the file that changed, and a
# source that misses an #include fails here instead of borrowing its
# neighbour's. scripts/demo turns it on for a fresh build directory, so CI
# (.ci/run runs the demo) builds every product library this way: two sources
# of one library that define the same file-local name -- a private copy of
# something that should live in one shared place -- fail that build.
option(FARM_UNITY_BUILD "compile each product library's sources as one translation unit" OFF)
set(FARM_UNITY_BATCH_SIZE 16 CACHE STRING "sources per unity translation unit (FARM_UNITY_BUILD)")
function(farm_unity target)
  if(FARM_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON
                                               UNITY_BUILD_BATCH_SIZE ${FARM_UNITY_BATCH_SIZE})
    # A type from a source's anonymous namespace looks, to GCC, as if it came
    # from a header once the source is #included by the unity file.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(${target} PRIVATE -Wno-subobject-linkage)
    endif()
  endif()
endfunction()

# farm_library(name SOURCES... [PUBLIC libs...] [PRIVATE libs...]): a static
# library with full-path includes ("emu/engine/engine.h") and the warning set.
function(farm_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC;PRIVATE;DEFINES" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${FARM_SOURCE_ROOT})
  target_link_libraries(${name} PUBLIC ${ARG_PUBLIC} PRIVATE ${ARG_PRIVATE})
  if(ARG_DEFINES)
    target_compile_definitions(${name} PRIVATE ${ARG_DEFINES})
  endif()
  farm_warnings(${name})
  farm_unity(${name})
endfunction()

# farm_binary(name [INSTALL] SOURCES... LIBS...): a binary. INSTALL marks a
# product binary: `cmake --install` and the .deb put it in ${CMAKE_INSTALL_BINDIR}
# (benchmarks and test tools stay in the build tree).
function(farm_binary name)
  cmake_parse_arguments(ARG "INSTALL" "" "SOURCES;LIBS;DEFINES" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS})
  if(ARG_DEFINES)
    target_compile_definitions(${name} PRIVATE ${ARG_DEFINES})
  endif()
  farm_warnings(${name})
  farm_unity(${name})
  if(ARG_INSTALL)
    install(TARGETS ${name} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT farm)
  endif()
endfunction()
