// Tests of ember/keys/keyed_checkpoint.hpp: round trips of every keyed layer, resume bit-identity
// (N + M steps straight = N, save, load, M) for every optimizer and policy, loads into another
// capacity, corrupted and mismatched files (FormatError naming file and field, nothing loaded),
// and a failed save that leaves the old file.
#include "ember/keys/keyed_checkpoint.hpp"

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <ember/io/detail/atomic_write.hpp>
#include <ember/optim.hpp>

#include "support/error_checks.hpp"
#include "support/io_files.hpp"

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
  ember::save_keyed(path, first, &b);
  Opt c = prototype;
  KeyedEmbedding<float> resumed = ember::load_keyed<float>(path, &c);
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
  ember::save_keyed(path, emb, &adam);
  ember::optim::Adam<float> big_opt({.lr = 0.05});
  const KeyedEmbedding<float> big = ember::load_keyed<float>(path, &big_opt, {.capacity = 40});
  CHECK(big.capacity() == 40);
  CHECK(big.size() == emb.size());
  for (const ember::KeyEntry& e : emb.index()) {
    CHECK(big.index().find(e.key) == e.row);  // growing keeps every row
    CHECK(big.forward(Keys{e.key}) == emb.forward(Keys{e.key}));
  }
  ember::optim::Adam<float> small_opt({.lr = 0.05});
  const KeyedEmbedding<float> small = ember::load_keyed<float>(path, &small_opt, {.capacity = 5});
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
  ember::save_keyed(dir.file("bag.safetensors"), bag, &sgd);
  ember::optim::SGD<float> sgd2({.lr = 0.1, .momentum = 0.5});
  const auto back = ember::load_keyed_bag<float>(dir.file("bag.safetensors"), &sgd2);
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
  ember::save_keyed(dir.file("kbb.safetensors"), kbb, std::span<const Adagrad>(opts));
  std::vector<Adagrad> opts2(2, Adagrad({.lr = 0.1}));
  auto kback =
      ember::load_keyed_bags<float>(dir.file("kbb.safetensors"), std::span<Adagrad>(opts2));
  CHECK(kback.num_features() == 2);
  CHECK(kback.feature(1).mode == ember::BagMode::mean);
  for (Index t = 0; t < 2; ++t) {
    CHECK(kback.table(t).weight() == kbb.table(t).weight());
    CHECK(opts2[static_cast<std::size_t>(t)].accumulator(0) ==
          opts[static_cast<std::size_t>(t)].accumulator(0));
  }
  CHECK(kback.forward(tk, to) == kbb.forward(tk, to));
  CHECK_THROWS_AS(ember::load_keyed<float>(dir.file("kbb.safetensors")), ember::FormatError);
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
        [&] { static_cast<void>(ember::load_keyed<float>(path, &target)); });
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
  ember::save_keyed(plain, emb);
  refused(plain, "no optimizer state");
  CHECK_NOTHROW(ember::load_keyed<float>(plain));
  // Not a safetensors file at all.
  const std::string junk = dir.file("junk.safetensors");
  ember_test::write_bytes(junk, std::vector<unsigned char>{1, 2, 3});
  CHECK_THROWS_AS(ember::load_keyed<float>(junk), ember::FormatError);
}

TEST_CASE("a failed keyed save leaves the old file", "[keyed_checkpoint]") {
  ember_test::ScratchDir dir;
  const std::string path = dir.file("keep.safetensors");
  KeyedEmbedding<float> emb(16, 3);
  ember::optim::SGD<float> sgd;
  train(emb, sgd, 0, 3);
  ember::save_keyed(path, emb);
  const auto before = ember_test::read_bytes(path);
  train(emb, sgd, 3, 6);
  for (const ember::io::detail::WriteFault fault :
       {ember::io::detail::WriteFault{.fail_after_bytes = 100},
        ember::io::detail::WriteFault{.fail_fsync = true},
        ember::io::detail::WriteFault{.fail_rename = true}}) {
    ember::io::detail::ScopedWriteFault scoped(fault);
    CHECK_THROWS_AS(ember::save_keyed(path, emb), ember::FormatError);
  }
  CHECK(ember_test::read_bytes(path) == before);
  CHECK_NOTHROW(ember::load_keyed<float>(path));
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
    ember::save_keyed(path, emb, &adam);
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
    ember::save_keyed(path, emb, &sgd);
  });
  check("bag_score.safetensors", [](const std::string& path) {
    ember::KeyedEmbeddingBag<float> bag(3, 2, ember::BagMode::sum,
                                        {.index = {.policy = ember::EvictionPolicy::score}});
    const std::vector<double> scores{1.0, 2.0, 0.5};
    const KeyedBatch b = bag.map(Keys{1, 2, 3}, 0, scores);
    static_cast<void>(b);
    ember::save_keyed(path, bag);
  });
}
