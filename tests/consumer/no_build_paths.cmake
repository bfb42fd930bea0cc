# ctest driver: the installed libraries carry no path of the machine they were built on (no
# source or build folder, no toolkit or wheel folder found at configure time). Paths inside the
# torch headers' own assertions are LibTorch's and are left out of the check.
foreach(var LIBRARIES SOURCE_DIR BINARY_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "no_build_paths.cmake needs -D${var}=...")
  endif()
endforeach()
foreach(lib IN LISTS LIBRARIES)
  file(STRINGS ${lib} hits REGEX "(${SOURCE_DIR}|${BINARY_DIR})")
  list(FILTER hits EXCLUDE REGEX "/torch/include/")
  if(hits)
    list(GET hits 0 first)
    message(FATAL_ERROR "${lib} holds a build-machine path: ${first}")
  endif()
  message(STATUS "${lib}: no build-machine path")
endforeach()
