// Catch2's implementation (the costly part of catch.hpp), compiled once per build and linked into
// every test binary: ember_tests and the other runners of tests/ (main.cpp) and the MPI tests
// (mpi/main.cpp, which wraps the session in MPI_Init/MPI_Finalize).
// SPDX-License-Identifier: MIT
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
