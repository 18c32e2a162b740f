// Tests of the loaders' strict number parser (io/detail/whole_number.hpp): what ember writes
// reads back exactly, and anything that is not one whole number of the type is refused.
// SPDX-License-Identifier: MIT
#include "ember/io/detail/whole_number.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include <catch2/catch.hpp>

using ember::detail::whole_number;

TEST_CASE("whole_number reads integers: decimal digits, '-' only when signed, in range",
          "[io][whole_number]") {
  CHECK(whole_number<std::int64_t>("0") == 0);
  CHECK(whole_number<std::int64_t>("-0") == 0);
  CHECK(whole_number<std::int64_t>("007") == 7);
  CHECK(whole_number<std::int64_t>("-9223372036854775808") ==
        std::numeric_limits<std::int64_t>::min());
  CHECK(whole_number<std::int64_t>("9223372036854775807") ==
        std::numeric_limits<std::int64_t>::max());
  CHECK(whole_number<std::uint64_t>("18446744073709551615") ==
        std::numeric_limits<std::uint64_t>::max());
  CHECK(whole_number<int>("2147483647") == 2147483647);
  for (const char* bad : {"", " ", "zz", " 2", "2 ", "\t2", "2\n", "+2", "--2", "- 2", "2x", "1.5",
                          "1e3", "0x10", "1,000", "9223372036854775808", "-9223372036854775809"}) {
    INFO("'" << bad << "'");
    CHECK_FALSE(whole_number<std::int64_t>(bad));
  }
  for (const char* bad : {"-1", "-0", " -1", "18446744073709551616", "+1"}) {
    INFO("'" << bad << "'");
    CHECK_FALSE(whole_number<std::uint64_t>(bad));
  }
  CHECK_FALSE(whole_number<int>("2147483648"));
}

TEST_CASE("whole_number reads reals: decimal or %a, finite, neither overflow nor underflow",
          "[io][whole_number]") {
  CHECK(whole_number<double>("1.5") == 1.5);
  CHECK(whole_number<double>("-2.5e3") == -2500.0);
  CHECK(whole_number<double>(".5") == 0.5);
  CHECK(whole_number<double>("5.") == 5.0);
  CHECK(whole_number<double>("0x1.8p+0") == 1.5);
  CHECK(whole_number<double>("0X1P3") == 8.0);
  CHECK(whole_number<double>("-0x1p-1") == -0.5);
  const auto minus_zero = whole_number<double>("-0x0p+0");
  REQUIRE(minus_zero);
  CHECK(std::signbit(*minus_zero));
  // Every double ember writes with "%a" (detail::exact) reads back bit for bit, subnormals too.
  for (const double v : {0.0, 1.0, -1.0 / 3.0, 1e300, std::numeric_limits<double>::denorm_min(),
                         std::numeric_limits<double>::max(), -std::numeric_limits<double>::min()}) {
    char text[64];
    std::snprintf(text, sizeof text, "%a", v);
    INFO(text);
    CHECK(whole_number<double>(text) == v);
  }
  for (const char* bad : {"",      "zz",  " 2",   "2 ",     "+2",       "\t2",   "1.5x", "--1",
                          "-",     "0x",  "-0x",  "0x-1p0", "-0x-1p0",  "0x0x1", "1e",   "1e-400",
                          "1e400", "inf", "-inf", "nan",    "infinity", "1,5"}) {
    INFO("'" << bad << "'");
    CHECK_FALSE(whole_number<double>(bad));
  }
  CHECK(whole_number<float>("1e38") == 1e38f);
  CHECK_FALSE(whole_number<float>("1e39"));
}
