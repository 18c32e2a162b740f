// Tests of ember/io/keyed_checkpoint.hpp: round trips of every keyed layer, resume bit-identity
// (N + M steps straight = N, save, load, M) for every optimizer and policy, loads into another
// capacity, corrupted and mismatched files (FormatError naming file and field, nothing loaded),
// and a failed save that leaves the old file.
#include "ember/io/keyed_checkpoint.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <ember/io/detail/atomic_write.hpp>
#include <ember/optim.hpp>

#include "support/error_checks.hpp"
#include "support/io_files.hpp"
#include "support/safetensors_metadata.hpp"

namespace {

using ember::Index;
using ember::KeyedBatch;
using ember::KeyedEmbedding;
using ember::KeyedOptions;
using ember::RowMatrix;
using Keys = std::vector<std::uint64_t>;

/// A stream of batches over a key space larger than the capacity (so rows are evicted and
/// reused), with scores for the score policy.
struct Batches {
  std::mt19937_64 rng;
  explicit Batches(std::uint64_t seed) : rng(seed) {}
  Keys next(Index n, std::uint64_t space) {
    std::uniform_int_distribution<std::uint64_t> pick(0, space - 1);
    Keys k(static_cast<std::size_t>(n));
    for (auto& x : k) x = ember::detail::mix_key(pick(rng));
    return k;
  }
};

RowMatrix<float> grad_of(Index n, Index d, std::int64_t step) {
  RowMatrix<float> g(n, d);
  for (Index i = 0; i < g.size(); ++i)
    g.data()[i] = 0.05f * static_cast<float>((i + step) % 9) - 0.2f;
  return g;
}

/// Trains steps [from, to) of a deterministic stream on emb with opt (stream drawn from `seed`
/// advanced to `from`).
template <class Opt>
void train(KeyedEmbedding<float>& emb, Opt& opt, std::int64_t from, std::int64_t to) {
  for (std::int64_t s = from; s < to; ++s) {
    Batches b(1000 + static_cast<std::uint64_t>(s));
    const Keys keys = b.next(9, 40);
    std::vector<double> scores;
    if (emb.options().index.policy == ember::EvictionPolicy::score)
      for (std::size_t i = 0; i < keys.size(); ++i)
        scores.push_back(static_cast<double>((keys[i] >> 7) % 5));
    const KeyedBatch batch = emb.map(keys, s, scores);
    if (s % 2 == 0) {
      emb.backward_step(batch, grad_of(9, emb.d_model(), s), opt);
    } else {
      ember::SparseRowGrad<float> g;
      emb.backward(batch, grad_of(9, emb.d_model(), s), g);
      emb.step(opt, g);
    }
  }
}

std::vector<ember::KeyEntry> entries(const KeyedEmbedding<float>& e) {
  return {e.index().begin(), e.index().end()};
}

template <class Opt>
void check_resume(const KeyedOptions& o, const Opt& prototype, const std::string& path) {
  KeyedEmbedding<float> straight(16, 4, o), first(16, 4, o);
  Opt a = prototype, b = prototype;
  train(straight, a, 0, 14);
  train(first, b, 0, 8);
  ember::io::save_keyed(path, first, &b);
  Opt c = prototype;
  KeyedEmbedding<float> resumed = ember::io::load_keyed<float>(path, &c);
  CHECK(entries(resumed) == entries(first));
  CHECK(resumed.table().weight() == first.table().weight());
  train(resumed, c, 8, 14);
  CHECK(entries(resumed) == entries(straight));
  CHECK(resumed.table().weight() == straight.table().weight());
  CHECK(c.step_count() == a.step_count());
  CHECK(resumed.eviction_log().size() == straight.eviction_log().size());
}

}  // namespace

TEST_CASE("training N steps, saving, loading and training M more gives the bits of N + M",
          "[keyed_checkpoint]") {
  ember_test::ScratchDir dir;
  const std::string path = dir.file("resume.safetensors");
  SECTION("lru, Adam") {
    check_resume({.index = {.policy = ember::EvictionPolicy::lru}, .seed = 1},
                 ember::optim::Adam<float>({.lr = 0.05}), path);
  }
  SECTION("decayed lfu with admission and a halving sketch, SGD with momentum") {
    check_resume({.index = {.policy = ember::EvictionPolicy::lfu,
                            .min_count = 2,
                            .lfu_half_life = 3,
                            .sketch_width = 64,
                            .sketch_half_life = 4},
                  .seed = 2},
                 ember::optim::SGD<float>({.lr = 0.1, .momentum = 0.9}), path);
  }
  SECTION("scores, a shared fallback row, row-wise Adagrad") {
    check_resume({.index = {.policy = ember::EvictionPolicy::score, .min_count = 3},
                  .fallback = ember::KeyFallback::shared_row,
                  .seed = 3},
                 ember::optim::RowwiseAdagrad<float>({.lr = 0.1}), path);
  }
  SECTION("AdamW with per-row steps") {
    check_resume({.seed = 4},
                 ember::optim::Adam<float>(
                     {.lr = 0.05, .weight_decay = 0.01, .decoupled = true, .per_row_steps = true}),
                 path);
  }
}

TEST_CASE("a checkpoint loads into another capacity as resize would", "[keyed_checkpoint]") {
  ember_test::ScratchDir dir;
  const std::string path = dir.file("cap.safetensors");
  KeyedEmbedding<float> emb(16, 3, {.index = {.policy = ember::EvictionPolicy::lru}});
  ember::optim::Adam<float> adam({.lr = 0.05});
  train(emb, adam, 0, 6);
  ember::io::save_keyed(path, emb, &adam);
  ember::optim::Adam<float> big_opt({.lr = 0.05});
  const KeyedEmbedding<float> big = ember::io::load_keyed<float>(path, &big_opt, {.capacity = 40});
  CHECK(big.capacity() == 40);
  CHECK(big.size() == emb.size());
  for (const ember::KeyEntry& e : emb.index()) {
    CHECK(big.index().find(e.key) == e.row);  // growing keeps every row
    CHECK(big.forward(Keys{e.key}) == emb.forward(Keys{e.key}));
  }
  ember::optim::Adam<float> small_opt({.lr = 0.05});
  const KeyedEmbedding<float> small =
      ember::io::load_keyed<float>(path, &small_opt, {.capacity = 5});
  KeyedEmbedding<float> resized = emb;
  ember::optim::Adam<float> resized_opt = adam;
  resized.resize(5, resized_opt);
  CHECK(entries(small) == entries(resized));
  CHECK(small.table().weight() == resized.table().weight());
  for (const ember::KeyEntry& e : small.index())
    CHECK(small_opt.exp_avg(e.row) == resized_opt.exp_avg(e.row));
}

TEST_CASE("keyed bags and keyed table-batched bags round-trip", "[keyed_checkpoint]") {
  ember_test::ScratchDir dir;
  ember::KeyedEmbeddingBag<float> bag(8, 2, ember::BagMode::mean, {.seed = 9});
  ember::optim::SGD<float> sgd({.lr = 0.1, .momentum = 0.5});
  const Keys keys{3, 4, 3, 5};
  const std::vector<int> offsets{0, 2};
  const KeyedBatch b = bag.map(keys, 0);
  bag.backward_step(b, offsets, grad_of(2, 2, 0), sgd);
  ember::io::save_keyed(dir.file("bag.safetensors"), bag, &sgd);
  ember::optim::SGD<float> sgd2({.lr = 0.1, .momentum = 0.5});
  const auto back = ember::io::load_keyed_bag<float>(dir.file("bag.safetensors"), &sgd2);
  CHECK(back.mode() == ember::BagMode::mean);
  CHECK(back.table().weight() == bag.table().weight());
  CHECK(back.forward(keys, offsets) == bag.forward(keys, offsets));
  CHECK(sgd2.momentum_buffer(0) == sgd.momentum_buffer(0));

  std::vector<ember::KeyedTableConfig> tables{{.capacity = 6, .d_model = 2},
                                              {.capacity = 4, .d_model = 3}};
  ember::KeyedTableBatchedBags<float> kbb(
      tables, {{.table = 0}, {.table = 1, .mode = ember::BagMode::mean}});
  using Adagrad = ember::optim::RowwiseAdagrad<float>;
  std::vector<Adagrad> opts(2, Adagrad({.lr = 0.1}));
  const Keys tk{1, 2, 3, 4};
  const std::vector<int> to{0, 1, 2, 3, 4};  // B = 2
  const KeyedBatch tb = kbb.map(tk, to, 0);
  kbb.backward_step(tb, to, grad_of(2, 5, 0), std::span<Adagrad>(opts));
  ember::io::save_keyed(dir.file("kbb.safetensors"), kbb, std::span<const Adagrad>(opts));
  std::vector<Adagrad> opts2(2, Adagrad({.lr = 0.1}));
  auto kback =
      ember::io::load_keyed_bags<float>(dir.file("kbb.safetensors"), std::span<Adagrad>(opts2));
  CHECK(kback.num_features() == 2);
  CHECK(kback.feature(1).mode == ember::BagMode::mean);
  for (Index t = 0; t < 2; ++t) {
    CHECK(kback.table(t).weight() == kbb.table(t).weight());
    CHECK(opts2[static_cast<std::size_t>(t)].accumulator(0) ==
          opts[static_cast<std::size_t>(t)].accumulator(0));
  }
  CHECK(kback.forward(tk, to) == kbb.forward(tk, to));
  CHECK_THROWS_AS(ember::io::load_keyed<float>(dir.file("kbb.safetensors")), ember::FormatError);
}

TEST_CASE("corrupted or mismatched keyed checkpoints throw FormatError, loading nothing",
          "[keyed_checkpoint]") {
  ember_test::ScratchDir dir;
  KeyedEmbedding<float> emb(8, 3, {.index = {.min_count = 2}});
  ember::optim::Adam<float> adam({.lr = 0.05});
  train(emb, adam, 0, 4);
  const auto& state = ember::detail::KeyedAccess::state(emb);
  // Writes a checkpoint whose saved table went through `edit` (and whose metadata `meta` adds).
  const auto write = [&](const std::string& name, auto edit,
                         std::vector<std::pair<std::string, std::string>> meta = {}) {
    auto s = ember::detail::gather(state, emb.table(), &adam);
    edit(s);
    ember::io::SafetensorsWriter w;
    ember::detail::stamp_keyed(w, "KeyedEmbedding");
    w.metadata("scale", ember::detail::exact(1.0));
    ember::detail::add_to(w, "", s);
    for (const auto& [k, v] : meta) w.metadata(k, v);
    const std::string path = dir.file(name);
    w.save(path);
    return path;
  };
  const auto refused = [&](const std::string& path, const std::string& field) {
    ember::optim::Adam<float> target({.lr = 0.05});
    ember::optim::Adam<float> snapshot = target;
    const auto e = ember_test::catch_as<ember::FormatError>(
        [&] { static_cast<void>(ember::io::load_keyed<float>(path, &target)); });
    REQUIRE(e);
    CHECK(e->path() == path);
    CHECK_THAT(e->what(), Catch::Contains(path) && Catch::Contains(field));
    CHECK(target.state_rows() == snapshot.state_rows());
    CHECK(target.step_count() == snapshot.step_count());
  };
  using Saved = ember::detail::SavedKeyedTable<float>;
  refused(write("dup_row.safetensors", [](Saved& s) { s.index.rows[1] = s.index.rows[0]; }),
          "'rows'");
  refused(write("row_out.safetensors", [](Saved& s) { s.index.rows[0] = 99; }), "'rows'");
  refused(write("dup_key.safetensors", [](Saved& s) { s.index.keys[1] = s.index.keys[0]; }),
          "'keys'");
  refused(write("count0.safetensors", [](Saved& s) { s.index.counts[0] = 0; }), "'count'");
  refused(write("late.safetensors", [](Saved& s) { s.index.last_steps[0] = 1000; }), "'last_step'");
  refused(write("short.safetensors", [](Saved& s) { s.index.scores.pop_back(); }), "'rows'");
  refused(write("sketch.safetensors", [](Saved& s) { s.index.sketch.pop_back(); }), "'sketch'");
  refused(write("fallback.safetensors", [](Saved& s) { s.weight(8, 0) = 1.0f; }), "'weight'");
  refused(write("pending.safetensors", [](Saved& s) { s.pending.push_back(77); }), "'pending'");
  refused(write("opt.safetensors", [](Saved& s) { s.optimizer.name = "SGD"; }), "SGD");
  refused(write("opt_rows.safetensors", [](Saved& s) { s.state_rows[0] = -4; }),
          "'optimizer.rows'");
  refused(write("policy.safetensors", [](Saved&) {}, {{"policy", "fifo"}}), "'policy'");
  refused(write("capacity.safetensors", [](Saved&) {}, {{"capacity", "0"}}), "'capacity'");
  refused(write("seed.safetensors", [](Saved&) {}, {{"seed", "-3"}}), "'seed'");
  refused(write("steps.safetensors", [](Saved&) {}, {{"last_step", "x"}}), "'last_step'");
  refused(write("layer.safetensors", [](Saved&) {}, {{"ember.keyed.layer", "KeyedEmbeddingBag"}}),
          "ember.keyed.layer");
  // No optimizer state saved, but one asked for.
  const std::string plain = dir.file("plain.safetensors");
  ember::io::save_keyed(plain, emb);
  refused(plain, "no optimizer state");
  CHECK_NOTHROW(ember::io::load_keyed<float>(plain));
  // Not a safetensors file at all.
  const std::string junk = dir.file("junk.safetensors");
  ember_test::write_bytes(junk, std::vector<unsigned char>{1, 2, 3});
  CHECK_THROWS_AS(ember::io::load_keyed<float>(junk), ember::FormatError);
}

namespace {

/// The __metadata__ fields of the keyed checkpoint at `path` whose value is a number as ember
/// writes it (decimal, or a "%a" hex float).
std::vector<std::string> numeric_fields(const std::string& path) {
  const ember::io::SafetensorsFile file(path);
  std::vector<std::string> fields;
  for (const auto& [k, v] : file.metadata())
    if (!v.empty() && v.find_first_not_of("0123456789abcdefABCDEFxXpP.+-") == std::string::npos)
      fields.push_back(k);
  return fields;
}

/// Malformed numbers: each must be a FormatError in any numeric field, integer or real. Those
/// with a space, a '+', a trailing "x", an underflow or nothing at all were read as the number
/// before them (or 0) by strtod / strtoll.
const std::vector<std::string> kMalformedNumbers = {
    "zz", "", "1.5x", " 2", "2 ", "+2", "\t2", "2\n", " -1", "--1", "0x", "1e-400", "nan", "-inf"};

/// Copies `good` to a scratch file with __metadata__[field] = value and checks that `load` throws
/// a FormatError naming that file and the field.
template <class Load>
void check_malformed(const ember_test::ScratchDir& dir, const std::string& good,
                     const std::string& field, const std::string& value, const Load& load) {
  INFO("field '" << field << "' = '" << value << "'");
  const std::string path = dir.file("malformed.safetensors");
  std::filesystem::copy_file(good, path, std::filesystem::copy_options::overwrite_existing);
  ember_test::set_safetensors_metadata(path, field, value);
  const auto e = ember_test::catch_as<ember::FormatError>([&] { load(path); });
  REQUIRE(e);
  CHECK(e->path() == path);
  CHECK_THAT(e->what(), Catch::Contains(path) && Catch::Contains("'" + field + "'"));
}

}  // namespace

TEST_CASE("every numeric field of a keyed checkpoint is parsed whole or refused",
          "[keyed_checkpoint]") {
  ember_test::ScratchDir dir;
  // Every field in use: admission, a decayed lfu, an optimizer with per-row state.
  KeyedEmbedding<float> emb(
      8, 3, {.index = {.policy = ember::EvictionPolicy::lfu, .min_count = 2, .lfu_half_life = 3}});
  ember::optim::Adam<float> adam({.lr = 0.05});
  train(emb, adam, 0, 4);
  const std::string good = dir.file("good.safetensors");
  ember::io::save_keyed(good, emb, &adam);
  const auto load = [](const std::string& path) {
    ember::optim::Adam<float> target({.lr = 0.05});
    static_cast<void>(ember::io::load_keyed<float>(path, &target));
  };
  REQUIRE_NOTHROW(load(good));

  SECTION("scale") {
    // The defect: "zz" or "" loaded as scale 0, and every lookup returned zeros.
    for (const std::string& bad : kMalformedNumbers) check_malformed(dir, good, "scale", bad, load);
    const std::string path = dir.file("scale.safetensors");
    std::filesystem::copy_file(good, path);
    ember_test::set_safetensors_metadata(path, "scale", "zz");
    REQUIRE_THROWS_AS(ember::io::load_keyed<float>(path), ember::FormatError);
    REQUIRE_THROWS_WITH(ember::io::load_keyed<float>(path), Catch::Contains("'scale'"));
    ember_test::set_safetensors_metadata(path, "scale", std::nullopt);
    REQUIRE_THROWS_WITH(ember::io::load_keyed<float>(path), Catch::Contains("'scale': missing"));
    // A decimal scale, as a person might write it, reads as the hex float save_keyed writes.
    for (const char* half : {"0.5", "5e-1", "0x1p-1"}) {
      ember_test::set_safetensors_metadata(path, "scale", half);
      CHECK(ember::io::load_keyed<float>(path).scale() == 0.5f);
    }
  }
  SECTION("every other numeric field") {
    const std::vector<std::string> fields = numeric_fields(good);
    // Not vacuous: the integer, unsigned and real fields are all among them.
    for (const char* must : {"capacity", "d_model", "min_count", "lfu_half_life", "sketch_width",
                             "init.kind", "init.a", "init.b", "seed", "init_rows", "last_step",
                             "optimizer.steps", "optimizer.planes", "optimizer.width"}) {
      CHECK(std::find(fields.begin(), fields.end(), must) != fields.end());
    }
    for (const std::string& field : fields)
      for (const std::string& bad : kMalformedNumbers) check_malformed(dir, good, field, bad, load);
  }
  SECTION("the seed is unsigned") {
    // strtoull took " -1" as 2^64 - 1.
    for (const char* bad : {" -1", "-1", "-0", "18446744073709551616"})
      check_malformed(dir, good, "seed", bad, load);
  }
}

TEST_CASE("the table count and features of keyed table-batched bags are parsed whole",
          "[keyed_checkpoint]") {
  ember_test::ScratchDir dir;
  std::vector<ember::KeyedTableConfig> tables{{.capacity = 6, .d_model = 2},
                                              {.capacity = 4, .d_model = 3}};
  ember::KeyedTableBatchedBags<float> kbb(
      tables, {{.table = 0}, {.table = 1, .mode = ember::BagMode::mean}});
  const std::string good = dir.file("kbb.safetensors");
  ember::io::save_keyed(good, kbb);
  const auto load = [](const std::string& path) {
    static_cast<void>(ember::io::load_keyed_bags<float>(path));
  };
  REQUIRE_NOTHROW(load(good));
  SECTION("tables and the fields of every table") {
    const std::vector<std::string> fields = numeric_fields(good);
    for (const char* must : {"tables", "table0.capacity", "table1.init.a", "table1.seed"})
      CHECK(std::find(fields.begin(), fields.end(), must) != fields.end());
    for (const std::string& field : fields)
      for (const std::string& bad : kMalformedNumbers) check_malformed(dir, good, field, bad, load);
  }
  SECTION("the table of each feature") {
    // strtoll took " 1" and "+1" as 1.
    for (const char* features : {"0:sum:0, 1:mean:0", "0:sum:0,+1:mean:0", "0:sum:0,1 :mean:0",
                                 "0:sum:0,:mean:0", "0:sum:0,0x1:mean:0", "0:sum:0,2:mean:0"}) {
      check_malformed(dir, good, "features", features, load);
    }
  }
}

TEST_CASE("a failed keyed save leaves the old file", "[keyed_checkpoint]") {
  ember_test::ScratchDir dir;
  const std::string path = dir.file("keep.safetensors");
  KeyedEmbedding<float> emb(16, 3);
  ember::optim::SGD<float> sgd;
  train(emb, sgd, 0, 3);
  ember::io::save_keyed(path, emb);
  const auto before = ember_test::read_bytes(path);
  train(emb, sgd, 3, 6);
  for (const ember::detail::WriteFault fault : {ember::detail::WriteFault{.fail_after_bytes = 100},
                                                ember::detail::WriteFault{.fail_fsync = true},
                                                ember::detail::WriteFault{.fail_rename = true}}) {
    ember::detail::ScopedWriteFault scoped(fault);
    CHECK_THROWS_AS(ember::io::save_keyed(path, emb), ember::FormatError);
  }
  CHECK(ember_test::read_bytes(path) == before);
  CHECK_NOTHROW(ember::io::load_keyed<float>(path));
  CHECK(dir.entries() == 1);  // no temporary left behind
}

TEST_CASE("the keyed checkpoint fuzz seeds are what save_keyed writes", "[keyed_checkpoint]") {
  // tests/fuzz/corpus/keyed_checkpoint/ holds these files; after a deliberate format change,
  // rewrite them with EMBER_WRITE_FUZZ_SEEDS=1 build/dev/tests/ember_tests "[keyed_checkpoint]".
  const std::string dir = std::string(EMBER_FUZZ_DIR) + "/corpus/keyed_checkpoint/";
  ember_test::ScratchDir scratch;
  const bool write = std::getenv("EMBER_WRITE_FUZZ_SEEDS") != nullptr;
  const auto check = [&](const std::string& name, const auto& save) {
    const std::string path = write ? dir + name : scratch.file(name);
    save(path);
    if (!write) CHECK(ember_test::read_bytes(path) == ember_test::read_bytes(dir + name));
  };
  check("lru_adam.safetensors", [](const std::string& path) {
    KeyedEmbedding<float> emb(4, 2, {.seed = 1});
    ember::optim::Adam<float> adam({.lr = 0.1});
    for (std::int64_t s = 0; s < 3; ++s) {
      const KeyedBatch b = emb.map(Keys{1, 2, static_cast<std::uint64_t>(10 + s)}, s);
      emb.backward_step(b, grad_of(3, 2, s), adam);
    }
    ember::io::save_keyed(path, emb, &adam);
  });
  check("lfu_admission_sgd.safetensors", [](const std::string& path) {
    KeyedEmbedding<float> emb(3, 2,
                              {.index = {.policy = ember::EvictionPolicy::lfu,
                                         .min_count = 2,
                                         .lfu_half_life = 2,
                                         .sketch_width = 64},
                               .fallback = ember::KeyFallback::shared_row});
    ember::optim::SGD<float> sgd({.lr = 0.1, .momentum = 0.9});
    for (std::int64_t s = 0; s < 4; ++s) {
      const KeyedBatch b = emb.map(Keys{5, 5, 6, static_cast<std::uint64_t>(7 + s % 2)}, s);
      emb.backward_step(b, grad_of(4, 2, s), sgd);
    }
    ember::io::save_keyed(path, emb, &sgd);
  });
  check("bag_score.safetensors", [](const std::string& path) {
    ember::KeyedEmbeddingBag<float> bag(3, 2, ember::BagMode::sum,
                                        {.index = {.policy = ember::EvictionPolicy::score}});
    const std::vector<double> scores{1.0, 2.0, 0.5};
    const KeyedBatch b = bag.map(Keys{1, 2, 3}, 0, scores);
    static_cast<void>(b);
    ember::io::save_keyed(path, bag);
  });
}

namespace {

/// Overwrites the data of tensor `name` of the safetensors file at `path` with `values` (the same
/// dtype and size), header untouched.
template <class V>
void overwrite_tensor(const std::string& path, const std::string& name,
                      const std::vector<V>& values) {
  std::vector<unsigned char> bytes = ember_test::read_bytes(path);
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const auto header =
      nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + static_cast<std::ptrdiff_t>(8 + n));
  const auto begin = header.at(name).at("data_offsets").at(0).get<std::uint64_t>();
  const auto end = header.at(name).at("data_offsets").at(1).get<std::uint64_t>();
  REQUIRE(end - begin == values.size() * sizeof(V));
  std::memcpy(bytes.data() + 8 + n + begin, values.data(), end - begin);
  ember_test::write_bytes(path, bytes);
}

/// Maps batches [from, to) of a deterministic stream whose steps are 3 · 2^30 apart, so that
/// every batch rebases the index's last steps and the older keys' steps are kept apart.
void map_far(KeyedEmbedding<float>& e, std::int64_t from, std::int64_t to) {
  for (std::int64_t s = from; s < to; ++s) {
    Batches b(500 + static_cast<std::uint64_t>(s));
    static_cast<void>(e.map(b.next(3, 20), s * 3 * (std::int64_t{1} << 30)));
  }
}

}  // namespace

TEST_CASE("checkpoints keep last steps and decayed counts exactly across far-apart steps",
          "[keyed_checkpoint]") {
  ember_test::ScratchDir dir;
  const std::string path = dir.file("far.safetensors");
  for (const ember::KeyIndexOptions& io :
       {ember::KeyIndexOptions{.policy = ember::EvictionPolicy::lru},
        ember::KeyIndexOptions{.policy = ember::EvictionPolicy::lfu, .lfu_half_life = 1}}) {
    INFO("policy " << ember::to_string(io.policy));
    const KeyedOptions o{.index = io, .seed = 5};
    KeyedEmbedding<float> straight(8, 2, o), first(8, 2, o);
    map_far(straight, 0, 24);
    map_far(first, 0, 12);
    const auto before = entries(first);
    const std::int64_t long_ago = first.index().last_step() - (std::int64_t{1} << 31);
    CHECK(std::any_of(before.begin(), before.end(),  // a key older than any base could be
                      [&](const ember::KeyEntry& e) { return e.last_step < long_ago; }));
    ember::io::save_keyed(path, first);
    KeyedEmbedding<float> resumed = ember::io::load_keyed<float>(path);
    CHECK(entries(resumed) == before);
    map_far(resumed, 12, 24);
    CHECK(entries(resumed) == entries(straight));
  }
}

TEST_CASE("format-1 keyed checkpoints, with decayed counts as floats, still load",
          "[keyed_checkpoint]") {
  ember_test::ScratchDir dir;
  const std::string path = dir.file("v1.safetensors");
  const KeyedOptions o{.index = {.policy = ember::EvictionPolicy::lfu, .lfu_half_life = 3},
                       .seed = 6};
  KeyedEmbedding<float> emb(16, 4, o);
  ember::optim::SGD<float> sgd({.lr = 0.1});
  train(emb, sgd, 0, 40);
  ember::io::save_keyed(path, emb);
  const auto expected = entries(emb);
  const auto decay = ember::io::SafetensorsFile(path).load_array<std::uint64_t>("decay");
  const std::int64_t latest = (emb.index().last_step() - 0) / 3;  // the stream starts at step 0
  for (const std::int64_t decay_base : {std::int64_t{0}, latest}) {
    INFO("decay_base " << decay_base);
    // Format 1 stored each decayed count as a float relative to 2^decay_base, in `score`.
    std::vector<double> weights;
    for (const std::uint64_t d : decay)
      weights.push_back(ember::detail::DecayedCount::value_at(d, decay_base));
    ember_test::set_safetensors_metadata(path, "ember.keyed.format", "1");
    ember_test::set_safetensors_metadata(path, "decay_base", std::to_string(decay_base));
    overwrite_tensor(path, "score", weights);
    const KeyedEmbedding<float> back = ember::io::load_keyed<float>(path);
    CHECK(entries(back) == expected);
    ember_test::set_safetensors_metadata(path, "decay_base", "x");
    CHECK_THROWS_WITH(ember::io::load_keyed<float>(path), Catch::Contains("'decay_base'"));
  }
  ember_test::set_safetensors_metadata(path, "ember.keyed.format", "3");
  CHECK_THROWS_WITH(ember::io::load_keyed<float>(path), Catch::Contains("ember.keyed.format"));
  // A file the format-1 writer wrote, and the same training saved as format 2 (the fuzz seeds).
  const std::string seeds = std::string(EMBER_FUZZ_DIR) + "/corpus/keyed_checkpoint/";
  ember::optim::SGD<float> sgd1({.lr = 0.1, .momentum = 0.9}), sgd2 = sgd1;
  const auto v1 =
      ember::io::load_keyed<float>(seeds + "lfu_admission_sgd_format1.safetensors", &sgd1);
  const auto v2 = ember::io::load_keyed<float>(seeds + "lfu_admission_sgd.safetensors", &sgd2);
  CHECK(entries(v1) == entries(v2));
  CHECK(v1.table().weight() == v2.table().weight());
}

TEST_CASE("a decayed count above a float's range is a FormatError", "[keyed_checkpoint]") {
  ember_test::ScratchDir dir;
  const std::string path = dir.file("decay.safetensors");
  KeyedEmbedding<float> emb(8, 2,
                            {.index = {.policy = ember::EvictionPolicy::lfu, .lfu_half_life = 2}});
  static_cast<void>(emb.map(Keys{1, 2, 3}, 10));
  ember::io::save_keyed(path, emb);
  auto decay = ember::io::SafetensorsFile(path).load_array<std::uint64_t>("decay");
  decay[1] = (std::uint64_t{5 + 128} << 23);  // 2^128 at the latest half-life, 5
  overwrite_tensor(path, "decay", decay);
  CHECK_THROWS_AS(ember::io::load_keyed<float>(path), ember::FormatError);
  CHECK_THROWS_WITH(ember::io::load_keyed<float>(path), Catch::Contains("'decay'"));
}

TEST_CASE("a missing keyed checkpoint is a FileError naming the call that opened it",
          "[keyed_checkpoint]") {
  ember_test::check_missing_file("io::load_keyed", [](const std::string& p) {
    static_cast<void>(ember::io::load_keyed<float>(p));
  });
  ember_test::check_missing_file("io::load_keyed_bag", [](const std::string& p) {
    static_cast<void>(ember::io::load_keyed_bag<float>(p));
  });
  ember_test::check_missing_file("io::load_keyed_bags", [](const std::string& p) {
    static_cast<void>(ember::io::load_keyed_bags<float>(p));
  });
}

TEST_CASE("save_keyed and the loaders take the optimizer as it is used", "[keyed_checkpoint]") {
  // docs/keyed.md writes io::save_keyed(path, layer, optimizer): the optimizer itself, as a
  // training loop holds it, and the same for the loaders; the pointer forms stay.
  ember_test::ScratchDir dir;
  KeyedEmbedding<float> emb(16, 4, {.seed = 4});
  ember::optim::Adam<float> adam({.lr = 0.05});
  train(emb, adam, 0, 4);
  const std::string path = dir.file("emb.safetensors");
  ember::io::save_keyed(path, emb, adam);
  ember::optim::Adam<float> by_ref({.lr = 0.05}), by_ptr({.lr = 0.05});
  const KeyedEmbedding<float> a = ember::io::load_keyed<float>(path, by_ref);
  const KeyedEmbedding<float> b = ember::io::load_keyed<float>(path, &by_ptr);
  CHECK(a.table().weight() == emb.table().weight());
  CHECK(b.table().weight() == emb.table().weight());
  CHECK(by_ref.step_count() == adam.step_count());
  CHECK(by_ref.state_rows() == adam.state_rows());
  for (const ember::KeyEntry& e : emb.index()) CHECK(by_ref.exp_avg(e.row) == adam.exp_avg(e.row));
  const KeyedEmbedding<float> grown = ember::io::load_keyed<float>(path, by_ref, {.capacity = 24});
  CHECK(grown.capacity() == 24);

  ember::KeyedEmbeddingBag<float> bag(8, 2, ember::BagMode::sum);
  ember::optim::SGD<float> sgd({.lr = 0.1, .momentum = 0.5});
  const KeyedBatch bb = bag.map(Keys{3, 4}, 0);
  bag.backward_step(bb, std::vector<int>{0}, grad_of(1, 2, 0), sgd);
  ember::io::save_keyed(dir.file("bag.safetensors"), bag, sgd);
  ember::optim::SGD<float> sgd2({.lr = 0.1, .momentum = 0.5});
  const auto bag2 = ember::io::load_keyed_bag<float>(dir.file("bag.safetensors"), sgd2);
  CHECK(sgd2.momentum_buffer(0) == sgd.momentum_buffer(0));
  CHECK(bag2.table().weight() == bag.table().weight());

  ember::KeyedTableBatchedBags<float> kbb({{.capacity = 4, .d_model = 2}}, {{.table = 0}});
  using Adagrad = ember::optim::RowwiseAdagrad<float>;
  std::vector<Adagrad> opts(1, Adagrad({.lr = 0.1}));
  const std::vector<int> offsets{0, 2};
  const KeyedBatch tb = kbb.map(Keys{1, 2}, offsets, 0);
  kbb.backward_step(tb, offsets, grad_of(1, 2, 0), std::span<Adagrad>(opts));
  ember::io::save_keyed(dir.file("kbb.safetensors"), kbb, opts);
  std::vector<Adagrad> opts2(1, Adagrad({.lr = 0.1}));
  const auto kbb2 = ember::io::load_keyed_bags<float>(dir.file("kbb.safetensors"), opts2);
  CHECK(opts2[0].accumulator(0) == opts[0].accumulator(0));
  CHECK(kbb2.table(0).weight() == kbb.table(0).weight());
}
