# ember_define_blas_target(<name> [IMPORTED])
#
# Defines the INTERFACE target <name> carrying EIGEN_USE_BLAS and a BLAS library (BLAS::BLAS,
# OpenBLAS preferred unless BLA_VENDOR is set) when find_package(BLAS) succeeds; defines nothing
# otherwise, so `if(TARGET ember::blas)` tells whether the backend is available.
function(ember_define_blas_target name)
  # FindBLAS needs a C, C++ or Fortran compiler enabled; without one there is no backend to offer.
  if(NOT (CMAKE_C_COMPILER_LOADED OR CMAKE_CXX_COMPILER_LOADED OR CMAKE_Fortran_COMPILER_LOADED))
    return()
  endif()
  if(NOT DEFINED BLA_VENDOR)
    set(BLA_VENDOR OpenBLAS)
    find_package(BLAS QUIET)
    unset(BLA_VENDOR)
  endif()
  if(NOT BLAS_FOUND)
    find_package(BLAS QUIET)
  endif()
  if(NOT BLAS_FOUND)
    return()
  endif()
  if("IMPORTED" IN_LIST ARGN)
    add_library(${name} INTERFACE IMPORTED)
  else()
    add_library(${name} INTERFACE)
  endif()
  target_compile_definitions(${name} INTERFACE EIGEN_USE_BLAS)
  target_link_libraries(${name} INTERFACE BLAS::BLAS)
endfunction()
