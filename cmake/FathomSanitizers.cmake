# Opt-in sanitizer and fuzzer builds (scripts/test --sanitize, scripts/fuzz): every target of the
# build is instrumented, so options apply to the whole directory tree, in a build folder of its
# own. Normal builds never see these flags.
#   FATHOM_SANITIZE=address,undefined   ASan + UBSan, any error fatal
#   FATHOM_SANITIZE=thread              TSan, for the threaded parts
#   FATHOM_BUILD_FUZZERS=ON             clang's coverage for libFuzzer, and the targets in fuzz/
set(FATHOM_SANITIZE "" CACHE STRING "Sanitizers for every target: address,undefined or thread")
option(FATHOM_BUILD_FUZZERS "Build the fuzz targets in fuzz/ (clang, libFuzzer)" OFF)

if(FATHOM_SANITIZE)
  add_compile_options(-fsanitize=${FATHOM_SANITIZE} -fno-omit-frame-pointer -g)
  add_link_options(-fsanitize=${FATHOM_SANITIZE})
  if(FATHOM_SANITIZE MATCHES "undefined")
    # A report that only prints lets the test pass; make every finding fatal. -fsanitize=function
    # is left out: fathom calls NVML and CUPTI through dlsym'd pointers declared with its own
    # opaque handle types, and the test doubles built here (fake NVML) declare theirs; the real
    # C libraries carry no such type information, so the check only flags the doubles.
    add_compile_options(-fno-sanitize-recover=all)
    if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
      add_compile_options(-fno-sanitize=function)
    endif()
  endif()
endif()
if(FATHOM_BUILD_FUZZERS)
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
