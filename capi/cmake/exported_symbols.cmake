# cmake -DINCLUDE_DIR=<capi/include> -DOUT_LIST=<file> -DOUT_MAP=<file> -P exported_symbols.cmake
#
# Derives what libmongoelector exports from the public headers, so that the list is kept
# in one place (the MONGOELECTOR_API declarations):
#   OUT_LIST  the names, one per line, sorted (tests/capi's exported_symbols test)
#   OUT_MAP   the linker version script: exactly those names global, everything else
#             (the static core, the C++ runtime) local; no version node, so the symbols
#             stay unversioned as the header spells them
# A file is rewritten only when its content changes (no relink otherwise).
cmake_minimum_required(VERSION 3.18)
foreach(var INCLUDE_DIR OUT_LIST OUT_MAP)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "exported_symbols: -D${var}=... is required")
  endif()
endforeach()

file(GLOB topic_headers "${INCLUDE_DIR}/mongoelector/*.h")
list(SORT topic_headers)
set(names "")
foreach(header "${INCLUDE_DIR}/mongoelector.h" ${topic_headers})
  file(READ "${header}" text)
  # Comments first: they name functions too.
  string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" "" text "${text}")
  string(REGEX REPLACE "#define MONGOELECTOR_API[^\n]*" "" text "${text}")
  # "MONGOELECTOR_API <return type> <name>(": the name is the last word before the first
  # parenthesis (declarations may span lines).
  string(REGEX MATCHALL "MONGOELECTOR_API[^;(]*[ *\n]mongoelector_[a-z0-9_]+[ \t\n]*\\("
         decls "${text}")
  string(REGEX MATCHALL "MONGOELECTOR_API" uses "${text}")
  list(LENGTH decls n_decls)
  list(LENGTH uses n_uses)
  if(NOT n_decls EQUAL n_uses)
    message(FATAL_ERROR "exported_symbols: ${header}: ${n_uses} uses of MONGOELECTOR_API "
                        "but ${n_decls} function declarations recognised; keep the form "
                        "'MONGOELECTOR_API <type> mongoelector_<name>(...)'")
  endif()
  foreach(decl IN LISTS decls)
    string(REGEX MATCH "mongoelector_[a-z0-9_]+[ \t\n]*\\($" name "${decl}")
    string(REGEX REPLACE "[ \t\n]*\\($" "" name "${name}")
    list(APPEND names "${name}")
  endforeach()
endforeach()

list(LENGTH names n)
list(REMOVE_DUPLICATES names)
list(LENGTH names n_unique)
if(NOT n EQUAL n_unique)
  message(FATAL_ERROR "exported_symbols: a function is declared twice in the headers")
endif()
if(n EQUAL 0)
  message(FATAL_ERROR "exported_symbols: no MONGOELECTOR_API declaration under ${INCLUDE_DIR}")
endif()
list(SORT names)

string(REPLACE ";" "\n" list_text "${names}")
set(list_text "# Generated from the public headers by capi/cmake/exported_symbols.cmake.\n${list_text}\n")
string(REPLACE ";" ";\n    " map_globals "${names}")
set(map_text "/* Generated from the public headers by capi/cmake/exported_symbols.cmake:
   the public C API and nothing else (the statically linked core and any C++ runtime
   code stay private). No version node name: symbols stay unversioned. */
{
  global:
    ${map_globals};
  local:
    *;
};
")

function(write_if_changed path content)
  if(EXISTS "${path}")
    file(READ "${path}" old)
    if(old STREQUAL content)
      return()
    endif()
  endif()
  file(WRITE "${path}" "${content}")
endfunction()
write_if_changed("${OUT_LIST}" "${list_text}")
write_if_changed("${OUT_MAP}" "${map_text}")
