// The malformed-file corpus: for every loader, files truncated at every byte and at each section
// boundary, header lengths past the end, overlapping and gapped offsets, shapes whose product
// overflows 64 bits, wrong dtype sizes, non-UTF-8 and empty words, NaN and Inf, a 0-byte file, a
// directory, a FIFO, a dangling symlink and an unreadable path. Each must be a FormatError naming
// the file and the byte offset or line; none may crash, hang or allocate more than the file
// justifies (the ASan build turns a huge allocation into a failure, see allocator limits in
// docs/reliability.md).
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "ember/io/npy.hpp"
#include "ember/io/vocabulary.hpp"
#include "ember/io/word2vec.hpp"
#if defined(EMBER_TEST_HAVE_IO)
#include "ember/io/safetensors.hpp"
#endif
#include "support/io_files.hpp"
#include "support/io_malformed.hpp"

using ember_test::Bytes;
using ember_test::bytes_of;
using ember_test::cat;
using ember_test::check_every_truncation;
using ember_test::check_rejected;
using ember_test::Expect;
using ember_test::le_bytes;
using ember_test::ScratchDir;

namespace {

const float kNaNf = std::numeric_limits<float>::quiet_NaN();
const float kInff = std::numeric_limits<float>::infinity();

/// A .npy file: magic + version, header length, header text padded to `pad_to`, data.
Bytes npy(const std::string& dict, const Bytes& data, int version = 1) {
  Bytes out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<unsigned char>(version), 0};
  std::string h = dict;
  const std::size_t prefix = version == 1 ? 10 : 12;
  while ((prefix + h.size() + 1) % 64 != 0) h.push_back(' ');
  h.push_back('\n');
  if (version == 1) {
    ember_test::append(out, le_bytes(static_cast<std::uint16_t>(h.size())));
  } else {
    ember_test::append(out, le_bytes(static_cast<std::uint32_t>(h.size())));
  }
  ember_test::append(out, bytes_of(h));
  ember_test::append(out, data);
  return out;
}

const std::string kDict23 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

auto load_npy_f = [](const std::string& p) { (void)ember::io::load_npy<float>(p); };
auto map_npy_d = [](const std::string& p) { (void)ember::io::map_npy<double>(p); };
auto load_w2v_bin = [](const std::string& p) { (void)ember::io::load_word2vec_binary<float>(p); };
auto load_w2v_txt = [](const std::string& p) { (void)ember::io::load_word2vec_text<float>(p); };
auto load_glove = [](const std::string& p) { (void)ember::io::load_glove<float>(p); };
auto load_vocab = [](const std::string& p) { (void)ember::io::load_vocabulary(p); };

}  // namespace

TEST_CASE("npy: every truncation, section boundary and header field is rejected with its offset",
          "[reliability][io][npy]") {
  ScratchDir dir;
  const Bytes data = ember_test::float_bytes({1, 2, 3, 4, 5, 6});
  const Bytes good = npy(kDict23, data);
  constexpr std::uint64_t kData = 128;  // numpy pads the header so the data starts at 128
  REQUIRE(good.size() == kData + 24);
  ember_test::write_bytes(dir.file("good.npy"), good);
  REQUIRE_NOTHROW(load_npy_f(dir.file("good.npy")));

  // Every prefix is rejected (a .npy has no optional tail) with an offset inside the prefix.
  CHECK(check_every_truncation(dir, "cut.npy", good, false, load_npy_f) == good.size());
  CHECK(check_every_truncation(dir, "cut_map.npy", good, false, map_npy_d) == good.size());

  // Section boundaries: 0 bytes, after the magic, after the version, after the header length,
  // after the header (no data), in the middle of the data.
  check_rejected(dir, "empty.npy", {}, {"empty file", 0}, load_npy_f);
  check_rejected(dir, "magic.npy", Bytes(good.begin(), good.begin() + 6),
                 {"truncated .npy preamble (6 bytes", 6}, load_npy_f);
  check_rejected(dir, "version.npy", Bytes(good.begin(), good.begin() + 8),
                 {"truncated .npy preamble (8 bytes", 8}, load_npy_f);
  check_rejected(dir, "hlen.npy", Bytes(good.begin(), good.begin() + 10),
                 {"header length 118 runs past the end of the 10-byte file", 8}, load_npy_f);
  check_rejected(dir, "nodata.npy",
                 Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(kData)),
                 {"needs 24 data bytes but the file has 0 (truncated)", kData}, load_npy_f);
  check_rejected(dir, "halfdata.npy",
                 Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(kData) + 10),
                 {"needs 24 data bytes but the file has 10 (truncated)", kData}, load_npy_f);

  // Header length past the end, for versions 1 and 2.
  Bytes past = good;
  past[8] = 0xff;
  past[9] = 0xff;
  check_rejected(dir, "hlen_past.npy", past, {"header length 65535 runs past the end", 8},
                 load_npy_f);
  Bytes past2 = npy(kDict23, data, 2);
  past2[8] = past2[9] = past2[10] = past2[11] = 0xff;
  check_rejected(dir, "hlen_past_v2.npy", past2, {"header length 4294967295 runs past", 8},
                 load_npy_f);

  // Shapes whose element count or byte size overflows 64 bits (nothing is allocated).
  check_rejected(dir, "overflow.npy",
                 npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, "
                     "4294967296), }",
                     data),
                 {"shape (4294967296, 4294967296) overflows the size of the data", 10}, load_npy_f);
  check_rejected(dir, "overflow_bytes.npy",
                 npy("{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952, "
                     "1), }",
                     data),
                 {"overflows the size of the data", 10}, load_npy_f);
  check_rejected(
      dir, "too_big.npy",
      npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000, 1000), }", data),
      {"needs 4000000000000 data bytes but the file has 24 (truncated)", kData}, load_npy_f);

  // Wrong dtype sizes: the data is sized for another itemsize, or the dtype is not a float.
  check_rejected(dir, "f8_short.npy",
                 npy("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", data),
                 {"needs 48 data bytes but the file has 24", kData}, load_npy_f);
  check_rejected(dir, "f2_long.npy",
                 npy("{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3), }", data),
                 {"needs 12 data bytes but the file has 24", kData}, load_npy_f);
  check_rejected(dir, "i4.npy",
                 npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }", data),
                 {"unsupported dtype '<i4'"}, load_npy_f);
  check_rejected(dir, "f3.npy",
                 npy("{'descr': '<f3', 'fortran_order': False, 'shape': (2, 3), }", data),
                 {"unsupported dtype '<f3'"}, load_npy_f);

  // Header syntax.
  check_rejected(dir, "unterminated.npy", npy("{'descr': '<f4", data), {"unterminated string"},
                 load_npy_f);
  check_rejected(dir, "negative.npy",
                 npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }", data),
                 {"shape entries must be non-negative integers"}, load_npy_f);
  check_rejected(dir, "3d.npy",
                 npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 3), }", data),
                 {"expected a 2-D array, got shape (1, 2, 3)", 10}, load_npy_f);

  // NaN and Inf: the offset is the value's byte offset.
  check_rejected(dir, "nan.npy", npy(kDict23, ember_test::float_bytes({1, 2, 3, 4, kNaNf, 6})),
                 {"non-finite value at row 1, column 1", kData + 16}, load_npy_f);
  check_rejected(dir, "inf.npy", npy(kDict23, ember_test::float_bytes({-kInff, 2, 3, 4, 5, 6})),
                 {"non-finite value at row 0, column 0", kData}, map_npy_d);
}

#if defined(EMBER_TEST_HAVE_IO)
namespace {

/// A safetensors file from a header text and the data bytes.
Bytes safetensors(const std::string& header, const Bytes& data) {
  return cat({le_bytes(static_cast<std::uint64_t>(header.size())), bytes_of(header), data});
}

auto open_st = [](const std::string& p) {
  const ember::io::SafetensorsFile f(p);
  for (const auto& name : f.names()) (void)f.load<float>(name);
};

}  // namespace

TEST_CASE("safetensors: truncations, offsets, shapes and dtypes are rejected with their offset",
          "[reliability][io][safetensors]") {
  ScratchDir dir;
  const std::string h = R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
                        R"("b":{"dtype":"F32","shape":[1,2],"data_offsets":[24,32]}})";
  const Bytes data = ember_test::float_bytes({1, 2, 3, 4, 5, 6, 7, 8});
  const Bytes good = safetensors(h, data);
  ember_test::write_bytes(dir.file("good.safetensors"), good);
  REQUIRE_NOTHROW(open_st(dir.file("good.safetensors")));
  const std::uint64_t data_at = 8 + h.size();

  CHECK(check_every_truncation(dir, "cut.safetensors", good, false, open_st) == good.size());

  // Section boundaries: 0 bytes, inside the length, after the length, inside the header, after
  // the header (no data), inside the data.
  check_rejected(dir, "empty.st", {}, {"empty file", 0}, open_st);
  check_rejected(dir, "len4.st", Bytes(good.begin(), good.begin() + 4), {"truncated: 4 bytes", 4},
                 open_st);
  check_rejected(dir, "len8.st", Bytes(good.begin(), good.begin() + 8),
                 {"runs past the end of the 8-byte file", 0}, open_st);
  check_rejected(dir, "header_half.st", Bytes(good.begin(), good.begin() + 8 + 20),
                 {"runs past the end", 0}, open_st);
  check_rejected(
      dir, "nodata.st", Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(data_at)),
      {"tensors cover 32 data bytes but the data section has 0 (truncated)", data_at}, open_st);
  check_rejected(dir, "halfdata.st",
                 Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(data_at) + 20),
                 {"data section has 20 (truncated)", data_at + 20}, open_st);

  // Header length past the end and above the 100 MB limit.
  Bytes past = good;
  past[0] = 0xff;
  check_rejected(dir, "len_past.st", past, {"runs past the end", 0}, open_st);
  check_rejected(dir, "len_huge.st", cat({le_bytes(~std::uint64_t{0}), bytes_of("{}")}),
                 {"exceeds the limit of 100000000 bytes", 0}, open_st);
  check_rejected(dir, "not_json.st", safetensors("{\"a\":", {}), {"header is not valid JSON"},
                 open_st);
  // A number beyond double's range: nlohmann throws out_of_range, not parse_error (fuzz find).
  check_rejected(
      dir, "number_overflow.st",
      safetensors(R"({"a":{"dtype":"F32","shape":[1e999],"data_offsets":[0,4]}})", Bytes(4, 0)),
      {"header is not valid JSON: [json.exception.out_of_range.406] number overflow", 8}, open_st);
  check_rejected(dir, "not_brace.st", safetensors("[1,2]", {}), {"does not start with '{'", 8},
                 open_st);

  // Overlapping and gapped offsets.
  check_rejected(dir, "overlap.st",
                 safetensors(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
                             R"("b":{"dtype":"F32","shape":[1,2],"data_offsets":[16,24]}})",
                             data),
                 {"tensor 'b' starts at data offset 16 and overlaps the previous tensor"}, open_st);
  const std::string gap = R"({"a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},)"
                          R"("b":{"dtype":"F32","shape":[1,2],"data_offsets":[16,24]}})";
  check_rejected(dir, "gap.st", safetensors(gap, Bytes(24, 0)),
                 {"tensor 'b' starts at data offset 16 leaving a gap after the previous tensor",
                  8 + gap.size() + 8},
                 open_st);
  check_rejected(dir, "backwards.st",
                 safetensors(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", {}),
                 {"data_offsets end before they begin", 8}, open_st);

  // Shapes whose product overflows 64 bits, and wrong dtype sizes.
  check_rejected(dir, "overflow.st",
                 safetensors(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,2],)"
                             R"("data_offsets":[0,8]}})",
                             Bytes(8, 0)),
                 {"tensor 'a': shape overflows", 8}, open_st);
  check_rejected(dir, "overflow_bytes.st",
                 safetensors(R"({"a":{"dtype":"F64","shape":[2305843009213693952,1],)"
                             R"("data_offsets":[0,8]}})",
                             Bytes(8, 0)),
                 {"tensor 'a': shape overflows", 8}, open_st);
  check_rejected(
      dir, "dtype_size.st",
      safetensors(R"({"a":{"dtype":"F64","shape":[2,3],"data_offsets":[0,24]}})", Bytes(24, 0)),
      {"data_offsets span 24 bytes but shape x F64 needs 48", 8}, open_st);
  check_rejected(
      dir, "dtype_unknown.st",
      safetensors(R"({"a":{"dtype":"F128","shape":[2,3],"data_offsets":[0,24]}})", Bytes(24, 0)),
      {"unknown dtype 'F128'", 8}, open_st);
  const std::string i32 = R"({"a":{"dtype":"I32","shape":[2,3],"data_offsets":[0,24]}})";
  check_rejected(dir, "dtype_int.st", safetensors(i32, Bytes(24, 0)),
                 {"tensor 'a' has dtype I32, expected F16, BF16, F32 or F64", 8 + i32.size()},
                 open_st);

  // Non-UTF-8 in a tensor name (JSON strings must be UTF-8), NaN and Inf.
  check_rejected(dir, "utf8.st",
                 safetensors("{\"\xff\xfe\":{\"dtype\":\"F32\",\"shape\":[1,1],"
                             "\"data_offsets\":[0,4]}}",
                             Bytes(4, 0)),
                 {"header is not valid JSON"}, open_st);
  const std::string f32 = R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";
  check_rejected(dir, "nan.st", safetensors(f32, ember_test::float_bytes({1, 2, 3, kNaNf, 5, 6})),
                 {"tensor 'a': non-finite value at row 1, column 0", 8 + f32.size() + 12}, open_st);
  check_rejected(dir, "inf.st", safetensors(f32, ember_test::float_bytes({1, 2, 3, 4, 5, kInff})),
                 {"non-finite value at row 1, column 2", 8 + f32.size() + 20}, open_st);
}
#endif

TEST_CASE("word2vec binary: truncations, sizes, words and values are rejected with their offset",
          "[reliability][io][word2vec]") {
  ScratchDir dir;
  auto record = [](const std::string& w, std::initializer_list<float> v) {
    return cat({bytes_of(w + " "), ember_test::float_bytes(v)});
  };
  const Bytes good = cat({bytes_of("2 3\n"), record("cat", {1, 2, 3}), record("dog", {4, 5, 6})});
  ember_test::write_bytes(dir.file("good.bin"), good);
  REQUIRE_NOTHROW(load_w2v_bin(dir.file("good.bin")));

  // gensim layout (no '\n' after a record): every prefix is incomplete.
  CHECK(check_every_truncation(dir, "cut.bin", good, false, load_w2v_bin) == good.size());

  check_rejected(dir, "empty.bin", {}, {"empty file", 0}, load_w2v_bin);
  check_rejected(dir, "header_only.bin", bytes_of("2 3"), {"no end of line after the header", 3},
                 load_w2v_bin);
  check_rejected(dir, "no_records.bin", bytes_of("2 3\n"),
                 {"header claims 2 vectors of dimension 3, more than the 4-byte file", 0},
                 load_w2v_bin);
  check_rejected(dir, "word_cut.bin",
                 cat({bytes_of("2 3\n"), record("cat", {1, 2, 3}), bytes_of("dogdogdogdogdog")}),
                 {"record 1: file ends inside the word", 20}, load_w2v_bin);
  // Sizes: a V x d product that overflows, a dimension past int32.
  check_rejected(dir, "overflow.bin", bytes_of("4611686018427387904 4\nxx"), {"more than the", 0},
                 load_w2v_bin);
  check_rejected(dir, "dim.bin", bytes_of("1 99999999999\nxx"), {"absurd dimension", 1, true},
                 load_w2v_bin);
  // Words: empty, non-UTF-8, duplicate.
  check_rejected(
      dir, "empty_word.bin",
      cat({bytes_of("2 3\n"), record("cat", {1, 2, 3}), record("", {4, 5, 6}), bytes_of("x")}),
      {"record 1: empty word", 20}, load_w2v_bin);
  check_rejected(dir, "utf8.bin",
                 cat({bytes_of("2 3\n"), record("cat", {1, 2, 3}), record("\xc3\x28", {4, 5, 6})}),
                 {"record 1: word '\\xc3(' is not valid UTF-8", 20}, load_w2v_bin);
  check_rejected(dir, "dup.bin",
                 cat({bytes_of("2 3\n"), record("cat", {1, 2, 3}), record("cat", {4, 5, 6})}),
                 {"record 1: duplicate word 'cat'", 20}, load_w2v_bin);
  // NaN and Inf: the offset is the value's.
  check_rejected(dir, "nan.bin",
                 cat({bytes_of("2 3\n"), record("cat", {1, 2, 3}), record("dog", {4, kNaNf, 6})}),
                 {"record 1: non-finite value at column 1 of word 'dog'", 20 + 4 + 4},
                 load_w2v_bin);
  check_rejected(dir, "inf.bin",
                 cat({bytes_of("2 3\n"), record("cat", {kInff, 2, 3}), record("dog", {4, 5, 6})}),
                 {"record 0: non-finite value at column 0", 8}, load_w2v_bin);
}

TEST_CASE("word2vec text and GloVe: bad lines are rejected with their line number",
          "[reliability][io][word2vec]") {
  ScratchDir dir;
  const std::string good = "2 3\ncat 1 2 3\ndog 4 5 6\n";
  // Truncation of a text file may leave a valid file (at a line end); everything else is a
  // FormatError naming a line, never a crash.
  const std::size_t w2v_rejected =
      check_every_truncation(dir, "cut.txt", bytes_of(good), true, load_w2v_txt);
  CHECK(w2v_rejected >= good.size() - 1);  // only "minus the final newline" can load
  const std::string glove_good = "cat 1 2 3\ndog 4 5 6\n";
  check_every_truncation(dir, "cut_glove.txt", bytes_of(glove_good), true, load_glove);

  auto text = [&](const std::string& name, const std::string& t, const Expect& e, auto load) {
    check_rejected(dir, name, bytes_of(t), e, load);
  };
  // Section boundaries: no file content, header only, after the first record.
  text("empty.txt", "", {"empty file", 1, true}, load_w2v_txt);
  text("header.txt", "2 3\n", {"more than the 4-byte file can hold", 1, true}, load_w2v_txt);
  text("one.txt", "2 3\ncat 1.000 2.000 3.000\n",
       {"file ends after 1 of 2 vectors (truncated)", 3, true}, load_w2v_txt);
  text("overflow.txt", "4611686018427387904 2\n", {"more than the", 1, true}, load_w2v_txt);
  text("absurd_dim.txt", "1 4294967296\n", {"absurd dimension", 1, true}, load_w2v_txt);
  text("few.txt", "2 3\ncat 1 2 3\ndog 4 5\n", {"expected a word and 3 values", 3, true},
       load_w2v_txt);
  text("nan.txt", "2 3\ncat 1 2 3\ndog 4 nan 6\n", {"non-finite value nan at column 1", 3, true},
       load_w2v_txt);
  text("inf.txt", "2 3\ncat 1 2 -inf\ndog 4 5 6\n", {"non-finite value -inf at column 2", 2, true},
       load_w2v_txt);
  text("utf8.txt", "2 3\ncat 1 2 3\n\xed\xa0\x80 4 5 6\n", {"is not valid UTF-8", 3, true},
       load_w2v_txt);
  text("empty_word.txt", "2 3\ncat 1 2 3\n 4 5 6\n", {"expected a word and 3 values", 3, true},
       load_w2v_txt);
  text("glove_empty.txt", "", {"empty file", 1, true}, load_glove);
  text("glove_ragged.txt", "cat 1 2 3\ndog 4 5\n", {"expected a word and 3 values", 2, true},
       load_glove);
  text("glove_nan.txt", "cat 1 2 3\ndog 4 5 nan\n", {"non-finite value nan", 2, true}, load_glove);
  text("glove_utf8.txt", "cat 1 2 3\n\xf5\x80 4 5 6\n", {"not valid UTF-8", 2, true}, load_glove);
  text("glove_gap.txt", "cat 1 2 3\n\ndog 4 5 6\n", {"empty line", 2, true}, load_glove);
}

TEST_CASE("vocabulary: empty files and lines, bad UTF-8 and duplicates name their line",
          "[reliability][io][vocabulary]") {
  ScratchDir dir;
  check_every_truncation(dir, "cut.txt", bytes_of("<unk>\nthe\ncat\n"), true, load_vocab);
  auto text = [&](const std::string& name, const std::string& t, const Expect& e) {
    check_rejected(dir, name, bytes_of(t), e, load_vocab);
  };
  text("empty.txt", "", {"empty file, expected one token per line", 1, true});
  text("blank.txt", "a\n\nb\n", {"empty token", 2, true});
  text("crlf_blank.txt", "a\r\n\r\nb\r\n", {"empty token", 2, true});
  text("utf8.txt", "a\nb\n\xc0\x80\n", {"token '\\xc0\\x80' is not valid UTF-8", 3, true});
  text("dup.txt", "a\nb\na\n", {"duplicate token 'a' (first on line 1)", 3, true});
}

TEST_CASE("every loader rejects a directory, a FIFO, a dangling symlink and a missing path",
          "[reliability][io]") {
  ScratchDir dir;
  const std::string sub = dir.file("a_directory");
  std::filesystem::create_directory(sub);
  const std::string fifo = dir.file("a_fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string dangling = dir.file("dangling");
  std::filesystem::create_symlink(dir.file("nowhere"), dangling);
  const std::string regular = dir.file("regular.txt");
  ember_test::write_text(regular, "x\n");
  const std::string under_file = regular + "/child";  // a path whose parent is a file: ENOTDIR

  std::vector<std::pair<std::string, std::function<void(const std::string&)>>> loaders = {
      {"load_npy", load_npy_f},
      {"map_npy", map_npy_d},
      {"load_word2vec_binary", load_w2v_bin},
      {"load_word2vec_text", load_w2v_txt},
      {"load_glove", load_glove},
      {"load_vocabulary", load_vocab},
  };
#if defined(EMBER_TEST_HAVE_IO)
  loaders.emplace_back("SafetensorsFile", open_st);
#endif
  const std::vector<std::pair<std::string, std::string>> paths = {
      {sub, "not a regular file (it is a directory)"},
      {fifo, "not a regular file (it is a FIFO)"},  // opened without blocking
      {dangling, "No such file or directory"},
      {dir.file("missing"), "No such file or directory"},
      {under_file, "Not a directory"},
  };
  for (const auto& [name, load] : loaders) {
    for (const auto& [path, fragment] : paths) {
      INFO(name << " on " << path);
      try {
        load(path);
        FAIL("accepted");
      } catch (const ember::FormatError& e) {
        CHECK(e.path() == path);
        CHECK(e.offset() == 0);
        // "<the public call>: cannot open "<path>": <why>"
        CHECK_THAT(e.what(),
                   Catch::StartsWith("io::" + name + ": cannot open \"" + path + "\": ") &&
                       Catch::EndsWith(fragment));
      }
    }
  }
}

TEST_CASE("an unreadable file is a FormatError, or readable only with root's override",
          "[reliability][io]") {
  // chmod 000 stops every user but root, whose CAP_DAC_OVERRIDE reads anyway: as root the load
  // must then simply succeed (the file is valid), otherwise it must be "Permission denied".
  ScratchDir dir;
  const std::string p = dir.file("locked.txt");
  ember_test::write_text(p, "a\nb\n");
  REQUIRE(::chmod(p.c_str(), 0) == 0);
  if (::geteuid() == 0) {
    CHECK(ember::io::load_vocabulary(p).size() == 2);
  } else {
    CHECK_THROWS_MATCHES(ember::io::load_vocabulary(p), ember::FormatError,
                         Catch::Matchers::Message("io::load_vocabulary: cannot open \"" + p +
                                                  "\": Permission denied"));
  }
}

TEST_CASE("a path that cannot be read is a FileError with the system's error, still a FormatError",
          "[reliability][io]") {
  ScratchDir dir;
  const std::string sub = dir.file("a_directory");
  std::filesystem::create_directory(sub);
  const std::vector<std::pair<std::string, std::error_code>> paths = {
      {dir.file("missing"), std::make_error_code(std::errc::no_such_file_or_directory)},
      {sub, std::make_error_code(std::errc::is_a_directory)},
  };
  for (const auto& [path, code] : paths) {
    INFO(path);
    try {
      static_cast<void>(ember::io::load_vocabulary(path));
      FAIL("accepted");
    } catch (const ember::FileError& e) {
      CHECK(e.path() == path);
      CHECK(e.offset() == 0);
      CHECK(e.code() == code);
    }
    CHECK_THROWS_AS(ember::io::load_npy<float>(path), ember::FormatError);
  }
}
