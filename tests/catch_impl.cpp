// Catch2's implementation (the costly part of catch.hpp) and its session, compiled once per build
// and linked into every test binary: the plain runner (main.cpp) and the MPI tests' (mpi/main.cpp).
// SPDX-License-Identifier: MIT
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "support/catch_runner.hpp"

int ember_test::run_catch_session(int argc, char** argv) {
  Catch::Session session;
  const int rc = session.applyCommandLine(argc, argv);
  return rc != 0 ? rc : session.run();
}
