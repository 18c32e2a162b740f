// The Catch2 session, run from any main(): tests/main.cpp (the plain runner) and tests/mpi/main.cpp
// (between MPI_Init and MPI_Finalize). Defined in tests/catch_impl.cpp with Catch2's
// implementation, which is compiled once per build for every test binary.
// SPDX-License-Identifier: MIT
#pragma once

namespace ember_test {

/// Runs the test cases selected by the command line; returns Catch2's exit code.
int run_catch_session(int argc, char** argv);

}  // namespace ember_test
