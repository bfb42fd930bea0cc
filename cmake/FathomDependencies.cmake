# Finds what fathom builds against. Every dependency is found here, once.
#
# fmt and nlohmann-json come from Debian here. On the GPU machine, which has no apt, the same
# headers travel in a folder named by FATHOM_DEPS_DIR (see tests/gpu/run); fmt is then used
# header-only.
set(FATHOM_DEPS_DIR "" CACHE PATH "Folder with carried dependency sources (fmt, nlohmann, googletest)")
if(FATHOM_DEPS_DIR)
  list(PREPEND CMAKE_PREFIX_PATH ${FATHOM_DEPS_DIR})
endif()

find_package(Threads REQUIRED)

find_package(fmt 9 QUIET CONFIG)
if(NOT fmt_FOUND)
  find_path(FATHOM_FMT_INCLUDE fmt/format.h HINTS ${FATHOM_DEPS_DIR}/fmt/include REQUIRED NO_DEFAULT_PATH)
  add_library(fathom_fmt_header_only INTERFACE)
  # BUILD_INTERFACE: the carried folder may sit in the source tree (.deps), which an exported
  # target must not name; the static core's users need no fmt headers.
  target_include_directories(fathom_fmt_header_only SYSTEM INTERFACE $<BUILD_INTERFACE:${FATHOM_FMT_INCLUDE}>)
  target_compile_definitions(fathom_fmt_header_only INTERFACE FMT_HEADER_ONLY=1)
  add_library(fmt::fmt ALIAS fathom_fmt_header_only)
  install(TARGETS fathom_fmt_header_only EXPORT fathomCoreTargets)
endif()

find_package(nlohmann_json 3.10 QUIET CONFIG)
if(NOT nlohmann_json_FOUND)
  find_path(FATHOM_JSON_INCLUDE nlohmann/json.hpp HINTS ${FATHOM_DEPS_DIR}/nlohmann/include REQUIRED)
  add_library(fathom_json_header_only INTERFACE)
  target_include_directories(fathom_json_header_only SYSTEM INTERFACE $<BUILD_INTERFACE:${FATHOM_JSON_INCLUDE}>)
  add_library(nlohmann_json::nlohmann_json ALIAS fathom_json_header_only)
  install(TARGETS fathom_json_header_only EXPORT fathomCoreTargets)
endif()

# zlib reads and writes gzip traces and replay files (.json.gz, .jsonl.gz); without it fathom
# reads and writes plain files only, and says so when given a .gz (gz_file.cpp). The GPU machine
# may lack zlib's headers; FATHOM_WITH_ZLIB=OFF builds that way here (tests/gpu/run --check).
option(FATHOM_WITH_ZLIB "Read and write gzip files with zlib, when it is found" ON)
if(FATHOM_WITH_ZLIB)
  find_package(ZLIB QUIET)
endif()
if(NOT ZLIB_FOUND)
  set(ZLIB_FOUND FALSE)
  message(STATUS "fathom: without zlib (not found, or FATHOM_WITH_ZLIB=OFF): .gz traces and "
                 "activity files are refused with an error that says so; plain files work")
endif()

# libsqlite3 reads Nsight Systems exports (`fathom analyze RUN.sqlite`); without it such files are
# refused with an error that says how to get it. The GPU machine may lack its headers.
option(FATHOM_WITH_SQLITE "Read Nsight Systems SQLite exports with libsqlite3, when it is found" ON)
if(FATHOM_WITH_SQLITE)
  find_package(SQLite3 QUIET)
endif()
if(NOT SQLite3_FOUND)
  set(SQLite3_FOUND FALSE)
  message(STATUS "fathom: without libsqlite3 (not found, or FATHOM_WITH_SQLITE=OFF): Nsight "
                 "Systems exports are refused with an error that says so")
endif()

# NVTX3 is header-only and ships with the CUDA toolkit; CUPTI comes with the toolkit as well.
find_package(CUDAToolkit QUIET)
find_path(FATHOM_NVTX3_INCLUDE nvtx3/nvToolsExt.h
  HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include ${FATHOM_DEPS_DIR}/nvtx/include)
if(NOT FATHOM_NVTX3_INCLUDE)
  message(FATAL_ERROR "fathom needs the NVTX3 headers (nvtx3/nvToolsExt.h): install the CUDA toolkit "
                      "or set FATHOM_DEPS_DIR to a folder with nvtx/include")
endif()

if(FATHOM_WITH_TORCH)
  # Torch's CMake files look for the CUDA toolkit; point them at the one we found.
  find_package(Torch REQUIRED)
  message(STATUS "fathom: LibTorch ${Torch_VERSION} from ${Torch_DIR}")
endif()

# CUPTI: only its headers are needed to build (the activity record layouts); libcupti itself is
# loaded at run time, so fathom runs where it is absent. The headers come with the toolkit, and
# with the torch wheel's nvidia/cu<major> package where there is no toolkit.
set(_fathom_cupti_hints ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include /usr/local/cuda/extras/CUPTI/include
                        ${FATHOM_DEPS_DIR}/cupti/include)
set(_fathom_site_packages "")
if(Torch_DIR)
  get_filename_component(_sp "${Torch_DIR}/../../../.." ABSOLUTE)  # <site-packages>/torch/share/cmake/Torch
  list(APPEND _fathom_site_packages ${_sp})
endif()
file(GLOB _fathom_venv_site_packages ${PROJECT_SOURCE_DIR}/.venv/lib/python3*/site-packages)
list(APPEND _fathom_site_packages ${_fathom_venv_site_packages})
list(REMOVE_DUPLICATES _fathom_site_packages)
foreach(_sp IN LISTS _fathom_site_packages)
  file(GLOB _fathom_wheel_cuda LIST_DIRECTORIES true ${_sp}/nvidia/cu[0-9]* ${_sp}/nvidia/cuda_cupti)
  foreach(_w IN LISTS _fathom_wheel_cuda)
    list(APPEND _fathom_cupti_hints ${_w}/include)
  endforeach()
endforeach()
find_path(FATHOM_CUPTI_INCLUDE cupti_activity.h HINTS ${_fathom_cupti_hints})
if(NOT FATHOM_CUPTI_INCLUDE)
  message(FATAL_ERROR "fathom needs the CUPTI headers (cupti_activity.h): install the CUDA toolkit, the torch "
                      "wheel (nvidia/cu13/include), or set FATHOM_DEPS_DIR to a folder with cupti/include")
endif()

# CLI11 for the `fathom` command; the command is skipped where CLI11 is absent (the GPU machine).
find_package(CLI11 QUIET CONFIG)
if(NOT CLI11_FOUND AND FATHOM_DEPS_DIR AND EXISTS ${FATHOM_DEPS_DIR}/cli11/include/CLI/CLI.hpp)
  add_library(fathom_cli11 INTERFACE)
  target_include_directories(fathom_cli11 SYSTEM INTERFACE ${FATHOM_DEPS_DIR}/cli11/include)
  add_library(CLI11::CLI11 ALIAS fathom_cli11)
  set(CLI11_FOUND TRUE)
endif()
