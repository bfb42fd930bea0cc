cmake_policy(SET CMP0057 NEW)  # if(... IN_LIST ...)
# ctest driver for the consumer project (CMakeLists.txt beside this file). MODE is package, core
# or subdirectory; package and core install fathom from BUILD_DIR into a fresh prefix first, and
# package also checks that what was installed is the public API only.
foreach(var MODE BUILD_DIR WORK_DIR SOURCE_DIR FATHOM_SOURCE_DIR PREFIX_PATH GENERATOR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run.cmake needs -D${var}=...")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix_path "${PREFIX_PATH}")
if(NOT MODE STREQUAL "subdirectory")
  execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
                  RESULT_VARIABLE rc OUTPUT_QUIET)
  if(rc)
    message(FATAL_ERROR "install failed: ${rc}")
  endif()
  # The core consumer sees the install alone: no LibTorch prefix to find.
  if(MODE STREQUAL "core")
    set(prefix_path "${WORK_DIR}/prefix")
  else()
    set(prefix_path "${WORK_DIR}/prefix;${PREFIX_PATH}")
  endif()
endif()

if(MODE STREQUAL "package")
  # Installed headers are the public folders' headers (each listed in plugin/ and hooks/
  # CMakeLists.txt) and nothing else: an internal header (one beside its .cpp under plugin/src or
  # hooks/src) must never be installed.
  file(GLOB installed RELATIVE ${WORK_DIR}/prefix/include/fathom ${WORK_DIR}/prefix/include/fathom/*)
  file(GLOB public RELATIVE ${FATHOM_SOURCE_DIR} ${FATHOM_SOURCE_DIR}/plugin/include/fathom/*.h
                                                 ${FATHOM_SOURCE_DIR}/hooks/include/fathom/*.h)
  file(GLOB_RECURSE internal ${FATHOM_SOURCE_DIR}/plugin/src/*.h ${FATHOM_SOURCE_DIR}/hooks/src/*.h)
  set(public_names version.h)
  foreach(p IN LISTS public)
    get_filename_component(n ${p} NAME)
    list(APPEND public_names ${n})
  endforeach()
  foreach(i IN LISTS internal)
    get_filename_component(n ${i} NAME)
    list(APPEND internal_names ${n})
  endforeach()
  foreach(h IN LISTS installed)
    if(h IN_LIST internal_names)
      message(FATAL_ERROR "internal header installed: include/fathom/${h} (it lives under src/; "
                          "keep it out of include/fathom or make it public on purpose)")
    endif()
    if(NOT h IN_LIST public_names)
      message(FATAL_ERROR "installed include/fathom/${h} is not one of the public headers")
    endif()
  endforeach()
  list(LENGTH installed n_installed)
  message(STATUS "installed headers: ${n_installed}")
endif()

# No build type: the consumer compiles without optimization (and with assertions), as a user's
# project does by default. What these builds prove (the package, the headers, the targets) does not
# depend on it, and -O3 made them cost 40 % more: the subdirectory build compiles fathom's whole
# core again. ccache, when fathom's build uses it, makes a rerun cheap; it cannot share objects
# with that build (other include paths, other flags).
set(launcher "")
if(LAUNCHER)
  set(launcher "-DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
                        -DCMAKE_BUILD_TYPE= ${launcher} "-DCMAKE_PREFIX_PATH=${prefix_path}"
                        -DFATHOM_CONSUMER=${MODE} -DFATHOM_SOURCE_DIR=${FATHOM_SOURCE_DIR}
                        -DTORCH_CUDA_ARCH_LIST=9.0
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "configuring the ${MODE} consumer failed: ${rc}")
endif()
set(target consumer)
if(NOT MODE STREQUAL "package")
  set(target core_consumer)
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the ${MODE} consumer failed: ${rc}")
endif()
if(MODE STREQUAL "package")
  execute_process(COMMAND ${WORK_DIR}/build/consumer ${WORK_DIR}/reports RESULT_VARIABLE rc)
  if(NOT rc)
    # The README's program runs as written too (it writes reports/ where it starts).
    execute_process(COMMAND ${WORK_DIR}/build/readme_snippet WORKING_DIRECTORY ${WORK_DIR}
                    RESULT_VARIABLE rc OUTPUT_QUIET)
    if(NOT rc)
      file(GLOB snippet_reports ${WORK_DIR}/reports/fathom-*.json)
      if(NOT snippet_reports)
        message(FATAL_ERROR "the README's program wrote no report under ${WORK_DIR}/reports")
      endif()
    endif()
  endif()
else()
  execute_process(COMMAND ${WORK_DIR}/build/core_consumer RESULT_VARIABLE rc)
endif()
if(rc)
  message(FATAL_ERROR "the ${MODE} consumer failed: ${rc}")
endif()
