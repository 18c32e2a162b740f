# Runs one libFuzzer binary for a bounded time (ctest test fuzz.<NAME>).
#   cmake -DFUZZER=<exe> -DNAME=<name> -DSECONDS=<s> -DSEEDS=<dir> -DREGRESSIONS=<dir>
#         [-DDICT=<file>] -DWORK=<dir> -P run_fuzzer.cmake
# DICT, when the file exists, is a libFuzzer dictionary (tests/fuzz/dict/<name>.dict): tokens the
# mutator splices in, such as field names and malformed numbers.
# The scratch corpus WORK/<NAME>/corpus grows across runs (it is not committed); a crash, leak,
# timeout (10 s per input), RSS above 2 GB or a single allocation above 512 MB fails the test and
# leaves its reproducer in WORK/<NAME>/artifacts/ (copy it to tests/fuzz/regressions/<NAME>/).
# The number of executions is printed and appended to WORK/summary.txt.
# The mutation seed is fixed (env EMBER_FUZZ_SEED, default 1) so a CI run explores the same
# inputs each time and a red run is reproducible; EMBER_FUZZ_SEED=0 picks a random seed for
# exploratory runs (libFuzzer's own default).
if(DEFINED ENV{EMBER_FUZZ_SEED})
  set(_seed "$ENV{EMBER_FUZZ_SEED}")
else()
  set(_seed 1)
endif()
set(_dir "${WORK}/${NAME}")
file(MAKE_DIRECTORY "${_dir}/corpus" "${_dir}/artifacts")
set(_inputs "${_dir}/corpus" "${SEEDS}")
if(EXISTS "${REGRESSIONS}")
  list(APPEND _inputs "${REGRESSIONS}")
endif()
set(_dict_flag "")
if(DEFINED DICT AND EXISTS "${DICT}")
  set(_dict_flag "-dict=${DICT}")
endif()
execute_process(
  COMMAND "${FUZZER}" -seed=${_seed} -max_total_time=${SECONDS} -print_final_stats=1 -timeout=10
          -rss_limit_mb=2048 -malloc_limit_mb=512 -max_len=4096 ${_dict_flag}
          "-artifact_prefix=${_dir}/artifacts/" ${_inputs}
  RESULT_VARIABLE _rc
  OUTPUT_VARIABLE _out
  ERROR_VARIABLE _out)
file(WRITE "${_dir}/log.txt" "${_out}")
set(_execs "?")
if(_out MATCHES "stat::number_of_executed_units: *([0-9]+)")
  set(_execs "${CMAKE_MATCH_1}")
endif()
set(_cov "?")
string(REGEX MATCHALL "cov: [0-9]+" _covs "${_out}")
list(LENGTH _covs _n)
if(_n GREATER 0)
  list(GET _covs -1 _last)
  string(REGEX REPLACE "cov: " "" _cov "${_last}")
endif()
file(GLOB _corpus_files "${_dir}/corpus/*")
list(LENGTH _corpus_files _corpus_size)
set(_line "fuzz_${NAME}: ${_execs} executions in ${SECONDS} s, coverage ${_cov} edges, corpus ${_corpus_size} inputs")
file(APPEND "${WORK}/summary.txt" "${_line}\n")
message("${_line}")
if(NOT _rc EQUAL 0)
  string(LENGTH "${_out}" _len)
  set(_from 0)
  if(_len GREATER 6000)
    math(EXPR _from "${_len} - 6000")
  endif()
  string(SUBSTRING "${_out}" ${_from} -1 _tail)
  message(FATAL_ERROR "fuzz_${NAME} failed (exit ${_rc}); reproducer in ${_dir}/artifacts/\n${_tail}")
endif()
