# mongoelector_glibc_compat(TARGET): when the target glibc lacks a function the sources
# use (an old glibc, as the wheel's 2.17), compiles cmake/glibc_compat.c's replacement
# into TARGET. With the system's glibc nothing is added.
include(CheckSymbolExists)
function(mongoelector_glibc_compat target)
  set(CMAKE_REQUIRED_DEFINITIONS -D_GNU_SOURCE)
  check_symbol_exists(getrandom "sys/random.h" MONGOELECTOR_HAVE_GETRANDOM)
  check_symbol_exists(sigabbrev_np "string.h" MONGOELECTOR_HAVE_SIGABBREV_NP)
  set(_defs "")
  if(NOT MONGOELECTOR_HAVE_GETRANDOM)
    list(APPEND _defs MONGOELECTOR_COMPAT_GETRANDOM)
  endif()
  if(NOT MONGOELECTOR_HAVE_SIGABBREV_NP)
    list(APPEND _defs MONGOELECTOR_COMPAT_SIGABBREV_NP)
  endif()
  if(_defs)
    message(STATUS "mongoelector: glibc replacements compiled in: ${_defs}")
    target_sources(${target} PRIVATE "${PROJECT_SOURCE_DIR}/cmake/glibc_compat.c")
    set_source_files_properties("${PROJECT_SOURCE_DIR}/cmake/glibc_compat.c" TARGET_DIRECTORY ${target}
      PROPERTIES COMPILE_DEFINITIONS "${_defs}")
  endif()
endfunction()
