# Run a command and compare its stdout byte for byte with a reference file.
#
#   cmake -DEXPECTED=<file> [-DACTUAL=<file>] -P run_and_compare.cmake -- <program> [args...]
#
# Fails if the program exits non-zero or if stdout differs from EXPECTED.
# stderr is passed through untouched. The captured stdout is kept in ACTUAL
# (default: <EXPECTED name>.actual in the current directory) for inspection;
# to re-bless, copy it over the .expected file.
cmake_minimum_required(VERSION 3.21)

if(NOT DEFINED EXPECTED)
  message(FATAL_ERROR "run_and_compare.cmake: -DEXPECTED=<file> is required")
endif()
if(NOT EXISTS "${EXPECTED}")
  message(FATAL_ERROR "run_and_compare.cmake: expected-output file '${EXPECTED}' does not exist")
endif()

# Everything after `--` is the command line.
set(cmd "")
set(in_cmd FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE 1 ${last})
  if(in_cmd)
    list(APPEND cmd "${CMAKE_ARGV${i}}")
  elseif(CMAKE_ARGV${i} STREQUAL "--")
    set(in_cmd TRUE)
  endif()
endforeach()
if(NOT cmd)
  message(FATAL_ERROR "run_and_compare.cmake: no command given (expected `-- <program> [args...]`)")
endif()

if(NOT DEFINED ACTUAL)
  get_filename_component(_stem "${EXPECTED}" NAME_WE)
  set(ACTUAL "${CMAKE_CURRENT_BINARY_DIR}/${_stem}.actual")
endif()

execute_process(COMMAND ${cmd}
  OUTPUT_FILE "${ACTUAL}"
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(READ "${ACTUAL}" out)
  message("---- stdout ----\n${out}---- end stdout ----")
  message(FATAL_ERROR "command failed (result: ${rc}): ${cmd}")
endif()

# Byte-exact comparison (HEX avoids any newline / encoding normalisation).
file(READ "${EXPECTED}" expected_hex HEX)
file(READ "${ACTUAL}" actual_hex HEX)
if(expected_hex STREQUAL actual_hex)
  return()
endif()

file(READ "${EXPECTED}" expected_text)
file(READ "${ACTUAL}" actual_text)
find_program(_diff diff)
if(_diff)
  execute_process(COMMAND "${_diff}" -u --label expected --label actual "${EXPECTED}" "${ACTUAL}"
    OUTPUT_VARIABLE diff_text)
  message("---- diff -u expected actual ----\n${diff_text}---- end diff ----")
endif()
message("---- expected (${EXPECTED}) ----\n${expected_text}---- end expected ----")
message("---- actual (${ACTUAL}) ----\n${actual_text}---- end actual ----")
message(FATAL_ERROR "stdout of `${cmd}` differs from ${EXPECTED}")
