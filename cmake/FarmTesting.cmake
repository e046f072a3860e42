# One way to register a test. Every test carries exactly one of these labels
# in its first place, plus optional extra ones:
#   unit   hermetic: no services, no external tools beyond the POSIX shell;
#          `ctest -L unit` is the fast loop and needs nothing running
#   pg     starts a private PostgreSQL cluster (names end in _pgtest); the
#          label stands for its one resource, PostgreSQL 15's server
#          (scripts/install-deps), which no "Needs:" line repeats
#   tools  needs an external tool: fio, iozone, promtool, clang-format, ...
#   vm     boots a kernel under QEMU
#   e2e    several farm binaries talking to each other
#   slow   hermetic but long (model sweeps)
#   kbuild builds a real kernel (the test tree of scripts/make-test-kernel-tree)
#   lab    a VM lab host: a QEMU guest with a Debian root
#          (scripts/build-lab-root) whose agent reboots by real kexec
#   long   (extra label only) a real-kernel end to end of ten minutes or
#          more on a 2-core machine with no kernel build cached; CI runs
#          one of them per run, in rotation (scripts/test
#          FARM_LONG_TESTS=rotate), so every run stays bounded and each of
#          them still runs every few runs
# A test that needs a prepared resource (a package scripts/install-deps
# installs, kernels of scripts/fetch-test-kernels, a guest root of
# scripts/build-guest-root) says so in one "Needs: ..." line of its
# registration, naming the script; scripts/test prepares every one of them
# before CTest, and a test whose resource is missing fails naming the script.
set(FARM_TEST_LABELS unit pg tools vm e2e slow kbuild lab long)
# `unit` tests are the fast loop: each case gets this long at most.
set(FARM_UNIT_TEST_TIMEOUT 60)

# A test never sees the farm configuration of the shell that runs CTest
# (`eval "$(scripts/farm-local up)"` exports FARM_SERVER, FARM_TLS_*, ...):
# every FARM_* variable the tree reads is unset for every test. "Reads" is
# found by scanning the sources and scripts of the project's folders (those
# with a CMakeLists.txt, and scripts/) for a string literal "FARM_X (getenv,
# CLI11's envname, tables of names) and a shell's $FARM_X / ${FARM_X; re-run
# cmake after adding a reader. Kept:
# the documented inputs of the test harnesses themselves.
set(FARM_TEST_ENV_INPUTS
    FARM_TEST_TMPDIR        # testing/service_harness.h: where test servers live
    FARM_KERNEL_CACHE       # the vm tests' kernel store (scripts/fetch-test-kernels)
    FARM_FUZZ_CASES FARM_FUZZ_SEED  # testing/fuzz.h: a longer or another fuzz run
    FARM_DEBIAN_MIRROR FARM_DEBOOTSTRAP_CACHE FARM_PACKAGE_ROOT)  # scripts/check-package
function(_farm_test_env_unset out)
  file(GLOB top_lists LIST_DIRECTORIES false "${CMAKE_SOURCE_DIR}/*/CMakeLists.txt")
  set(files "")
  foreach(list_file ${top_lists})
    get_filename_component(dir ${list_file} DIRECTORY)
    file(GLOB_RECURSE found LIST_DIRECTORIES false "${dir}/*.cc" "${dir}/*.h" "${dir}/*.sh")
    list(APPEND files ${found})
  endforeach()
  file(GLOB_RECURSE found LIST_DIRECTORIES false "${CMAKE_SOURCE_DIR}/scripts/*")
  list(APPEND files ${found})
  set(names "")
  foreach(f ${files})
    file(STRINGS ${f} lines REGEX "FARM_[A-Z0-9_]+")
    string(REGEX MATCHALL "(\"|\\$\\{?)FARM_[A-Z0-9_]+" refs "${lines}")
    foreach(ref ${refs})
      string(REGEX REPLACE ".*(FARM_[A-Z0-9_]+)$" "\\1" name "${ref}")
      list(APPEND names ${name})
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES names)
  list(REMOVE_ITEM names ${FARM_TEST_ENV_INPUTS})
  list(SORT names)
  list(TRANSFORM names APPEND "=unset:")
  set(${out} "${names}" PARENT_SCOPE)
endfunction()
if(FARM_BUILD_TESTS)
  _farm_test_env_unset(FARM_TEST_ENV_UNSET)
endif()

function(_farm_check_labels labels)
  if(NOT labels)
    message(FATAL_ERROR "farm test without a label")
  endif()
  foreach(l ${labels})
    if(NOT l IN_LIST FARM_TEST_LABELS)
      message(FATAL_ERROR "unknown test label '${l}' (one of: ${FARM_TEST_LABELS})")
    endif()
  endforeach()
endfunction()

# A test's TIMEOUT: a `unit` test gets FARM_UNIT_TEST_TIMEOUT and may not ask
# for more (a slower test is not a unit test); others get `default` unless
# they set one.
function(_farm_default_timeout var default labels)
  list(GET labels 0 kind)
  if(kind STREQUAL "unit")
    if(${var} AND ${var} GREATER FARM_UNIT_TEST_TIMEOUT)
      message(FATAL_ERROR "a unit test's TIMEOUT is at most ${FARM_UNIT_TEST_TIMEOUT} s")
    endif()
    if(NOT ${var})
      set(${var} ${FARM_UNIT_TEST_TIMEOUT} PARENT_SCOPE)
    endif()
  elseif(NOT ${var})
    set(${var} ${default} PARENT_SCOPE)
  endif()
endfunction()

# farm_gtest(target SOURCES... LIBS... LABELS... [PREFIX p] [TIMEOUT s]
#            [DEFINES...] [DEPENDS targets...])
# A GoogleTest binary linked with gtest_main, its cases discovered into CTest.
function(farm_gtest target)
  if(NOT FARM_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "PREFIX;TIMEOUT" "SOURCES;LIBS;LABELS;DEFINES;DEPENDS" ${ARGN})
  _farm_check_labels("${ARG_LABELS}")
  _farm_default_timeout(ARG_TIMEOUT 300 "${ARG_LABELS}")
  add_executable(${target} ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gmock GTest::gtest_main)
  if(ARG_DEFINES)
    target_compile_definitions(${target} PRIVATE ${ARG_DEFINES})
  endif()
  if(ARG_DEPENDS)
    add_dependencies(${target} ${ARG_DEPENDS})
  endif()
  farm_warnings(${target})
  # NO_PRETTY_VALUES: a value-parameterised case is named as gtest names it
  # (Transport/FarmFaultPgTest.Case/mtls with a name generator, .../0
  # without), so `ctest -R '/mtls$'` selects it; the pretty form appends
  # "  # GetParam() = ..." (for structs, a byte dump with addresses).
  gtest_discover_tests(${target} TEST_PREFIX "${ARG_PREFIX}" DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES
                       TEST_LIST ${target}_TESTS PROPERTIES TIMEOUT ${ARG_TIMEOUT})
  # Labels are set by a CTest include file that runs after the discovered
  # list is read: gtest_discover_tests' PROPERTIES cannot carry a list value.
  set(labels_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_labels.cmake)
  file(WRITE ${labels_file}
       "if(${target}_TESTS)\n"
       "  set_tests_properties(\${${target}_TESTS} PROPERTIES LABELS \"${ARG_LABELS}\"\n"
       "                      ENVIRONMENT_MODIFICATION \"${FARM_TEST_ENV_UNSET}\")\n"
       "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${labels_file})
endfunction()

# farm_command_test(name LABELS... COMMAND... [PASS_REGEX re] [WILL_FAIL]
#                   [SKIP_RETURN_CODE n] [TIMEOUT s] [WORKING_DIRECTORY d])
function(farm_command_test name)
  if(NOT FARM_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "WILL_FAIL" "PASS_REGEX;SKIP_RETURN_CODE;TIMEOUT;WORKING_DIRECTORY"
                        "LABELS;COMMAND" ${ARGN})
  _farm_check_labels("${ARG_LABELS}")
  _farm_default_timeout(ARG_TIMEOUT 120 "${ARG_LABELS}")
  if(ARG_WORKING_DIRECTORY)
    add_test(NAME ${name} COMMAND ${ARG_COMMAND} WORKING_DIRECTORY ${ARG_WORKING_DIRECTORY})
  else()
    add_test(NAME ${name} COMMAND ${ARG_COMMAND})
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT}
                                          ENVIRONMENT_MODIFICATION "${FARM_TEST_ENV_UNSET}")
  if(ARG_PASS_REGEX)
    set_tests_properties(${name} PROPERTIES PASS_REGULAR_EXPRESSION "${ARG_PASS_REGEX}")
  endif()
  if(ARG_WILL_FAIL)
    set_tests_properties(${name} PROPERTIES WILL_FAIL TRUE)
  endif()
  if(ARG_SKIP_RETURN_CODE)
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE ${ARG_SKIP_RETURN_CODE})
  endif()
endfunction()
