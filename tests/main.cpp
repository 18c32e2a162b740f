// The plain Catch2 runner; Catch2's implementation is compiled separately (catch_impl.cpp).
// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>

int main(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }
