# SPDX-License-Identifier: Apache-2.0
# Helpers that give every library and test the same flags: fsdp_add_library makes
# fsdp_<name> plus the alias fsdp::<name>; fsdp_add_test builds one gtest binary per module.

include_guard(GLOBAL)

# fsdp_add_library(NAME SRCS ... [DEPS ...] [PUBLIC_DEPS ...])
function(fsdp_add_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS;PUBLIC_DEPS" ${ARGN})
  add_library(fsdp_${name} ${ARG_SRCS})
  add_library(fsdp::${name} ALIAS fsdp_${name})
  target_include_directories(fsdp_${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_features(fsdp_${name} PUBLIC cxx_std_20)
  target_link_libraries(fsdp_${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_DEPS} fsdp::warnings)
  target_link_libraries(fsdp_${name} PUBLIC fsdp::sanitizers)
endfunction()

# fsdp_add_test(NAME SRCS ... DEPS ... [LABELS ...]) -- gtest binary registered per case.
function(fsdp_add_test name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main
                                        fsdp::test_warnings fsdp::sanitizers)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  if(ARG_LABELS)
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${ARG_LABELS}")
  else()
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60)
  endif()
endfunction()
