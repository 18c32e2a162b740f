#include <ember/io/npy.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "support/io_files.hpp"

using ember::FormatError;
using ember::RowMatrix;
using ember_test::ScratchDir;

namespace {

// The 2x3 table numpy wrote into the fixtures: arange(6).reshape(2, 3) / 4 - 0.5.
template <class T>
RowMatrix<T> fixture_table() {
  RowMatrix<T> m(2, 3);
  m << T(-0.5), T(-0.25), T(0), T(0.25), T(0.5), T(0.75);
  return m;
}

// A .npy file built by hand from the format spec: magic, version, header length, dict, padding.
std::vector<unsigned char> npy_bytes(int major, const std::string& dict, std::size_t data_bytes,
                                     unsigned char fill = 0) {
  std::vector<unsigned char> b = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<unsigned char>(major),
                                  0};
  const std::size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  const std::size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header.push_back('\n');
  if (major == 1) {
    ember_test::append_le(b, static_cast<std::uint16_t>(header.size()));
  } else {
    ember_test::append_le(b, static_cast<std::uint32_t>(header.size()));
  }
  ember_test::append(b, ember_test::bytes_of(header));
  b.insert(b.end(), data_bytes, fill);
  return b;
}

}  // namespace

TEMPLATE_TEST_CASE("save_npy writes numpy's exact bytes for a 2x3 table", "[io][npy]", float,
                   double) {
  ScratchDir dir;
  const std::string path = dir.file("t.npy");
  ember::io::save_npy(path, fixture_table<TestType>());
  const auto bytes = ember_test::read_bytes(path);

  // Built from the spec: \x93NUMPY, 1.0, u16 header length, the dict padded with spaces so the
  // data starts at byte 128 (a multiple of 64), '\n', then the row-major little-endian values.
  const std::string descr = std::is_same_v<TestType, float> ? "<f4" : "<f8";
  std::vector<unsigned char> expected =
      npy_bytes(1, "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (2, 3), }", 0);
  REQUIRE(expected.size() == 128);
  const auto t = fixture_table<TestType>();
  for (int i = 0; i < 6; ++i) ember_test::append_le(expected, t.data()[i]);
  CHECK(bytes == expected);
  if (std::is_same_v<TestType, float>) {
    // numpy.save of the same array (tests/data/make_gensim_fixtures.py) gives the same bytes.
    CHECK(bytes == ember_test::read_bytes(ember_test::data_file("npy_f4_le.npy")));
  }
}

TEST_CASE("load_npy reads numpy's fixtures: versions, byte orders, layouts, f2", "[io][npy]") {
  const auto expected = fixture_table<double>();
  for (const char* name : {"npy_f4_le.npy", "npy_f8_be.npy", "npy_f2_le.npy", "npy_f4_fortran.npy",
                           "npy_f4_v2.npy", "npy_f4_v3.npy"}) {
    INFO(name);
    const auto path = ember_test::data_file(name);
    const auto d = ember::io::load_npy<double>(path);
    REQUIRE(d.rows() == 2);
    REQUIRE(d.cols() == 3);
    CHECK(d == expected);  // all values are exact in f2/f4/f8
    const auto f = ember::io::load_npy<float>(path);
    CHECK(f == expected.cast<float>());
  }
  const auto h3 = ember::io::read_npy_header(ember_test::data_file("npy_f4_v3.npy"));
  CHECK(h3.major_version == 3);
  CHECK(h3.data_offset % 64 == 0);
  const auto hb = ember::io::read_npy_header(ember_test::data_file("npy_f8_be.npy"));
  CHECK_FALSE(hb.little_endian);
  CHECK(hb.dtype == ember::io::NpyDtype::f8);
  CHECK(ember::io::read_npy_header(ember_test::data_file("npy_f4_fortran.npy")).fortran_order);
}

TEST_CASE("load_npy byte-swaps big-endian f2 and f4 built by hand", "[io][npy]") {
  ScratchDir dir;
  // >f4 [1.5, -2] and >f2 [1.5, -2]: 1.5f = 3FC00000, -2f = C0000000; half 1.5 = 3E00, -2 = C000.
  auto f4 = npy_bytes(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (1, 2), }", 0);
  ember_test::append(f4, {0x3F, 0xC0, 0, 0, 0xC0, 0, 0, 0});
  ember_test::write_bytes(dir.file("be4.npy"), f4);
  auto f2 = npy_bytes(2, "{'descr': '>f2', 'fortran_order': True, 'shape': (2, 1), }", 0);
  ember_test::append(f2, {0x3E, 0x00, 0xC0, 0x00});
  ember_test::write_bytes(dir.file("be2.npy"), f2);
  const auto a = ember::io::load_npy<float>(dir.file("be4.npy"));
  CHECK(a(0, 0) == 1.5f);
  CHECK(a(0, 1) == -2.0f);
  const auto b = ember::io::load_npy<double>(dir.file("be2.npy"));
  REQUIRE(b.rows() == 2);
  CHECK(b(0, 0) == 1.5);
  CHECK(b(1, 0) == -2.0);
}

TEST_CASE("load_npy returns an empty table at once for a huge shape with no columns", "[io][npy]") {
  // (2220200988602, 0) in Fortran order: a legal empty table (0 data bytes). The converting path
  // (f8 -> float, transposed) must not walk its 2.2e12 rows of nothing.
  ScratchDir dir;
  for (const char* order : {"True", "False"}) {
    const std::string dict = std::string("{'descr': '<f8', 'fortran_order': ") + order +
                             ", 'shape': (2220200988602, 0), }";
    ember_test::write_bytes(dir.file("empty.npy"), npy_bytes(1, dict, 0));
    const auto f = ember::io::load_npy<float>(dir.file("empty.npy"));
    CHECK(f.rows() == 2220200988602);
    CHECK(f.cols() == 0);
    const auto g = ember::io::load_npy<double>(dir.file("empty.npy"));
    CHECK(g.size() == 0);
  }
}

TEST_CASE("save_npy round-trips f2, f4, f8 and large tables", "[io][npy]") {
  ScratchDir dir;
  RowMatrix<double> m(37, 11);
  for (ember::Index i = 0; i < m.size(); ++i) m.data()[i] = std::sin(static_cast<double>(i)) * 3;
  ember::io::save_npy(dir.file("d.npy"), m);
  CHECK(ember::io::load_npy<double>(dir.file("d.npy")) == m);
  ember::io::save_npy(dir.file("f.npy"), m, {ember::io::NpyDtype::f4});
  CHECK(ember::io::load_npy<float>(dir.file("f.npy")) == m.cast<float>());
  ember::io::save_npy(dir.file("h.npy"), m, {ember::io::NpyDtype::f2});
  const auto h = ember::io::load_npy<float>(dir.file("h.npy"));
  for (ember::Index i = 0; i < m.size(); ++i) {
    CHECK_THAT(h.data()[i], Catch::Matchers::WithinAbs(m.data()[i], 3 * 1e-3));
  }
  // A non-row-major, non-contiguous argument is written in logical order.
  Eigen::MatrixXd col = m.block(2, 3, 5, 4);
  ember::io::save_npy(dir.file("c.npy"), col);
  CHECK(ember::io::load_npy<double>(dir.file("c.npy")) == RowMatrix<double>(col));
  CHECK(ember::io::read_npy_header(dir.file("c.npy")).data_offset % 64 == 0);
}

TEST_CASE("map_npy is zero-copy for aligned native data and copies otherwise",
          "[io][npy][mapped_table]") {
  const auto t = ember::io::map_npy<float>(ember_test::data_file("npy_f4_le.npy"));
  CHECK(t.zero_copy());
  CHECK(t.matrix() == fixture_table<float>());
  const auto be = ember::io::map_npy<double>(ember_test::data_file("npy_f8_be.npy"));
  CHECK_FALSE(be.zero_copy());
  CHECK(be.matrix() == fixture_table<double>());
  const auto widened = ember::io::map_npy<double>(ember_test::data_file("npy_f4_le.npy"));
  CHECK_FALSE(widened.zero_copy());
  CHECK(widened.matrix() == fixture_table<double>());
}

TEST_CASE("map_npy falls back to a copy when the data offset is unaligned",
          "[io][npy][mapped_table]") {
  ScratchDir dir;
  // A valid header with no padding: the float data starts at byte 70 (not a multiple of 4).
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }";
  std::vector<unsigned char> b = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  std::string header = dict;
  header.push_back('\n');
  ember_test::append_le(b, static_cast<std::uint16_t>(header.size()));
  ember_test::append(b, ember_test::bytes_of(header));
  ember_test::append_le(b, 1.25f);
  ember_test::append_le(b, -3.0f);
  ember_test::write_bytes(dir.file("u.npy"), b);
  REQUIRE(ember::io::read_npy_header(dir.file("u.npy")).data_offset == 70);
  const auto t = ember::io::map_npy<float>(dir.file("u.npy"));
  CHECK_FALSE(t.zero_copy());
  CHECK(t.matrix()(0, 0) == 1.25f);
  CHECK(t.matrix()(0, 1) == -3.0f);
}

namespace {

void check_npy_error(const std::string& path, const std::string& fragment, std::uint64_t offset) {
  try {
    (void)ember::io::load_npy<float>(path);
    FAIL("no exception for " << fragment);
  } catch (const FormatError& e) {
    CHECK_THAT(e.what(), Catch::Contains(fragment));
    CHECK_THAT(e.what(), Catch::Contains(path));
    CHECK(e.path() == path);
    CHECK(e.offset() == offset);
    CHECK_FALSE(e.is_line());
  }
}

}  // namespace

TEST_CASE("load_npy rejects bad files with the file name and byte offset", "[io][npy]") {
  ScratchDir dir;
  const std::string ok_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  auto write = [&](const std::string& name, const std::vector<unsigned char>& b) {
    ember_test::write_bytes(dir.file(name), b);
    return dir.file(name);
  };
  check_npy_error(write("empty.npy", {}), "empty file", 0);
  check_npy_error(write("short.npy", {0x93, 'N', 'U'}), "truncated", 3);
  check_npy_error(write("magic.npy", ember_test::bytes_of("PK\x03\x04 not numpy at all")),
                  "wrong magic", 0);
  auto v9 = npy_bytes(1, ok_dict, 24);
  v9[6] = 9;
  check_npy_error(write("version.npy", v9), "version 9.0", 6);
  auto huge = npy_bytes(2, ok_dict, 24);
  huge[8] = huge[9] = huge[10] = huge[11] = 0xFF;  // header length 4 GiB
  check_npy_error(write("hlen.npy", huge), "runs past the end", 8);
  auto trunc = npy_bytes(1, ok_dict, 24);
  trunc.resize(trunc.size() - 5);
  check_npy_error(write("trunc.npy", trunc), "(truncated)", 128);
  check_npy_error(write("extra.npy", npy_bytes(1, ok_dict, 25)), "has 25", 128);
  check_npy_error(
      write("i8.npy",
            npy_bytes(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }", 48)),
      "unsupported dtype '<i8'", 20);
  check_npy_error(
      write("3d.npy",
            npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 1), }", 24)),
      "expected a 2-D array, got shape (2, 3, 1)", 10);
  check_npy_error(
      write("1d.npy",
            npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", 24)),
      "got shape (6,)", 10);
  check_npy_error(
      write("overflow.npy",
            npy_bytes(
                1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
                24)),
      "overflows", 10);
  check_npy_error(
      write("claim.npy",
            npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000, 3), }",
                      24)),
      "needs 12000000000000 data bytes", 128);
  check_npy_error(
      write("garbage.npy",
            npy_bytes(1, "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2, 3), }", 24)),
      "fortran_order must be True or False", 44);
  check_npy_error(write("nodict.npy", npy_bytes(1, "not a dict", 24)), "expected '{'", 10);
  check_npy_error(write("unterminated.npy", npy_bytes(1, "{'descr': '<f4", 24)),
                  "unterminated string", 64);
  check_npy_error(write("missing.npy", npy_bytes(1, "{'descr': '<f4', 'shape': (2, 3), }", 24)),
                  "missing", 10 + 35);

  // NaN: rejected with the byte offset of the value (row 1, column 2 -> element 5).
  auto nan = npy_bytes(1, ok_dict, 0);
  for (int i = 0; i < 6; ++i)
    ember_test::append_le(nan, i == 5 ? std::numeric_limits<float>::quiet_NaN() : 1.0f);
  check_npy_error(write("nan.npy", nan), "non-finite value at row 1, column 2", 128 + 5 * 4);
  ember::io::NpyLoadOptions allow;
  allow.allow_non_finite = true;
  CHECK(std::isnan(ember::io::load_npy<float>(dir.file("nan.npy"), allow)(1, 2)));
  CHECK_THROWS_AS(ember::io::map_npy<float>(dir.file("nan.npy")), FormatError);
  CHECK_THROWS_WITH(ember::io::load_npy<float>(dir.file("does_not_exist.npy")),
                    Catch::Contains("cannot open \"" + dir.file("does_not_exist.npy") + "\""));
}

TEST_CASE("load_npy reads the shape as a Python tuple: entries apart only by ','", "[io][npy]") {
  ScratchDir dir;
  const auto write = [&](const std::string& shape) {
    const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
    ember_test::write_bytes(dir.file("s.npy"), npy_bytes(1, dict, 24));
    return dir.file("s.npy");
  };
  const std::uint64_t paren = 10 + 50;  // the byte of '(': the preamble, then the dict up to it
  // "(2 3)" was read as (2, 3): the ',' after an entry was optional.
  check_npy_error(write("(2 3)"), "expected ',' or ')' after a shape entry", paren + 3);
  check_npy_error(write("(2\t3)"), "expected ',' or ')' after a shape entry", paren + 3);
  check_npy_error(write("(2;3)"), "expected ',' or ')' after a shape entry", paren + 2);
  check_npy_error(write("(2L, 3L)"), "expected ',' or ')' after a shape entry", paren + 2);
  check_npy_error(write("(2, +3)"), "shape entries must be non-negative integers", paren + 4);
  check_npy_error(write("(2,, 3)"), "shape entries must be non-negative integers", paren + 3);
  // Spaces around the entries and a trailing ',' are Python; they load.
  for (const char* shape : {"(2,3)", "( 2 , 3 )", "(2, 3,)", "(2, 3 ,)"}) {
    INFO(shape);
    CHECK(ember::io::load_npy<float>(write(shape)).rows() == 2);
  }
}

TEST_CASE("save_npy is atomic: a failed save leaves the old file and no temporary", "[io][npy]") {
  ScratchDir dir;
  const std::string path = dir.file("keep.npy");
  ember::io::save_npy(path, fixture_table<float>());
  const auto before = ember_test::read_bytes(path);
  // A new file is rw-r--r--, not mkstemp's 0600.
  const auto perms = std::filesystem::status(path).permissions();
  CHECK((perms & std::filesystem::perms::group_read) != std::filesystem::perms::none);
  // Writing into a missing directory fails before anything is touched.
  CHECK_THROWS_AS(ember::io::save_npy(dir.file("missing/dir.npy"), fixture_table<float>()),
                  FormatError);
  CHECK(ember_test::read_bytes(path) == before);
  CHECK(dir.entries() == 1);
  // Overwriting replaces the content in one step.
  ember::io::save_npy(path, fixture_table<double>());
  CHECK(ember::io::load_npy<double>(path) == fixture_table<double>());
  CHECK(dir.entries() == 1);
}

TEST_CASE("a missing .npy file is a FileError naming the call that opened it",
          "[io][npy][mapped_table]") {
  ember_test::check_missing_file("io::load_npy", [](const std::string& p) {
    static_cast<void>(ember::io::load_npy<float>(p));
  });
  ember_test::check_missing_file(
      "io::map_npy", [](const std::string& p) { static_cast<void>(ember::io::map_npy<float>(p)); });
  ember_test::check_missing_file("io::read_npy_header", [](const std::string& p) {
    static_cast<void>(ember::io::read_npy_header(p));
  });
}
