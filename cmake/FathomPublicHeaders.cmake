# fathom_public_headers(<var> <dir> <header>...): the installed API of one layer, header by
# header. A header in <dir> is API only once it is listed, and a listed header must exist:
# configure fails on either mismatch, naming the file, so nothing becomes API by being dropped
# into include/fathom, and nothing is lost from it unseen. <var> gets the headers' full paths.
function(fathom_public_headers var dir)
  set(listed ${ARGN})
  file(GLOB present RELATIVE ${dir} ${dir}/*.h)
  foreach(h IN LISTS present)
    if(NOT h IN_LIST listed)
      message(FATAL_ERROR "${dir}/${h} is not a listed public header: add it to the list beside "
                          "fathom_public_headers (it becomes installed API) or move it under src/")
    endif()
  endforeach()
  set(paths "")
  foreach(h IN LISTS listed)
    if(NOT EXISTS ${dir}/${h})
      message(FATAL_ERROR "listed public header ${dir}/${h} does not exist")
    endif()
    list(APPEND paths ${dir}/${h})
  endforeach()
  set(${var} ${paths} PARENT_SCOPE)
endfunction()
