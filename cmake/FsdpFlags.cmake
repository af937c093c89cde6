# SPDX-License-Identifier: Apache-2.0
# Interface targets that carry compiler flags (pbrt's approach): nothing touches CMAKE_CXX_FLAGS.

include_guard(GLOBAL)
include(CheckCXXSourceCompiles)

set(FSDP_WARNING_FLAGS
    -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion -Wnon-virtual-dtor
    -Woverloaded-virtual -Wold-style-cast -Wcast-qual -Wmissing-declarations -Wnull-dereference
    -Wimplicit-fallthrough -Wundef -Wvla)

add_library(fsdp_warnings INTERFACE)
add_library(fsdp::warnings ALIAS fsdp_warnings)
target_compile_options(fsdp_warnings INTERFACE
  "$<$<COMPILE_LANGUAGE:CXX>:${FSDP_WARNING_FLAGS}>"
  "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${FSDP_WERROR}>>:-Werror>"
  "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CONFIG:Debug>>:-D_GLIBCXX_ASSERTIONS>")

# Tests use the same list minus the conversions gtest macros trip over.
add_library(fsdp_test_warnings INTERFACE)
add_library(fsdp::test_warnings ALIAS fsdp_test_warnings)
target_compile_options(fsdp_test_warnings INTERFACE
  "$<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra;-Wshadow>"
  "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${FSDP_WERROR}>>:-Werror>"
  "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CONFIG:Debug>>:-D_GLIBCXX_ASSERTIONS>")

add_library(fsdp_sanitizers INTERFACE)
add_library(fsdp::sanitizers ALIAS fsdp_sanitizers)
if(FSDP_SANITIZE)
  string(REPLACE ";" "," _fsdp_san "${FSDP_SANITIZE}")
  set(CMAKE_REQUIRED_FLAGS "-fsanitize=${_fsdp_san}")
  set(CMAKE_REQUIRED_LINK_OPTIONS "-fsanitize=${_fsdp_san}")
  check_cxx_source_compiles("int main() { return 0; }" FSDP_SANITIZERS_WORK)
  unset(CMAKE_REQUIRED_FLAGS)
  unset(CMAKE_REQUIRED_LINK_OPTIONS)
  if(NOT FSDP_SANITIZERS_WORK)
    message(FATAL_ERROR "FSDP_SANITIZE=${FSDP_SANITIZE}: the compiler cannot build with -fsanitize=${_fsdp_san}")
  endif()
  set(_fsdp_san_opts -fsanitize=${_fsdp_san} -fno-omit-frame-pointer)
  if("undefined" IN_LIST FSDP_SANITIZE)
    list(APPEND _fsdp_san_opts -fno-sanitize-recover=undefined)
  endif()
  target_compile_options(fsdp_sanitizers INTERFACE "$<$<COMPILE_LANGUAGE:CXX>:${_fsdp_san_opts}>")
  target_link_options(fsdp_sanitizers INTERFACE -fsanitize=${_fsdp_san})
  message(STATUS "fsdp: sanitizers ${FSDP_SANITIZE}")
endif()

add_library(fsdp_native INTERFACE)
add_library(fsdp::native ALIAS fsdp_native)
if(FSDP_NATIVE)
  target_compile_options(fsdp_native INTERFACE "$<$<COMPILE_LANGUAGE:CXX>:-march=native>")
endif()
