# One way to register a test. Every test carries exactly one of these labels
# in its first place, plus optional extra ones:
#   unit   hermetic: no services, no external tools beyond the POSIX shell;
#          `ctest -L unit` is the fast loop and needs nothing running
#   pg     starts a private PostgreSQL cluster (names end in _pgtest)
#   tools  needs an external tool: fio, iozone, promtool, clang-format, ...
#   vm     boots a kernel under QEMU
#   e2e    several farm binaries talking to each other
#   slow   hermetic but long (model sweeps)
#   kbuild builds a real kernel (the test tree of scripts/make-test-kernel-tree)
set(FARM_TEST_LABELS unit pg tools vm e2e slow kbuild)

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

# farm_gtest(target SOURCES... LIBS... LABELS... [PREFIX p] [TIMEOUT s]
#            [DEFINES...] [DEPENDS targets...])
# A GoogleTest binary linked with gtest_main, its cases discovered into CTest.
function(farm_gtest target)
  if(NOT FARM_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "PREFIX;TIMEOUT" "SOURCES;LIBS;LABELS;DEFINES;DEPENDS" ${ARGN})
  _farm_check_labels("${ARG_LABELS}")
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_executable(${target} ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gmock GTest::gtest_main)
  if(ARG_DEFINES)
    target_compile_definitions(${target} PRIVATE ${ARG_DEFINES})
  endif()
  if(ARG_DEPENDS)
    add_dependencies(${target} ${ARG_DEPENDS})
  endif()
  farm_warnings(${target})
  gtest_discover_tests(${target} TEST_PREFIX "${ARG_PREFIX}" DISCOVERY_TIMEOUT 60
                       TEST_LIST ${target}_TESTS PROPERTIES TIMEOUT ${ARG_TIMEOUT})
  # Labels are set by a CTest include file that runs after the discovered
  # list is read: gtest_discover_tests' PROPERTIES cannot carry a list value.
  set(labels_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_labels.cmake)
  file(WRITE ${labels_file}
       "if(${target}_TESTS)\n"
       "  set_tests_properties(\${${target}_TESTS} PROPERTIES LABELS \"${ARG_LABELS}\")\n"
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
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  if(ARG_WORKING_DIRECTORY)
    add_test(NAME ${name} COMMAND ${ARG_COMMAND} WORKING_DIRECTORY ${ARG_WORKING_DIRECTORY})
  else()
    add_test(NAME ${name} COMMAND ${ARG_COMMAND})
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
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
