#include <ember/io/mapped_table.hpp>

#include <catch2/catch.hpp>

TEMPLATE_TEST_CASE("MappedTable over an owning copy behaves like the matrix", "[io][mapped_table]",
                   float, double) {
  ember::RowMatrix<TestType> m(3, 2);
  m << 1, 2, 3, 4, 5, 6;
  const ember::io::MappedTable<TestType> t(m);
  CHECK_FALSE(t.zero_copy());
  CHECK(t.vocab_size() == 3);
  CHECK(t.d_model() == 2);
  CHECK(t.matrix() == m);
  const auto copy = t;  // copies share the same memory
  CHECK(copy.matrix().data() == t.matrix().data());
  ember::io::MappedTable<TestType> moved = std::move(ember::io::MappedTable<TestType>(m));
  CHECK(moved.to_matrix() == m);
}
// The zero-copy paths over real files are tested in test_io_npy.cpp and test_io_safetensors.cpp
// (tag [mapped_table]).
