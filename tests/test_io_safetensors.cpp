#include <ember/io/safetensors.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <ember/embedding.hpp>

#include "support/io_files.hpp"

using ember::FormatError;
using ember::RowMatrix;
using ember::io::SafetensorsDtype;
using ember::io::SafetensorsFile;
using ember::io::SafetensorsWriter;
using ember_test::ScratchDir;

namespace {

// A safetensors file built by hand: u64 LE header length, the header text, then the data.
std::vector<unsigned char> st_bytes(const std::string& header,
                                    const std::vector<unsigned char>& data) {
  std::vector<unsigned char> b;
  ember_test::append_le(b, static_cast<std::uint64_t>(header.size()));
  ember_test::append(b, ember_test::bytes_of(header));
  ember_test::append(b, data);
  return b;
}

void check_st_error(const std::string& path, const std::string& fragment, std::uint64_t offset) {
  try {
    SafetensorsFile f(path);
    (void)f.load<float>(f.names().empty() ? "x" : f.names().front());
    FAIL("no exception for " << fragment);
  } catch (const FormatError& e) {
    CHECK_THAT(e.what(), Catch::Contains(fragment));
    CHECK_THAT(e.what(), Catch::Contains(path));
    CHECK(e.path() == path);
    CHECK(e.offset() == offset);
  }
}

}  // namespace

TEST_CASE("SafetensorsWriter writes the spec's exact bytes", "[io][safetensors]") {
  ScratchDir dir;
  RowMatrix<float> a(1, 2);
  a << 1.0f, 2.0f;
  ember::io::save_safetensors(dir.file("a.safetensors"), "a", a);
  // Header 56 bytes: already a multiple of 8, no padding; the data starts at byte 64.
  const std::string header = R"({"a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]}})";
  REQUIRE(header.size() == 56);
  CHECK(ember_test::read_bytes(dir.file("a.safetensors")) ==
        st_bytes(header, ember_test::float_bytes({1.0f, 2.0f})));

  // Two tensors (sorted by name), metadata first, F16 and BF16 encodings.
  RowMatrix<double> b(2, 1);
  b << 1.5, -2.0;
  SafetensorsWriter w;
  w.add("z", a, SafetensorsDtype::BF16).add("b", b, SafetensorsDtype::F16).metadata("format", "pt");
  w.save(dir.file("two.safetensors"));
  const std::string h2 =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F16","shape":[2,1],"data_offsets":[0,4]},)"
      R"("z":{"dtype":"BF16","shape":[1,2],"data_offsets":[4,8]}})";
  std::string padded = h2;
  padded.append((8 - h2.size() % 8) % 8, ' ');
  // F16 1.5 = 0x3E00, -2 = 0xC000; BF16 1 = 0x3F80, 2 = 0x4000 (little-endian bytes).
  CHECK(ember_test::read_bytes(dir.file("two.safetensors")) ==
        st_bytes(padded, {0x00, 0x3E, 0x00, 0xC0, 0x80, 0x3F, 0x00, 0x40}));
}

TEMPLATE_TEST_CASE("safetensors round-trips F32, F64, F16 and BF16 tables", "[io][safetensors]",
                   float, double) {
  ScratchDir dir;
  RowMatrix<TestType> m(13, 7);
  for (ember::Index i = 0; i < m.size(); ++i)
    m.data()[i] = static_cast<TestType>(std::cos(0.3 * static_cast<double>(i)));
  SafetensorsWriter w;
  w.add("f32", m, SafetensorsDtype::F32).add("f64", m, SafetensorsDtype::F64);
  w.add("f16", m, SafetensorsDtype::F16).add("bf16", m, SafetensorsDtype::BF16);
  w.save(dir.file("m.safetensors"));
  SafetensorsFile f(dir.file("m.safetensors"));
  CHECK(f.names() == std::vector<std::string>{"bf16", "f16", "f32", "f64"});
  CHECK(f.load<double>("f64") == m.template cast<double>());
  CHECK(f.load<float>("f32") == m.template cast<float>());
  const auto h = f.load<TestType>("f16");
  const auto bf = f.load<TestType>("bf16");
  for (ember::Index i = 0; i < m.size(); ++i) {
    CHECK_THAT(static_cast<double>(h.data()[i]),
               Catch::Matchers::WithinAbs(static_cast<double>(m.data()[i]), 1e-3));
    CHECK_THAT(static_cast<double>(bf.data()[i]),
               Catch::Matchers::WithinAbs(static_cast<double>(m.data()[i]), 8e-3));
  }
  CHECK(f.data_offset() % 8 == 0);
  CHECK(f.info("f16").dtype == SafetensorsDtype::F16);
  CHECK(f.info("f16").shape == std::vector<std::uint64_t>{13, 7});
  CHECK(ember::io::load_safetensors<TestType>(dir.file("m.safetensors"), "f64") == m);
}

TEST_CASE("a tied model stores its table once and the alias resolves", "[io][safetensors]") {
  ScratchDir dir;
  ember::Embedding<float> emb(50, 8, /*seed=*/3);
  SafetensorsWriter w;
  w.add("wte.weight", emb.weight()).alias("lm_head.weight", "wte.weight");
  w.save(dir.file("tied.safetensors"));
  SafetensorsFile f(dir.file("tied.safetensors"));
  CHECK(f.names() == std::vector<std::string>{"wte.weight"});
  CHECK(f.contains("lm_head.weight"));
  CHECK(f.resolve("lm_head.weight") == "wte.weight");
  CHECK(f.metadata().at("ember.alias.lm_head.weight") == "wte.weight");
  CHECK(f.load<float>("lm_head.weight") == emb.weight());
  CHECK(ember_test::read_bytes(dir.file("tied.safetensors")).size() ==
        f.data_offset() + 50 * 8 * sizeof(float));
  ember::Embedding<float> back(f.load<float>("wte.weight"));
  CHECK(back.weight() == emb.weight());
  CHECK_THROWS_AS(f.load<float>("missing"), ember::KeyError);
  SafetensorsWriter bad;
  bad.alias("x", "nothing");
  CHECK_THROWS_AS(bad.save(dir.file("bad.safetensors")), ember::ValueError);
  CHECK_THROWS_AS(SafetensorsWriter().add("a", emb.weight()).add("a", emb.weight()),
                  ember::ValueError);
  CHECK_THROWS_AS(SafetensorsWriter().add("a", emb.weight(), SafetensorsDtype::I32),
                  ember::ValueError);
  CHECK_THROWS_AS(SafetensorsWriter().metadata("ember.alias.y", "a"), ember::ValueError);
}

TEST_CASE("SafetensorsFile::map is zero-copy when F32 and aligned, a copy otherwise",
          "[io][safetensors][mapped_table]") {
  ScratchDir dir;
  RowMatrix<float> m(4, 3);
  for (ember::Index i = 0; i < m.size(); ++i) m.data()[i] = -1.0f + 0.25f * static_cast<float>(i);
  ember::io::save_safetensors(dir.file("m.safetensors"), "wte.weight", m);
  ember::io::MappedTable<float> view =
      SafetensorsFile(dir.file("m.safetensors")).map<float>("wte.weight");
  CHECK(view.zero_copy());  // the file object is gone; the view keeps the mapping alive
  CHECK(view.matrix() == m);
  const auto widened = SafetensorsFile(dir.file("m.safetensors")).map<double>("wte.weight");
  CHECK_FALSE(widened.zero_copy());
  CHECK(widened.matrix() == m.cast<double>());

  // Header of length 61 (not padded): the data starts at byte 69, unaligned for float.
  std::string header = R"({"w":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]}})";
  header.append(61 - header.size(), ' ');
  ember_test::write_bytes(dir.file("u.safetensors"),
                          st_bytes(header, ember_test::float_bytes({0.5f, -4.0f})));
  SafetensorsFile u(dir.file("u.safetensors"));
  REQUIRE(u.data_offset() == 69);
  const auto copy = u.map<float>("w");
  CHECK_FALSE(copy.zero_copy());
  CHECK(copy.matrix()(0, 0) == 0.5f);
  CHECK(copy.matrix()(0, 1) == -4.0f);
}

TEST_CASE("SafetensorsFile enforces the spec's validation", "[io][safetensors]") {
  ScratchDir dir;
  int n = 0;
  auto write = [&](const std::vector<unsigned char>& b) {
    const std::string p = dir.file("bad" + std::to_string(n++) + ".safetensors");
    ember_test::write_bytes(p, b);
    return p;
  };
  auto tensor = [](const std::string& name, const std::string& dtype, const std::string& shape,
                   std::uint64_t b, std::uint64_t e) {
    return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
           ",\"data_offsets\":[" + std::to_string(b) + "," + std::to_string(e) + "]}";
  };
  const auto d8 = ember_test::float_bytes({1, 2});
  check_st_error(write({}), "empty file", 0);
  check_st_error(write({1, 0, 0}), "truncated", 3);
  {
    std::vector<unsigned char> b;
    ember_test::append_le(b, std::uint64_t{200'000'000});
    check_st_error(write(b), "exceeds the limit", 0);
  }
  {
    std::vector<unsigned char> b;
    ember_test::append_le(b, std::uint64_t{1000});
    ember_test::append(b, ember_test::bytes_of("{}"));
    check_st_error(write(b), "runs past the end", 0);
  }
  check_st_error(write(st_bytes("[1,2]   ", {})), "does not start with '{'", 8);
  check_st_error(write(st_bytes("{\"a\":", {})), "not valid JSON", 8 + 5);
  check_st_error(write(st_bytes("{" + tensor("a", "F99", "[1,2]", 0, 8) + "}", d8)),
                 "unknown dtype 'F99'", 8);
  check_st_error(write(st_bytes("{" + tensor("a", "F32", "[1,-2]", 0, 8) + "}", d8)),
                 "non-negative", 8);
  check_st_error(write(st_bytes("{" + tensor("a", "F32", "[1,3]", 0, 8) + "}", d8)), "needs 12", 8);
  check_st_error(
      write(
          st_bytes("{" + tensor("a", "F32", "[4294967296,4294967296,4294967296]", 0, 8) + "}", d8)),
      "shape overflows", 8);
  check_st_error(write(st_bytes("{" + tensor("a", "F32", "[1,2]", 8, 0) + "}", d8)), "end before",
                 8);
  // Overlap, gap, incomplete and excess coverage.
  const std::string hdr_overlap =
      "{" + tensor("a", "F32", "[1,2]", 0, 8) + "," + tensor("b", "F32", "[1,1]", 4, 8) + "}";
  check_st_error(write(st_bytes(hdr_overlap, d8)), "overlaps", 8 + hdr_overlap.size() + 4);
  const std::string hdr_gap = "{" + tensor("a", "F32", "[1,1]", 4, 8) + "}";
  check_st_error(write(st_bytes(hdr_gap, d8)), "gap", 8 + hdr_gap.size());
  const std::string hdr_short = "{" + tensor("a", "F32", "[1,1]", 0, 4) + "}";
  check_st_error(write(st_bytes(hdr_short, d8)), "cover 4 data bytes but the data section has 8",
                 8 + hdr_short.size() + 4);
  const std::string hdr_long = "{" + tensor("a", "F32", "[1,4]", 0, 16) + "}";
  check_st_error(write(st_bytes(hdr_long, d8)), "(truncated)", 8 + hdr_long.size() + 8);
  check_st_error(write(st_bytes("{\"__metadata__\":{\"k\":1}}", {})), "not a string", 8);
  // Non-UTF-8 in the header, a 1-D tensor, an integer dtype, a NaN.
  check_st_error(write(st_bytes("{\"\xff\":1}", {})), "not valid JSON", 8 + 2);
  const std::string hdr_1d = "{" + tensor("a", "F32", "[2]", 0, 8) + "}";
  check_st_error(write(st_bytes(hdr_1d, d8)), "expected a 2-D table", 8 + hdr_1d.size());
  const std::string hdr_i32 = "{" + tensor("a", "I32", "[1,2]", 0, 8) + "}";
  check_st_error(write(st_bytes(hdr_i32, d8)), "dtype I32", 8 + hdr_i32.size());
  const std::string hdr_nan = "{" + tensor("a", "F32", "[1,2]", 0, 8) + "}";
  const auto nan_path = write(
      st_bytes(hdr_nan, ember_test::float_bytes({1, std::numeric_limits<float>::infinity()})));
  check_st_error(nan_path, "non-finite value at row 0, column 1", 8 + hdr_nan.size() + 4);
  ember::io::SafetensorsLoadOptions allow;
  allow.allow_non_finite = true;
  CHECK(std::isinf(SafetensorsFile(nan_path).load<float>("a", allow)(0, 1)));
  // A valid empty file (header "{}" padded) has no tensors.
  CHECK(SafetensorsFile(write(st_bytes("{}      ", {}))).names().empty());
}

TEST_CASE("a missing safetensors tensor's KeyError names the file's closest tensors",
          "[io][safetensors]") {
  ScratchDir dir;
  ember::Embedding<float> emb(4, 2, /*seed=*/1);
  SafetensorsWriter w;
  w.add("wte.weight", emb.weight())
      .add("wpe.weight", emb.weight())
      .alias("lm_head.weight", "wte.weight");
  w.save(dir.file("names.safetensors"));
  const SafetensorsFile f(dir.file("names.safetensors"));
  try {
    static_cast<void>(f.info("wte.weights"));
    FAIL("no throw");
  } catch (const ember::KeyError& e) {
    CHECK(e.key() == "wte.weights");
    CHECK_THAT(e.what(), Catch::EndsWith("; the closest it has: 'wte.weight', 'wpe.weight', "
                                         "'lm_head.weight'"));
  }
}

TEST_CASE("a missing safetensors file is a FileError naming the call that opened it",
          "[io][safetensors]") {
  ember_test::check_missing_file("io::SafetensorsFile",
                                 [](const std::string& p) { const SafetensorsFile f(p); });
  ember_test::check_missing_file("io::load_safetensors", [](const std::string& p) {
    static_cast<void>(ember::io::load_safetensors<float>(p, "wte.weight"));
  });
}
