// Tests of ember::detail::RowState, the lazily sized per-row optimizer state: slots in
// first-update order, zeroed new rows, compaction when the vocabulary shrinks.
// SPDX-License-Identifier: MIT
#include <ember/optim/detail/row_state.hpp>

#include <catch2/catch.hpp>

using ember::detail::RowState;

TEST_CASE("RowState allocates zeroed state on first use and keeps slots stable", "[row_state]") {
  RowState<float> state(2, true);
  state.follow_table(100, 3);
  CHECK(state.size() == 0);
  CHECK(state.slot(7) == -1);
  const auto s7 = state.ensure(7);
  const auto s2 = state.ensure(2);
  CHECK(s7 == 0);
  CHECK(s2 == 1);
  CHECK(state.ensure(7) == 0);
  CHECK(state.size() == 2);
  for (int p = 0; p < 2; ++p)
    for (int c = 0; c < 3; ++c) CHECK(state.data(p, s2)[c] == 0.0f);
  state.data(1, s2)[2] = 5.0f;
  state.steps(s2) = 4;
  state.ensure(50);  // growth keeps earlier values
  CHECK(state.data(1, s2)[2] == 5.0f);
  CHECK(state.rows()[2] == 50);
  CHECK(state.slot(-1) == -1);
  CHECK(state.slot(1000) == -1);
}

TEST_CASE("RowState drops rows beyond a shrunk vocabulary and compacts the rest", "[row_state]") {
  RowState<double> state(1, true);
  state.follow_table(10, 2);
  for (ember::Index r : {9, 1, 8, 3}) {
    const auto s = state.ensure(r);
    state.data(0, s)[0] = static_cast<double>(r);
    state.steps(s) = r;
  }
  state.follow_table(5, 2);
  CHECK(state.size() == 2);
  CHECK(state.slot(9) == -1);
  CHECK(state.slot(8) == -1);
  CHECK(state.data(0, state.slot(1))[0] == 1.0);
  CHECK(state.data(0, state.slot(3))[0] == 3.0);
  CHECK(state.steps(state.slot(3)) == 3);
  state.follow_table(20, 2);  // growth: new rows have no state
  CHECK(state.slot(15) == -1);
  CHECK(state.ensure(15) == 2);
  REQUIRE_THROWS_AS(state.check_table("where", 3), ember::ShapeError);
  state.clear();
  CHECK(state.size() == 0);
}
