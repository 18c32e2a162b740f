# Compiles the C++ snippets of Markdown pages as one translation unit: `cmake -P doc_snippets.cmake`
# with
#   -DPAGES=<a.md;b.md>  the pages (or -DPAGES_FILE=<file> naming one page a line)
#   -DOUT=<pages.cpp>    the translation unit to write
#   -DCOMPILER=<c++>     and -DFLAGS_FILE=<response file> (one flag a line), to compile OUT with
#                        `<c++> @FLAGS_FILE OUT`; without COMPILER the script only writes OUT.
#   -DHAVE_IO=0|1 -DHAVE_MPI=0|1  whether ember::io (safetensors) and ember::mpi exist
#
# The convention (docs/README.md, "Code snippets are compiled"):
#   ```cpp                  statements: the body of a function of their own
#   ```cpp continued        more statements of the previous cpp block's function (its names)
#   ```cpp global           namespace-scope code: declarations, namespaces (a block with its own
#                           `int main(` is one without saying so)
#   ```cpp skip: <reason>   not compiled; the reason is required
#   <!-- cpp               hidden code (an HTML comment, not rendered) put before the next cpp
#   ...                     block, in its function: the names the prose assumes
#   -->
# The TU starts with <ember/ember.hpp> and a few standard headers; #include lines of any block are
# moved to the top; each page's functions live in a namespace of their own; `#line` maps every
# line to its page, so errors name the page and its line. Blocks that include io/safetensors.hpp
# or the MPI headers compile only when that component exists. One TU for every page parses
# Eigen and ember once and instantiates each template once: several times cheaper than one per
# page.
cmake_minimum_required(VERSION 3.21)

if(DEFINED PAGES_FILE)
  file(STRINGS "${PAGES_FILE}" PAGES)
endif()
foreach(_var PAGES OUT)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "doc_snippets.cmake: -D${_var}=... is required")
  endif()
endforeach()

# CMake lists split at ';' (and not inside [...]): both become placeholders while lines are lists.
set(_semi "@EMBER_DOC_SEMICOLON@")
set(_lbr "@EMBER_DOC_LBRACKET@")
set(_rbr "@EMBER_DOC_RBRACKET@")

set(_includes "")         # hoisted #include lines (deduplicated), each with its guard
set(_globals "")          # namespace-scope blocks of every page
set(_functions "")        # the function blocks of every page, one namespace per page
set(_total 0)
set(_total_skipped 0)
set(_page_number 0)

function(_doc_error line msg)
  message(FATAL_ERROR "${PAGE}:${line}: ${msg}")
endfunction()

# The component a block needs, from its includes.
function(_doc_guard body out)
  set(_g "")
  if(body MATCHES "#[ ]*include[ ]*[<\"]ember/io/safetensors\\.hpp")
    set(_g "EMBER_DOC_HAVE_IO")
  endif()
  if(body MATCHES "#[ ]*include[ ]*[<\"]ember/distributed/(sharded_embedding|checkpoint)")
    set(_g "EMBER_DOC_HAVE_MPI")
  endif()
  set(${out} "${_g}" PARENT_SCOPE)
endfunction()

# Moves #include lines to the top (blank lines stay, so #line numbers hold), drops #pragma once.
function(_doc_hoist body guard out)
  string(REPLACE "\n" ";" _ls "${body}")
  set(_res "")
  set(_inc "${_includes}")
  foreach(_l IN LISTS _ls)
    if(_l MATCHES "^[ ]*#[ ]*include")
      string(REGEX REPLACE "^[ ]*#[ ]*include[ ]*([<\"][^>\"]*[>\"]).*$" "#include \\1" _s "${_l}")
      set(_entry "${guard}|${_s}")
      list(FIND _inc "${_entry}" _at)
      if(_at EQUAL -1)
        list(APPEND _inc "${_entry}")
      endif()
      string(APPEND _res "\n")
    elseif(_l MATCHES "^[ ]*#[ ]*pragma[ ]+once")
      string(APPEND _res "\n")
    else()
      string(APPEND _res "${_l}\n")
    endif()
  endforeach()
  set(_includes "${_inc}" PARENT_SCOPE)
  set(${out} "${_res}" PARENT_SCOPE)
endfunction()

foreach(PAGE IN LISTS PAGES)
  math(EXPR _page_number "${_page_number} + 1")
  file(READ "${PAGE}" _text)
  string(REPLACE ";" "${_semi}" _text "${_text}")
  string(REPLACE "[" "${_lbr}" _text "${_text}")
  string(REPLACE "]" "${_rbr}" _text "${_text}")
  string(REPLACE "\r" "" _text "${_text}")
  string(REPLACE "\n" ";" _lines "${_text}")

  set(_state outside)       # outside | code | other | hidden
  set(_fence "")            # the opening fence of the block being read (``` or ~~~, its length)
  set(_blocks 0)            # number of compiled blocks; block i has _kind_i, _start_i, _body_i
  set(_hidden "")           # pending hidden code for the next cpp block
  set(_hidden_start 0)
  set(_skipped 0)
  set(_n 0)

  foreach(_line IN LISTS _lines)
    math(EXPR _n "${_n} + 1")
    if(_state STREQUAL "outside")
      if(_line MATCHES "^[ ]*<!--[ ]*cpp[ ]*$")
        set(_state hidden)
        set(_hidden_start ${_n})
        set(_hidden_lines "")
      elseif(_line MATCHES "^[ ]*(```+|~~~+)[ ]*([^ `]*)[ ]*(.*)$")
        set(_fence "${CMAKE_MATCH_1}")
        string(TOLOWER "${CMAKE_MATCH_2}" _lang)
        set(_info "${CMAKE_MATCH_3}")
        if(_lang MATCHES "^(cpp|c\\+\\+|cxx)$")
          if(_info MATCHES "^skip")
            if(NOT _info MATCHES "^skip:[ ]*[^ ]")
              _doc_error(${_n} "a skipped snippet says why: ```cpp skip: <reason>")
            endif()
            math(EXPR _skipped "${_skipped} + 1")
            set(_state other)
          else()
            set(_kind fresh)
            if(_info STREQUAL "continued")
              set(_kind continued)
            elseif(_info STREQUAL "global")
              set(_kind global)
            elseif(NOT _info STREQUAL "")
              _doc_error(${_n}
                "unknown snippet attribute '${_info}' (continued, global, skip: <reason>)")
            endif()
            math(EXPR _blocks "${_blocks} + 1")
            set(_kind_${_blocks} ${_kind})
            set(_start_${_blocks} ${_n})
            set(_body_${_blocks} "")
            set(_hidden_${_blocks} "${_hidden}")
            set(_hidden_start_${_blocks} ${_hidden_start})
            set(_hidden "")
            if(_kind STREQUAL "global" AND NOT _hidden_${_blocks} STREQUAL "")
              _doc_error(${_hidden_start}
                "hidden code belongs to a function body, not a global block")
            endif()
            set(_state code)
          endif()
        else()
          set(_state other)
        endif()
      endif()
    elseif(_state STREQUAL "hidden")
      if(_line MATCHES "^[ ]*-->[ ]*$")
        set(_hidden "${_hidden_lines}")
        set(_state outside)
      else()
        string(APPEND _hidden_lines "${_line}\n")
      endif()
    else()  # code or other: the block ends at a fence of the same character, at least as long
      string(SUBSTRING "${_fence}" 0 1 _fence_char)
      string(LENGTH "${_fence}" _fence_len)
      set(_closes FALSE)
      if(_line MATCHES "^[ ]*([`~]+)[ ]*$")
        string(SUBSTRING "${CMAKE_MATCH_1}" 0 1 _c)
        string(LENGTH "${CMAKE_MATCH_1}" _len)
        if(_c STREQUAL _fence_char AND NOT _len LESS _fence_len)
          set(_closes TRUE)
        endif()
      endif()
      if(_closes)
        set(_state outside)
      elseif(_state STREQUAL "code")
        string(APPEND _body_${_blocks} "${_line}\n")
      endif()
    endif()
  endforeach()
  if(NOT _state STREQUAL "outside")
    _doc_error(${_n} "the page ends inside a code block or a hidden <!-- cpp comment")
  endif()
  if(NOT _hidden STREQUAL "")
    _doc_error(${_hidden_start} "hidden code with no cpp block after it")
  endif()

  # Groups blocks into chains: a fresh block starts one, a continued block joins the last one.
  set(_chains 0)
  foreach(_i RANGE 1 ${_blocks})
    if(_blocks EQUAL 0)
      break()
    endif()
    # A block with its own main() is a program: namespace scope, as rustdoc treats fn main.
    if(_kind_${_i} STREQUAL "fresh" AND _body_${_i} MATCHES "(^|\n)[ ]*int[ ]+main[ ]*\\(")
      set(_kind_${_i} global)
    endif()
    if(_kind_${_i} STREQUAL "global")
      _doc_guard("${_body_${_i}}" _g)
      _doc_hoist("${_body_${_i}}" "${_g}" _b)
      # A program's main() is one function among the page's others (auto: main may end without a
      # return statement, another function may not).
      string(REGEX REPLACE "int[ ]+main[ ]*\\(" "auto ember_doc_main_${_page_number}_${_i}("
        _b "${_b}")
      math(EXPR _first "${_start_${_i}} + 1")
      set(_code "#line ${_first} \"${PAGE}\"\n${_b}")
      if(NOT _g STREQUAL "")
        set(_code "#if ${_g}\n${_code}#endif\n")
      endif()
      string(APPEND _globals "${_code}")
      continue()
    endif()
    if(_kind_${_i} STREQUAL "continued")
      if(_chains EQUAL 0)
        _doc_error(${_start_${_i}} "```cpp continued, but no cpp block before it to continue")
      endif()
    else()
      math(EXPR _chains "${_chains} + 1")
      set(_chain_parts_${_chains} "")
      set(_chain_raw_${_chains} "")
      set(_chain_start_${_chains} ${_start_${_i}})
    endif()
    set(_c ${_chains})
    if(NOT _hidden_${_i} STREQUAL "")
      math(EXPR _first "${_hidden_start_${_i}} + 1")
      string(APPEND _chain_raw_${_c} "${_hidden_${_i}}")
      list(APPEND _chain_parts_${_c} "${_first}")
      set(_part_${_c}_${_first} "${_hidden_${_i}}")
    endif()
    math(EXPR _first "${_start_${_i}} + 1")
    string(APPEND _chain_raw_${_c} "${_body_${_i}}")
    list(APPEND _chain_parts_${_c} "${_first}")
    set(_part_${_c}_${_first} "${_body_${_i}}")
  endforeach()

  set(_page_functions "")
  foreach(_c RANGE 1 ${_chains})
    if(_chains EQUAL 0)
      break()
    endif()
    _doc_guard("${_chain_raw_${_c}}" _g)
    set(_f "")
    foreach(_first IN LISTS _chain_parts_${_c})
      _doc_hoist("${_part_${_c}_${_first}}" "${_g}" _b)
      string(APPEND _f "#line ${_first} \"${PAGE}\"\n${_b}")
    endforeach()
    set(_f "[[maybe_unused]] void snippet_${_chain_start_${_c}}() {\n${_f}}\n")
    if(NOT _g STREQUAL "")
      set(_f "#if ${_g}\n${_f}#endif\n")
    endif()
    string(APPEND _page_functions "${_f}")
  endforeach()
  if(NOT _page_functions STREQUAL "")
    string(APPEND _functions "namespace page_${_page_number} {  // ${PAGE}\nnamespace {\n"
      "${_page_functions}}  // namespace\n}  // namespace page_${_page_number}\n\n")
  endif()
  math(EXPR _total "${_total} + ${_blocks}")
  math(EXPR _total_skipped "${_total_skipped} + ${_skipped}")
endforeach()  # PAGE

list(LENGTH PAGES _page_count)
set(_head "// The C++ snippets of ${_page_count} Markdown page(s), by cmake/doc_snippets.cmake: ")
string(APPEND _head "edit the pages, not this file.\n")
string(APPEND _head "#include <cmath>\n#include <cstdint>\n#include <cstdio>\n#include <memory>\n")
string(APPEND _head "#include <span>\n#include <string>\n#include <utility>\n#include <vector>\n\n")
string(APPEND _head "#include <ember/ember.hpp>\n")
foreach(_entry IN LISTS _includes)
  string(FIND "${_entry}" "|" _bar)
  string(SUBSTRING "${_entry}" 0 ${_bar} _g)
  math(EXPR _bar "${_bar} + 1")
  string(SUBSTRING "${_entry}" ${_bar} -1 _inc)
  if(_g STREQUAL "")
    string(APPEND _head "${_inc}\n")
  else()
    string(APPEND _head "#if ${_g}\n${_inc}\n#endif\n")
  endif()
endforeach()

set(_tu "${_head}\n${_globals}\nnamespace ember_doc {\n\n${_functions}}  // namespace ember_doc\n")
string(REPLACE "${_semi}" ";" _tu "${_tu}")
string(REPLACE "${_lbr}" "[" _tu "${_tu}")
string(REPLACE "${_rbr}" "]" _tu "${_tu}")
file(WRITE "${OUT}" "${_tu}")
message(STATUS
  "${_total} snippet(s) of ${_page_count} page(s) in ${OUT}, ${_total_skipped} skipped")

if(DEFINED COMPILER AND NOT COMPILER STREQUAL "")
  execute_process(
    COMMAND "${COMPILER}" "@${FLAGS_FILE}" "-DEMBER_DOC_HAVE_IO=${HAVE_IO}"
            "-DEMBER_DOC_HAVE_MPI=${HAVE_MPI}" "${OUT}"
    RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "a snippet does not compile: the lines above name its page and line")
  endif()
endif()
