// GGUF reading and writing (io/gguf.hpp): round trips of every type ember encodes and of every
// metadata type, file order, vocabularies with repeated tokens, ggml's bytes in written files, and
// the malformed files: every truncation, lengths and counts past the end, overflowing shapes, bad
// dimensions, offsets, alignments, type ids, duplicates, versions and magic. Each rejection is a
// FormatError naming the file, the byte offset and what was expected.
#include "ember/io/gguf.hpp"
#include "ember/io/gguf_writer.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "ember/ggml/decode.hpp"
#include "ember/ggml/encode.hpp"
#include "ember/io/ggml_type.hpp"
#include "ember/random.hpp"
#include "support/ggml_inputs.hpp"
#include "support/gguf_fixtures.hpp"
#include "support/io_files.hpp"
#include "support/io_malformed.hpp"

using ember::Index;
using ember::RowMatrix;
using ember::io::GgmlType;
using ember::io::GgufFile;
using ember::io::GgufValueType;
using ember::io::GgufWriter;
using ember_test::Bytes;
using ember_test::check_every_truncation;
using ember_test::check_rejected;
using ember_test::ScratchDir;

namespace {

namespace gg = ember::detail::ggml;

bool identical_floats(const RowMatrix<float>& a, const RowMatrix<float>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.size()) * 4) == 0;
}

// ---- a hand-built GGUF file, for the malformed cases ----------------------------------------

void put_u32(Bytes& b, std::uint32_t v) { ember_test::append(b, ember_test::le_bytes(v)); }
void put_u64(Bytes& b, std::uint64_t v) { ember_test::append(b, ember_test::le_bytes(v)); }
void put_str(Bytes& b, const std::string& s) {
  put_u64(b, s.size());
  ember_test::append(b, ember_test::bytes_of(s));
}

/// A metadata entry: key, type and the value's bytes.
Bytes kv(const std::string& key, GgufValueType type, const Bytes& value) {
  Bytes b;
  put_str(b, key);
  put_u32(b, static_cast<std::uint32_t>(type));
  ember_test::append(b, value);
  return b;
}
Bytes kv_u32(const std::string& key, std::uint32_t v) {
  return kv(key, GgufValueType::UINT32, ember_test::le_bytes(v));
}
Bytes kv_str(const std::string& key, const std::string& s) {
  Bytes v;
  put_str(v, s);
  return kv(key, GgufValueType::STRING, v);
}

struct RawTensor {
  std::string name;
  std::vector<std::uint64_t> ne;
  std::uint32_t type = 0;
  std::uint64_t offset = 0;
};

struct Raw {
  std::string magic = "GGUF";
  std::uint32_t version = 3;
  std::optional<std::uint64_t> n_tensors;  // default: tensors.size()
  std::optional<std::uint64_t> n_kv;       // default: kvs.size()
  std::vector<Bytes> kvs;
  std::vector<RawTensor> tensors;
  std::uint64_t alignment = 32;
  Bytes data;
  /// Offsets filled in by build(): where each kv and each tensor info starts.
  std::vector<std::uint64_t> kv_at;
  std::vector<std::uint64_t> tensor_at;
  std::uint64_t data_at = 0;
};

Bytes build(Raw& r) {
  Bytes b = ember_test::bytes_of(r.magic);
  put_u32(b, r.version);
  put_u64(b, r.n_tensors.value_or(r.tensors.size()));
  put_u64(b, r.n_kv.value_or(r.kvs.size()));
  r.kv_at.clear();
  r.tensor_at.clear();
  for (const Bytes& k : r.kvs) {
    r.kv_at.push_back(b.size());
    ember_test::append(b, k);
  }
  for (const RawTensor& t : r.tensors) {
    r.tensor_at.push_back(b.size());
    put_str(b, t.name);
    put_u32(b, static_cast<std::uint32_t>(t.ne.size()));
    for (const std::uint64_t n : t.ne) put_u64(b, n);
    put_u32(b, t.type);
    put_u64(b, t.offset);
  }
  if (!r.tensors.empty()) {
    while (b.size() % r.alignment != 0) b.push_back(0);
  }
  r.data_at = b.size();
  ember_test::append(b, r.data);
  return b;
}

/// A small valid file: two keys and two F32 tensors [8] and [4, 2], the last ending the file.
Raw small_raw() {
  Raw r;
  r.kvs = {kv_str("general.architecture", "ember"), kv_u32("general.alignment", 32)};
  r.tensors = {{"a", {8}, 0, 0}, {"b", {4, 2}, 0, 32}};
  r.data = Bytes(64, 0);
  for (std::size_t i = 0; i < 16; ++i) {
    const float f = static_cast<float>(i) - 4.0f;
    std::memcpy(r.data.data() + 4 * i, &f, 4);
  }
  return r;
}

auto open_gguf = [](const std::string& p) { (void)GgufFile(p); };
auto open_and_load = [](const std::string& p) {
  const GgufFile f(p);
  for (const auto& n : f.names()) (void)f.load<float>(n);
};

}  // namespace

TEST_CASE("gguf: every type ember encodes round-trips through a GGUF file, as ggml's bytes",
          "[io][gguf]") {
  ScratchDir dir;
  const Index d = 512;
  const Index V = 5;
  const RowMatrix<float> table = ember_test::gguf_normal_table(V, d, 1);
  for (const GgmlType kt : gg::codec_types) {
    const auto t = static_cast<GgmlType>(kt);
    INFO(to_string(t));
    const std::string path = dir.file(std::string(to_string(t)) + ".gguf");
    GgufWriter w;
    w.add("token_embd.weight", table, t);
    w.save(path);

    const GgufFile f(path);
    CHECK(f.version() == 3);
    CHECK(f.alignment() == 32);
    CHECK(f.data_offset() % 32 == 0);
    const auto& info = f.info("token_embd.weight");
    CHECK(info.type == t);
    CHECK(info.n_dims == 2);
    CHECK(info.ne == std::array<std::uint64_t, 4>{512, 5, 1, 1});
    CHECK(info.cols() == d);
    CHECK(info.rows() == V);
    CHECK(info.row_bytes == static_cast<std::uint64_t>(ember::io::ggml_row_size(t, d)));
    CHECK(info.bytes == 5 * info.row_bytes);
    CHECK(info.offset == f.data_offset());
    CHECK(info.offset % 32 == 0);

    // The stored bytes are the kernels' quantization (ggml's, see test_ggml_blocks.cpp) ...
    std::vector<std::uint8_t> q(static_cast<std::size_t>(info.bytes));
    gg::quantize(kt, table.data(), V * d, q.data());
    const auto bytes = f.bytes("token_embd.weight");
    CHECK(std::vector<std::uint8_t>(bytes.begin(), bytes.end()) == q);
    // ... and load<float> is their dequantization, bit for bit.
    RowMatrix<float> want(V, d);
    gg::decode_row(kt, q.data(), V * d, want.data());
    const RowMatrix<float> got = f.load<float>("token_embd.weight");
    CHECK(identical_floats(got, want));
    const RowMatrix<double> got_d = f.load<double>("token_embd.weight");
    CHECK(got_d == got.cast<double>());
    if (t == GgmlType::F32) CHECK(identical_floats(got, table));
  }
}

TEST_CASE("gguf: a written file holds ggml's quantization of the golden inputs", "[io][gguf]") {
  // Ties the writer to ggml's own bytes: the golden files of tests/data/ggml/ come from ggml.
  ScratchDir dir;
  const std::vector<float> x = ember_test::ggml_common_rows();
  const Index rows = static_cast<Index>(x.size() / ember_test::ggml_row_len);
  const Eigen::Map<const RowMatrix<float>> table(x.data(), rows, 256);
  for (const GgmlType kt : gg::codec_types) {
    const auto t = static_cast<GgmlType>(kt);
    INFO(to_string(t));
    const std::string path = dir.file("golden.gguf");
    GgufWriter w;
    w.add("t", table, t);
    w.save(path);
    const auto golden =
        ember_test::read_bytes(ember_test::data_file("ggml/" + std::string(to_string(t)) + ".bin"));
    const std::size_t row_bytes = static_cast<std::size_t>(ember::io::ggml_row_size(t, 256));
    const std::size_t n = static_cast<std::size_t>(rows) * row_bytes;
    const GgufFile f(path);
    const auto bytes = f.bytes("t");
    REQUIRE(bytes.size() == n);
    CHECK(std::equal(bytes.begin(), bytes.end(), golden.begin() + 24));
  }
}

TEST_CASE("gguf: tensors keep the order they were added in and the alignment is honoured",
          "[io][gguf]") {
  ScratchDir dir;
  const RowMatrix<float> a = ember_test::gguf_normal_table(3, 32, 2);
  const RowMatrix<double> b = ember_test::gguf_normal_table(2, 256, 3).cast<double>();
  RowMatrix<float> big = ember_test::gguf_normal_table(10, 64, 4);
  GgufWriter w;
  w.metadata("general.alignment", std::uint32_t{64});
  w.add("z.weight", a, GgmlType::Q8_0)
      .add("a.weight", b, GgmlType::Q4_K)
      .add("m.weight", big.block(2, 0, 5, 64), GgmlType::F16);  // a block of a larger table
  w.save(dir.file("order.gguf"));
  const GgufFile f(dir.file("order.gguf"));
  CHECK(f.names() == std::vector<std::string>{"z.weight", "a.weight", "m.weight"});
  CHECK(f.alignment() == 64);
  CHECK(f.data_offset() % 64 == 0);
  for (const auto& t : f.tensors()) CHECK(t.offset % 64 == 0);
  // Packed in order, each padded to 64 bytes, as ggml's writer does.
  CHECK(f.tensors()[0].data_offset == 0);
  CHECK(f.tensors()[1].data_offset == 128);        // 3 x 34 = 102 bytes, padded
  CHECK(f.tensors()[2].data_offset == 128 + 320);  // 2 x 144 = 288, padded
  CHECK(f.load<float>("m.weight") == big.block(2, 0, 5, 64).cast<Eigen::half>().cast<float>());
  CHECK(f.load<double>("a.weight").rows() == 2);
}

TEST_CASE("gguf: metadata of every GGUF type round-trips with its type", "[io][gguf]") {
  ScratchDir dir;
  GgufWriter w;
  w.metadata("u8", std::uint8_t{200})
      .metadata("i8", std::int8_t{-100})
      .metadata("u16", std::uint16_t{60000})
      .metadata("i16", std::int16_t{-30000})
      .metadata("u32", std::uint32_t{4000000000u})
      .metadata("i32", std::int32_t{-2000000000})
      .metadata("u64", std::uint64_t{18000000000000000000ull})
      .metadata("i64", std::int64_t{-9000000000000000000ll})
      .metadata("int", 7)          // int -> INT32
      .metadata("long long", 8ll)  // -> INT64
      .metadata("f32", 0.1f)
      .metadata("f64", 0.1)
      .metadata("t", true)
      .metadata("f", false)
      .metadata("literal", "a literal, not a bool")
      .metadata("string", std::string("caf\xc3\xa9"))
      .metadata("view", std::string_view("view"))
      .metadata("empty", "")
      .metadata("tokens", std::vector<std::string>{"a", "", "b"})
      .metadata("u8s", std::vector<std::uint8_t>{1, 2, 255})
      .metadata("i32s", std::vector<std::int32_t>{-1, 0, 1})
      .metadata("u64s", std::vector<std::uint64_t>{})
      .metadata("f32s", std::vector<float>{0.5f, -1.5f})
      .metadata("f64s", std::vector<double>{1e300})
      .metadata("bools", std::vector<bool>{true, false, true});
  w.save(dir.file("meta.gguf"));
  const GgufFile f(dir.file("meta.gguf"));
  CHECK(f.keys().front() == "u8");
  CHECK(f.keys().size() == 25);
  CHECK(f.get<std::uint8_t>("u8") == 200);
  CHECK(f.get<std::int8_t>("i8") == -100);
  CHECK(f.get<std::uint16_t>("u16") == 60000);
  CHECK(f.get<std::int16_t>("i16") == -30000);
  CHECK(f.get<std::uint32_t>("u32") == 4000000000u);
  CHECK(f.get<std::int32_t>("i32") == -2000000000);
  CHECK(f.get<std::uint64_t>("u64") == 18000000000000000000ull);
  CHECK(f.get<std::int64_t>("i64") == -9000000000000000000ll);
  CHECK(f.get<std::int32_t>("int") == 7);
  CHECK(f.get<std::int64_t>("long long") == 8);
  CHECK(f.get<float>("f32") == 0.1f);
  CHECK(f.get<double>("f64") == 0.1);
  CHECK(f.get<bool>("t"));
  CHECK_FALSE(f.get<bool>("f"));
  CHECK(f.get<std::string>("literal") == "a literal, not a bool");
  CHECK(f.get<std::string>("string") == "caf\xc3\xa9");
  CHECK(f.get<std::string_view>("view") == "view");
  CHECK(f.get<std::string>("empty").empty());
  CHECK(f.get<std::vector<std::string>>("tokens") == std::vector<std::string>{"a", "", "b"});
  CHECK(f.get<std::vector<std::string_view>>("tokens").size() == 3);
  CHECK(f.get<std::vector<std::uint8_t>>("u8s") == std::vector<std::uint8_t>{1, 2, 255});
  CHECK(f.get<std::vector<std::int32_t>>("i32s") == std::vector<std::int32_t>{-1, 0, 1});
  CHECK(f.get<std::vector<std::uint64_t>>("u64s").empty());
  CHECK(f.get<std::vector<float>>("f32s") == std::vector<float>{0.5f, -1.5f});
  CHECK(f.get<std::vector<double>>("f64s") == std::vector<double>{1e300});
  CHECK(f.get<std::vector<bool>>("bools") == std::vector<bool>{true, false, true});
  CHECK(f.get_integer("u8") == 200);
  CHECK(f.get_integer("i64") == -9000000000000000000ll);
  CHECK(f.key_info("tokens").type_name() == "[STRING]");
  CHECK(f.key_info("u16").type_name() == "UINT16");
  CHECK(f.key_info("tokens").count == 3);
  CHECK(f.names().empty());

  // A missing key is a KeyError; a type mismatch a GgufTypeError (a FormatError) with its facts.
  CHECK_THROWS_AS(f.get<std::uint32_t>("nope"), ember::KeyError);
  CHECK_THROWS_AS(f.info("nope"), ember::KeyError);
  try {
    (void)f.get<std::uint32_t>("u16");
    FAIL("no throw");
  } catch (const ember::io::GgufTypeError& e) {
    CHECK(e.key() == "u16");
    CHECK(e.expected() == "UINT32");
    CHECK(e.actual() == "UINT16");
    CHECK(e.path() == dir.file("meta.gguf"));
    CHECK(e.offset() == f.key_info("u16").offset);
    CHECK_THAT(e.what(), Catch::Contains("metadata key 'u16' holds UINT16, not UINT32"));
  }
  CHECK_THROWS_AS(f.get<std::vector<std::uint8_t>>("u8"), ember::io::GgufTypeError);
  CHECK_THROWS_AS(f.get<std::uint8_t>("u8s"), ember::io::GgufTypeError);
  CHECK_THROWS_AS(f.get<std::string>("tokens"), ember::io::GgufTypeError);
  CHECK_THROWS_AS(f.get_integer("u64"), ember::io::GgufTypeError);  // above INT64_MAX
  CHECK_THROWS_AS(f.get_integer("f32"), ember::io::GgufTypeError);
  CHECK_THROWS_AS(f.vocabulary(), ember::KeyError);
}

TEST_CASE(
    "gguf: vocabulary() keeps repeated tokens, each id with its token, a repeat at its first id",
    "[io][gguf]") {
  ScratchDir dir;
  const std::vector<std::string> tokens = {"<unk>", "<s>", "a", "\xe2\x96\x81the", "a", "<s>"};
  const RowMatrix<float> table = ember_test::gguf_normal_table(6, 32, 5);
  GgufWriter w;
  w.metadata("tokenizer.ggml.tokens", tokens).add("token_embd.weight", table, GgmlType::Q8_0);
  w.save(dir.file("vocab.gguf"));
  const GgufFile f(dir.file("vocab.gguf"));
  const ember::io::Vocabulary v = f.vocabulary();
  CHECK(v.size() == 6);
  CHECK(v.size() == f.info("token_embd.weight").rows());
  CHECK(v.tokens() == tokens);
  CHECK(v.id("a") == 2);
  CHECK(v.id("<s>") == 1);
  CHECK(v.token(4) == "a");
  CHECK(v.id("\xe2\x96\x81the") == 3);
}

TEST_CASE("gguf: GgufWriter refuses what it cannot write and writes nothing then", "[io][gguf]") {
  ScratchDir dir;
  const RowMatrix<float> t96 = ember_test::gguf_normal_table(4, 96, 6);
  GgufWriter w;
  // A width the type's blocks do not divide: ShapeError with the facts, nothing added.
  for (const GgmlType t :
       {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    try {
      w.add("t", t96, t);
      FAIL("accepted d = 96 for " << to_string(t));
    } catch (const ember::ShapeError& e) {
      CHECK(e.dimension() == 1);
      CHECK(e.expected() == 256);
      CHECK(e.actual() == 96);
      CHECK_THAT(e.what(), Catch::Contains("96 columns, not a multiple of " +
                                           std::string(to_string(t)) + "'s block of 256"));
    }
  }
  const RowMatrix<float> t40 = ember_test::gguf_normal_table(2, 40, 1);
  const RowMatrix<float> t256 = ember_test::gguf_normal_table(1, 256, 1);
  CHECK_THROWS_AS(w.add("t", t40, GgmlType::Q8_0), ember::ShapeError);
  w.add("t", t96, GgmlType::Q8_0);                                     // 96 = 3 blocks of 32
  CHECK_THROWS_AS(w.add("t", t96, GgmlType::F32), ember::ValueError);  // duplicate name
  CHECK_THROWS_AS(w.add("", t96, GgmlType::F32), ember::ValueError);
  CHECK_THROWS_AS(w.add(std::string(64, 'x'), t96, GgmlType::F32), ember::ValueError);
  w.add(std::string(63, 'x'), t96, GgmlType::F32);
  CHECK_THROWS_AS(w.add("iq", t256, GgmlType::IQ2_XXS), ember::ValueError);
  CHECK_THROWS_AS(w.add("q81", t256, GgmlType::Q8_1), ember::ValueError);
  w.metadata("k", 1);
  CHECK_THROWS_AS(w.metadata("k", 2), ember::ValueError);
  CHECK_THROWS_AS(w.metadata("", 2), ember::ValueError);
  CHECK_THROWS_AS(w.metadata("general.alignment", std::uint32_t{48}), ember::ValueError);
  CHECK_THROWS_AS(w.metadata("general.alignment", std::uint32_t{0}), ember::ValueError);
  CHECK_THROWS_AS(w.metadata("general.alignment", std::uint64_t{64}), ember::ValueError);
  w.save(dir.file("ok.gguf"));
  const GgufFile f(dir.file("ok.gguf"));
  CHECK(f.names() == std::vector<std::string>{"t", std::string(63, 'x')});
  CHECK(f.keys() == std::vector<std::string>{"k"});

  // A non-finite value in a table stored as a block type: ValueError at save, no file.
  RowMatrix<float> bad = ember_test::gguf_normal_table(3, 64, 7);
  bad(2, 17) = std::numeric_limits<float>::quiet_NaN();
  GgufWriter wb;
  wb.add("bad", bad, GgmlType::Q4_0);
  try {
    wb.save(dir.file("bad.gguf"));
    FAIL("saved a NaN as q4_0");
  } catch (const ember::ValueError& e) {
    CHECK_THAT(e.what(),
               Catch::Contains("tensor 'bad' has a non-finite value at row 2, column 17"));
  }
  CHECK_FALSE(std::filesystem::exists(dir.file("bad.gguf")));
  // F32, F16 and BF16 store it; loading then needs allow_non_finite.
  GgufWriter wf;
  wf.add("bad", bad, GgmlType::F16);
  wf.save(dir.file("nan.gguf"));
  const GgufFile fn(dir.file("nan.gguf"));
  try {
    (void)fn.load<float>("bad");
    FAIL("loaded a NaN");
  } catch (const ember::FormatError& e) {
    CHECK_THAT(e.what(), Catch::Contains("non-finite value at row 2, column 17"));
    CHECK(e.offset() == fn.info("bad").offset + 2 * 128);
  }
  CHECK(std::isnan(fn.load<float>("bad", {.allow_non_finite = true})(2, 17)));
}

TEST_CASE("gguf: GgufWriter refuses a double beyond float's range before writing anything",
          "[io][gguf]") {
  ScratchDir dir;
  RowMatrix<double> t = ember_test::gguf_normal_table(3, 64, 8).cast<double>();
  t(0, 5) = static_cast<double>(std::numeric_limits<float>::max());  // the largest float: fine
  t(1, 6) = -std::numeric_limits<double>::infinity();                // stored as it is (F32 ...)
  const std::string path = dir.file("wide.gguf");
  {
    std::ofstream old(path, std::ios::binary);
    old << "previous contents";
  }
  for (const double big : {1e39, -1e300, std::numeric_limits<double>::max()}) {
    t(2, 17) = big;
    for (const GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0}) {
      INFO(to_string(type) << " " << big);
      GgufWriter w;
      w.add("wide", t, type);
      try {
        w.save(path);
        FAIL("stored " << big << " as " << to_string(type));
      } catch (const ember::ValueError& e) {
        CHECK_THAT(e.what(),
                   Catch::Contains("GgufWriter::save: tensor 'wide' has value") &&
                       Catch::Contains("at row 2, column 17, which overflows float (largest"));
        CHECK(e.value() == big);
      }
      CHECK(ember_test::read_bytes(path).size() == std::string("previous contents").size());
      CHECK(dir.entries() == 1);  // no temporary left either
    }
  }
  // The float table's own values and the non-finite ones of F32 are written as before.
  t(2, 17) = 1.0;
  GgufWriter w;
  w.add("wide", t, GgmlType::F32);
  w.save(path);
  const RowMatrix<float> back = GgufFile(path).load<float>("wide", {.allow_non_finite = true});
  CHECK(back(0, 5) == std::numeric_limits<float>::max());
  CHECK(std::isinf(back(1, 6)));
}

TEST_CASE("gguf: a tensor of a type ember does not decode leaves the file readable", "[io][gguf]") {
  ScratchDir dir;
  Raw r;
  r.kvs = {kv_str("general.architecture", "x")};
  r.tensors = {{"iq", {256, 1}, static_cast<std::uint32_t>(GgmlType::IQ2_XXS), 0},
               {"f", {4}, 0, 96}};
  r.data = Bytes(96 + 16, 0);
  const Bytes b = build(r);
  const std::string path = dir.file("iq.gguf");
  ember_test::write_bytes(path, b);
  const GgufFile f(path);
  CHECK(f.info("iq").type == GgmlType::IQ2_XXS);
  CHECK(f.info("iq").bytes == 66);
  CHECK(f.bytes("iq").size() == 66);
  CHECK(f.load<float>("f").cols() == 4);
  try {
    (void)f.load<float>("iq");
    FAIL("decoded iq2_xxs");
  } catch (const ember::FormatError& e) {
    CHECK(e.offset() == r.data_at);
    CHECK_THAT(e.what(), Catch::Contains("tensor 'iq' has type iq2_xxs, which ember does not "
                                         "decode"));
  }
  // Nor does a table view of it: the same error, at table().
  try {
    (void)f.table("iq");
    FAIL("a table view of iq2_xxs");
  } catch (const ember::FormatError& e) {
    CHECK(e.offset() == r.data_at);
    CHECK_THAT(e.what(), Catch::Contains("tensor 'iq' has type iq2_xxs, which ember does not "
                                         "decode"));
  }
  CHECK(f.table("f").vocab_size() == 1);
}

TEST_CASE("gguf: table() refuses the ternary types and empty tensors", "[io][gguf]") {
  ScratchDir dir;
  Raw r;
  r.tensors = {{"tq", {256, 2}, static_cast<std::uint32_t>(GgmlType::TQ1_0), 0},
               {"e", {32, 0}, 2 /* q4_0 */, 128}};
  r.data = Bytes(128, 0);
  const Bytes b = build(r);
  const std::string path = dir.file("tq.gguf");
  ember_test::write_bytes(path, b);
  const GgufFile f(path);
  CHECK_THROWS_WITH(f.table("tq"), Catch::Contains("has type tq1_0, which ember does not decode"));
  CHECK_THROWS_AS(f.table("tq"), ember::FormatError);
  CHECK_THROWS_AS(f.table("e"), ember::ShapeError);
}

TEST_CASE("gguf: empty tensors (a zero dimension, as ggml allows) load as empty tables",
          "[io][gguf]") {
  ScratchDir dir;
  Raw r;
  r.tensors = {{"e", {0, std::uint64_t{1} << 62}, 0, 0}, {"f", {32, 0}, 2 /* q4_0 */, 0}};
  const Bytes b = build(r);
  const std::string path = dir.file("empty.gguf");
  ember_test::write_bytes(path, b);
  const GgufFile f(path);
  CHECK(f.info("e").bytes == 0);
  CHECK(f.info("e").rows() == Index{1} << 62);
  const RowMatrix<float> e = f.load<float>("e");  // returns at once: no row is walked
  CHECK(e.rows() == Index{1} << 62);
  CHECK(e.cols() == 0);
  CHECK(f.load<double>("f").rows() == 0);
  CHECK(f.load<double>("f").cols() == 32);
}

TEST_CASE("gguf: every truncation of a small valid file is a FormatError inside the prefix",
          "[reliability][io][gguf]") {
  ScratchDir dir;
  Raw r = small_raw();
  const Bytes good = build(r);
  REQUIRE(good.size() == r.data_at + 64);
  ember_test::write_bytes(dir.file("good.gguf"), good);
  const GgufFile f(dir.file("good.gguf"));
  CHECK(f.load<float>("b")(1, 3) == 11.0f);
  // The last tensor ends the file: no prefix is a valid file.
  CHECK(check_every_truncation(dir, "cut.gguf", good, false, open_and_load) == good.size());
}

TEST_CASE("gguf: malformed headers are rejected with their byte offset",
          "[reliability][io][gguf]") {
  ScratchDir dir;
  auto reject = [&](Raw r, const ember_test::Expect& expect) {
    const Bytes b = build(r);
    check_rejected(dir, "bad.gguf", b, expect, open_gguf);
  };
  auto rejected_bytes = [&](const Bytes& b, const ember_test::Expect& expect) {
    check_rejected(dir, "bad.gguf", b, expect, open_gguf);
  };

  // Magic, version.
  rejected_bytes({}, {"empty file, expected the GGUF magic", 0});
  {
    Raw r = small_raw();
    r.magic = "GGML";
    reject(r, {"bad magic 'GGML', expected 'GGUF'", 0});
  }
  for (const std::uint32_t v : {0u, 1u, 4u, 0x03000000u}) {
    Raw r = small_raw();
    r.version = v;
    reject(r, {"GGUF version " + std::to_string(v) + " is not supported, expected 2 or 3", 4});
  }
  {
    Raw r = small_raw();
    r.version = 1;
    reject(r, {"version 1 is obsolete", 4});
    r.version = 0x03000000u;
    reject(r, {"big-endian files are not supported", 4});
  }
  {
    Raw r = small_raw();
    r.version = 2;  // version 2 has the same layout
    const Bytes b = build(r);
    ember_test::write_bytes(dir.file("v2.gguf"), b);
    CHECK(GgufFile(dir.file("v2.gguf")).version() == 2);
  }

  // Counts the file cannot hold (checked before anything is reserved).
  {
    Raw r = small_raw();
    r.n_tensors = std::uint64_t{1} << 62;
    reject(r, {"tensor count 4611686018427387904 cannot fit", 8});
    r.n_tensors = std::nullopt;
    r.n_kv = std::numeric_limits<std::uint64_t>::max();
    reject(r, {"metadata count 18446744073709551615 cannot fit", 16});
    r.n_kv = 3;  // one more than there are: the tensor infos are read as a third key
    reject(r, {""});
  }

  // Lengths past the end: a key, a string value, a tensor name.
  {
    Raw r = small_raw();
    Bytes k;
    put_u64(k, 1000);
    k.push_back('x');
    r.kvs.insert(r.kvs.begin(), k);
    reject(r, {"a metadata key of 1000 bytes runs past the end of the file", 24});
  }
  {
    Raw r = small_raw();
    Bytes v;
    put_u64(v, std::uint64_t{1} << 40);
    r.kvs = {kv("s", GgufValueType::STRING, v)};
    reject(r, {"a string value of 1099511627776 bytes runs past the end", 24 + 9 + 4});
  }
  {
    Raw r = small_raw();
    r.tensors[0].name = std::string(5000, 'n');  // the name's length field is kept, bytes cut
    Bytes b = build(r);
    b.resize(r.tensor_at[0] + 8 + 100);
    rejected_bytes(b, {"a tensor name of 5000 bytes runs past the end", r.tensor_at[0]});
  }

  // Huge array counts, of fixed-size values and of strings: no allocation before the check.
  {
    Raw r = small_raw();
    Bytes v;
    put_u32(v, static_cast<std::uint32_t>(GgufValueType::UINT32));
    put_u64(v, std::uint64_t{1} << 60);
    r.kvs = {kv("arr", GgufValueType::ARRAY, v)};
    reject(r, {"array 'arr' of 1152921504606846976 UINT32 values cannot fit", 24 + 11 + 4 + 4});
    Bytes s;
    put_u32(s, static_cast<std::uint32_t>(GgufValueType::STRING));
    put_u64(s, std::numeric_limits<std::uint64_t>::max());
    r.kvs = {kv("tok", GgufValueType::ARRAY, s)};
    reject(r, {"array 'tok' of 18446744073709551615 STRING values cannot fit"});
  }

  // Value types: unknown, arrays of arrays, unknown element type.
  {
    Raw r = small_raw();
    r.kvs = {kv("k", static_cast<GgufValueType>(13), {0})};
    reject(r, {"metadata key 'k' has value type 13, expected 0..12", 24 + 9});
    Bytes nested;
    put_u32(nested, static_cast<std::uint32_t>(GgufValueType::ARRAY));
    put_u64(nested, 0);
    r.kvs = {kv("k", GgufValueType::ARRAY, nested)};
    reject(r, {"metadata key 'k' is an array of arrays", 24 + 13});
    Bytes elem;
    put_u32(elem, 99);
    put_u64(elem, 0);
    r.kvs = {kv("k", GgufValueType::ARRAY, elem)};
    reject(r, {"has array element type 99, expected 0..12", 24 + 13});
  }

  // Keys: empty, duplicate.
  {
    Raw r = small_raw();
    r.kvs.push_back(kv_u32("", 1));
    reject(r, {"metadata key 2 is empty"});
    r = small_raw();
    r.kvs.push_back(kv_str("general.architecture", "again"));
    reject(r, {"duplicate metadata key 'general.architecture' (first at byte 24)"});
  }

  // Alignment: 0, not a power of two, wrong type.
  for (const std::uint32_t a : {0u, 48u, 3u}) {
    Raw r = small_raw();
    r.kvs[1] = kv_u32("general.alignment", a);
    reject(r, {"general.alignment is " + std::to_string(a) + ", expected a non-zero power of two"});
  }
  {
    Raw r = small_raw();
    r.kvs[1] =
        kv("general.alignment", GgufValueType::UINT64, ember_test::le_bytes(std::uint64_t{32}));
    reject(r, {"general.alignment holds UINT64, expected UINT32"});
    r.kvs[1] = kv_str("general.alignment", "32");
    reject(r, {"general.alignment holds STRING, expected UINT32"});
  }

  // Tensor infos: dimensions, shapes, types, names, offsets.
  {
    Raw r = small_raw();
    r.tensors[1].ne = {4, 2, 1, 1, 1};
    Bytes b = build(r);
    rejected_bytes(b, {"tensor 'b' has 5 dimensions, at most 4 allowed", r.tensor_at[1] + 9});
  }
  {
    Raw r = small_raw();
    r.tensors[1].ne = {std::uint64_t{1} << 32, std::uint64_t{1} << 32};
    const Bytes b = build(r);
    rejected_bytes(b, {"tensor 'b': dimension 1 (4294967296) makes the shape overflow 63 bits",
                       r.tensor_at[1] + 9 + 4 + 8});
    r.tensors[1].ne = {std::uint64_t{1} << 63};
    const Bytes b2 = build(r);
    rejected_bytes(
        b2, {"dimension 0 (9223372036854775808) makes the shape overflow", r.tensor_at[1] + 9 + 4});
    // Rows overflow even when ne[0] = 0 makes the element count 0.
    r.tensors[1].ne = {0, std::uint64_t{1} << 40, std::uint64_t{1} << 40};
    const Bytes b3 = build(r);
    rejected_bytes(b3, {"dimension 2 (1099511627776) makes the shape overflow"});
    // A 63-bit element count whose bytes overflow: 2^62 + 32 f32 values are 2^64 + 128 bytes,
    // which wrapped to 128 (found by the CI fuzz run).
    r.tensors[1].ne = {(std::uint64_t{1} << 62) + 32};
    r.tensors[1].type = 0;
    const Bytes b4 = build(r);
    rejected_bytes(b4, {"tensor 'b': its byte size overflows 63 bits", r.tensor_at[1] + 9 + 4 + 8});
    r.tensors[1].ne = {std::uint64_t{1} << 61, 2};  // 2^64 bytes in two rows of 2^63
    const Bytes b5 = build(r);
    rejected_bytes(b5, {"tensor 'b': its byte size overflows 63 bits"});
    r.tensors[1].ne = {std::uint64_t{1} << 61, 0};  // empty, but a row of 2^63 bytes
    const Bytes b6 = build(r);
    rejected_bytes(b6, {"tensor 'b': its byte size overflows 63 bits"});
  }
  for (const std::uint32_t type : {4u, 5u, 31u, 36u, 43u, 1000u}) {
    Raw r = small_raw();
    r.tensors[1].type = type;
    const Bytes b = build(r);
    rejected_bytes(
        b, {"tensor 'b' has type id " + std::to_string(type) + ", which ggml does not define",
            r.tensor_at[1] + 9 + 4 + 16});
  }
  {
    Raw r = small_raw();
    r.tensors[1].type = 2;  // q4_0: rows of 4 elements are not whole blocks
    const Bytes b = build(r);
    rejected_bytes(b, {"tensor 'b' has rows of 4 elements, not a multiple of q4_0's block of 32",
                       r.tensor_at[1] + 9 + 4 + 16});
  }
  {
    Raw r = small_raw();
    r.tensors[1].name = "a";
    const Bytes b = build(r);
    rejected_bytes(
        b, {"duplicate tensor name 'a' (first at byte " + std::to_string(r.tensor_at[0]) + ")",
            r.tensor_at[1]});
    r.tensors[1].name = std::string(64, 'n');
    const Bytes b2 = build(r);
    rejected_bytes(b2, {"has 64 bytes, at most 63 allowed (ggml's limit)", r.tensor_at[1]});
  }
  {
    Raw r = small_raw();
    r.tensors[1].offset = 16;  // misaligned
    const Bytes b = build(r);
    rejected_bytes(b, {"tensor 'b' has data offset 16, not a multiple of the alignment 32",
                       r.tensor_at[1] + 9 + 4 + 16 + 4});
    r.tensors[1].offset = 0;  // overlaps 'a'
    const Bytes b2 = build(r);
    rejected_bytes(b2, {"data at offset 0 overlaps tensor"});
    r.tensors[1].offset = 64;  // past the end
    const Bytes b3 = build(r);
    rejected_bytes(
        b3, {"tensor 'b' data [" + std::to_string(r.data_at + 64) +
                 ", +32) runs past the end of the " + std::to_string(b3.size()) + "-byte file",
             r.tensor_at[1]});
    r.tensors[1].offset = std::numeric_limits<std::uint64_t>::max() - 31;
    const Bytes b4 = build(r);
    rejected_bytes(b4, {"runs past the end", r.tensor_at[1]});
  }
  {
    // Overlap in the other order: 'b' first in the data, 'a' inside it.
    Raw r = small_raw();
    r.tensors[0].offset = 32;
    r.tensors[1].offset = 0;
    r.tensors[1].ne = {8, 2};  // 64 bytes: [0, 64) contains [32, 64)
    r.data = Bytes(64, 0);
    const Bytes b = build(r);
    rejected_bytes(b, {"tensor 'a' data at offset 32 overlaps tensor 'b' [0, 64)", r.tensor_at[0]});
  }
  {
    // Gaps and an order other than the header's are accepted (gguf-py reads them).
    Raw r = small_raw();
    r.tensors[0].offset = 64;
    r.tensors[1].offset = 0;
    r.data = Bytes(96, 0);
    const Bytes b = build(r);
    ember_test::write_bytes(dir.file("reordered.gguf"), b);
    const GgufFile f(dir.file("reordered.gguf"));
    CHECK(f.info("a").offset == r.data_at + 64);
  }
  {
    // The data section's start (after alignment padding) past the end of the file.
    Raw r = small_raw();
    r.data.clear();
    Bytes b = build(r);
    b.resize(r.tensor_at[1] + 9 + 4 + 16 + 4 + 8 + 1);  // one padding byte, not 32-aligned
    rejected_bytes(b, {"the data section would start at byte"});
  }
}

TEST_CASE("gguf: the committed tests/data/tiny.gguf is what GgufWriter writes", "[io][gguf]") {
  // To regenerate after a deliberate format change: EMBER_WRITE_FIXTURES=1 ember_tests
  // "[gguf]" writes it into tests/data/.
  ScratchDir dir;
  ember_test::write_tiny_gguf(dir.file("tiny.gguf"));
  const auto written = ember_test::read_bytes(dir.file("tiny.gguf"));
  if (std::getenv("EMBER_WRITE_FIXTURES") != nullptr) {
    ember_test::write_bytes(ember_test::data_file("tiny.gguf"), written);
  }
  CHECK(written == ember_test::read_bytes(ember_test::data_file("tiny.gguf")));
  const GgufFile f(ember_test::data_file("tiny.gguf"));
  CHECK(f.names() == std::vector<std::string>{"token_embd.weight", "position_embd.weight",
                                              "output_norm.weight", "output.weight"});
  CHECK(f.vocabulary().id("the") == 3);
  CHECK(f.vocabulary().token(6) == "the");
  const ember_test::TinyGgufTables t;
  CHECK(f.load<double>("output_norm.weight") == t.norm);
  CHECK((f.load<float>("token_embd.weight") - t.token_embd).cwiseAbs().maxCoeff() < 0.01f);
}

TEST_CASE("gguf: a missing tensor's KeyError names the file's closest tensors", "[io][gguf]") {
  ScratchDir dir;
  const RowMatrix<float> t = ember_test::gguf_normal_table(2, 32, 1);
  GgufWriter w;
  w.add("token_embd.weight", t, GgmlType::F32)
      .add("output_norm.weight", t, GgmlType::F32)
      .add("blk.0.attn_q.weight", t, GgmlType::F32);
  w.save(dir.file("names.gguf"));
  const GgufFile f(dir.file("names.gguf"));
  try {
    static_cast<void>(f.info("token_embd.weigth"));
    FAIL("no throw");
  } catch (const ember::KeyError& e) {
    CHECK(e.key() == "token_embd.weigth");
    CHECK_THAT(e.what(), Catch::StartsWith("GgufFile: no tensor 'token_embd.weigth' in " +
                                           dir.file("names.gguf") +
                                           "; the closest it has: 'token_embd.weight', "));
  }
}

TEST_CASE("a missing GGUF file is a FileError naming the call that opened it", "[io][gguf]") {
  ember_test::check_missing_file("io::GgufFile", [](const std::string& p) { const GgufFile f(p); });
}

TEST_CASE("has_key answers for metadata keys only, exactly as stored", "[io][gguf]") {
  ScratchDir dir;
  const RowMatrix<float> t = RowMatrix<float>::Ones(2, 32);
  GgufWriter w;
  w.metadata("general.architecture", "llama")
      .metadata("llama.context_length", std::uint32_t{2048})
      .add("token_embd.weight", t, GgmlType::F32);
  w.save(dir.file("keys.gguf"));
  const GgufFile f(dir.file("keys.gguf"));
  CHECK(f.has_key("general.architecture"));
  CHECK(f.has_key(std::string("llama.context_length")));
  CHECK_FALSE(f.has_key("general.alignment"));  // the default alignment is not stored
  CHECK_FALSE(f.has_key("token_embd.weight"));  // a tensor, not a key
  CHECK_FALSE(f.has_key("General.Architecture"));
  CHECK_FALSE(f.has_key("general.architectur"));
  CHECK_FALSE(f.has_key(""));
  for (const std::string& k : f.keys()) CHECK(f.has_key(k));
}
