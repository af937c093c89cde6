# SPDX-License-Identifier: Apache-2.0
# Fallback finder for NCCL when no CMake config package is installed: looks beside the CUDA
# toolkit and in the usual system paths, and creates the IMPORTED target NCCL::nccl.

set(_nccl_hints)
if(CUDAToolkit_LIBRARY_ROOT)
  list(APPEND _nccl_hints ${CUDAToolkit_LIBRARY_ROOT})
endif()
if(CUDAToolkit_TARGET_DIR)
  list(APPEND _nccl_hints ${CUDAToolkit_TARGET_DIR})
endif()
list(APPEND _nccl_hints $ENV{NCCL_HOME} $ENV{CUDA_HOME} /usr/local/cuda)

find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} PATH_SUFFIXES include targets/x86_64-linux/include)
find_library(NCCL_LIBRARY nccl HINTS ${_nccl_hints} PATH_SUFFIXES lib lib64 targets/x86_64-linux/lib)

if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_ver REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
  string(REGEX REPLACE ".*NCCL_MAJOR ([0-9]+).*" "\\1" _maj "${_nccl_ver}")
  string(REGEX REPLACE ".*NCCL_MINOR ([0-9]+).*" "\\1" _min "${_nccl_ver}")
  string(REGEX REPLACE ".*NCCL_PATCH ([0-9]+).*" "\\1" _pat "${_nccl_ver}")
  set(NCCL_VERSION "${_maj}.${_min}.${_pat}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR VERSION_VAR NCCL_VERSION)

if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl UNKNOWN IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                                              INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
