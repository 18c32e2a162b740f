// Catch2 main for the MPI tests: every rank runs the same test cases in declaration order (the
// collectives inside them must match), and the exit code is the worst over all ranks. Catch2's
// implementation is compiled once per build, in ../catch_impl.cpp.
// SPDX-License-Identifier: MIT
#include <mpi.h>

#include "support/catch_runner.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int rc = ember_test::run_catch_session(argc, argv);
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
