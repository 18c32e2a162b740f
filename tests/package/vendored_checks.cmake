# What a project that vendors ember (add_subdirectory, FetchContent) must find once ember is added:
# ember::ember, and nothing of ember's own (tests, dev flags, a search for MPI, BLAS or Catch2),
# and no compile options leaking from ember::ember. `how` names the way it was added.
function(ember_check_vendored how)
  if(NOT TARGET ember::ember)
    message(FATAL_ERROR "${how} did not define ember::ember")
  endif()
  if(TARGET ember_tests OR TARGET ember_dev_flags OR TARGET ember_unit_programs)
    message(FATAL_ERROR "ember builds its own tests/dev targets when added by ${how}")
  endif()
  if(DEFINED MPI_CXX_FOUND OR DEFINED BLAS_FOUND OR DEFINED Catch2_FOUND)
    message(FATAL_ERROR "ember looked for MPI, BLAS or Catch2 when added by ${how}")
  endif()
  get_target_property(_opts ember::ember INTERFACE_COMPILE_OPTIONS)
  if(_opts)
    message(FATAL_ERROR "ember::ember leaks compile options to consumers: ${_opts}")
  endif()
endfunction()
