# ctest driver: fathom configured without libsqlite3 (FATHOM_WITH_SQLITE=OFF, as on a machine
# without it) must configure and generate, tests and fuzz targets included: every target that
# links SQLite::SQLite3 is guarded (a fuzz target that was not stopped such a build at generate).
foreach(var SOURCE_DIR WORK_DIR GENERATOR PREFIX_PATH)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "configure_without_sqlite.cmake needs -D${var}=...")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR} -G ${GENERATOR}
                        -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${PREFIX_PATH}"
                        "-DFATHOM_DEPS_DIR=${DEPS_DIR}" -DFATHOM_WITH_SQLITE=OFF -DFATHOM_WITH_TORCH=OFF
                        -DFATHOM_BUILD_TESTS=ON -DFATHOM_BUILD_EXAMPLES=OFF
                        -DFATHOM_BUILD_BENCHMARKS=OFF -DFATHOM_INSTALL=OFF
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
file(REMOVE_RECURSE ${WORK_DIR})
if(rc)
  message(FATAL_ERROR "configuring without libsqlite3 failed (${rc}):\n${err}")
endif()
message(STATUS "configured without libsqlite3")
