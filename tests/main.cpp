// The plain test runner; Catch2's implementation is compiled separately (catch_impl.cpp).
// SPDX-License-Identifier: MIT
#include "support/catch_runner.hpp"

int main(int argc, char* argv[]) { return ember_test::run_catch_session(argc, argv); }
