/// Checkpoints of keyed tables in safetensors: the whole state of a KeyedEmbedding,
/// KeyedEmbeddingBag or KeyedTableBatchedBags (rows, keys, steps, counts, scores, the admission
/// sketch, the eviction log and the optimizer state), written atomically and loaded back, also
/// into another capacity. Needs nlohmann/json: link ember::io.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ember/bag.hpp"
#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/errors.hpp"
#include "ember/io/detail/checks.hpp"
#include "ember/io/detail/whole_number.hpp"
#include "ember/io/safetensors.hpp"
#include "ember/keyed/keyed_bags.hpp"
#include "ember/keyed/keyed_embedding.hpp"
#include "ember/keys/key_index.hpp"
#include "ember/optim/sgd.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

namespace detail {

/// A KeyIndex as plain arrays: what a checkpoint stores.
struct KeyIndexSnapshot {
  Index capacity = 0;
  KeyIndexOptions options;
  KeyIndexClocks clock;
  std::vector<std::uint64_t> keys;
  std::vector<std::int64_t> rows, last_steps, counts;
  std::vector<double> scores;        // score: the score; else 0
  std::vector<std::uint64_t> decay;  // lfu with a half-life: the detail::DecayedCount; else 0
  std::vector<std::uint16_t> sketch;
};

/// ember's checkpoints' door into a KeyIndex (not for users).
struct KeyIndexAccess {
  [[nodiscard]] static KeyIndexSnapshot snapshot(const KeyIndex& ix) {
    KeyIndexSnapshot s;
    s.capacity = ix.capacity_;
    s.options = ix.options_;
    s.clock = ix.clock_;
    for (Index r = 0; r < ix.capacity_; ++r) {
      if (!ix.resident(r)) continue;
      const auto u = static_cast<std::size_t>(r);
      s.keys.push_back(ix.meta_[u].key);
      s.rows.push_back(r);
      s.last_steps.push_back(ix.step_of(r));
      s.counts.push_back(ix.meta_[u].count);
      s.scores.push_back(ix.options_.policy == EvictionPolicy::score ? ix.scores_[u] : 0.0);
      s.decay.push_back(ix.decayed() ? ix.decay_[u] : 0);
    }
    const auto c = ix.sketch_.counters();
    s.sketch.assign(c.begin(), c.end());
    return s;
  }

  /// The index a snapshot describes. Precondition: validated (validate_snapshot).
  [[nodiscard]] static KeyIndex restore(const KeyIndexSnapshot& s) {
    KeyIndex ix(s.capacity, s.options);
    ix.clock_ = s.clock;
    std::vector<KeyIndex::AncientStep> steps;
    for (std::size_t i = 0; i < s.keys.size(); ++i) {
      const auto r = static_cast<Index>(s.rows[i]);
      const auto u = static_cast<std::size_t>(r);
      ix.meta_[u] = {s.keys[i], 0, static_cast<std::uint32_t>(s.counts[i])};
      steps.push_back({static_cast<std::uint32_t>(r), s.last_steps[i]});
      if (ix.decayed()) ix.decay_[u] = s.decay[i];
      if (s.options.policy == EvictionPolicy::score) ix.scores_[u] = s.scores[i];
      ix.slots_.insert(mix_key(s.keys[i]), r);
      ++ix.size_;
    }
    // A format-1 file may span more steps than one base covers (it kept 2^32): base_for then
    // moves the base as a rebase does, ranking the rows before it below it. The index is new,
    // so its eviction order holds no candidates that the new order values could leave stale.
    ix.encode_steps(steps, KeyIndex::base_for(s.clock.base, s.clock.last));
    ix.finish_adopt();
    if (!s.sketch.empty())
      std::copy(s.sketch.begin(), s.sketch.end(), ix.sketch_.counters().begin());
    return ix;
  }

  /// The number of admission counters the options give (0 without admission).
  [[nodiscard]] static std::uint64_t sketch_size(Index capacity, const KeyIndexOptions& o) {
    if (o.min_count <= 1) return 0;
    return static_cast<std::uint64_t>(KeyIndex::sketch_width_for(capacity, o.sketch_width)) * 4;
  }
  /// KeyIndex's own checks of (capacity, options), without building an index.
  static void validate(Index capacity, const KeyIndexOptions& o) {
    KeyIndex::validate(capacity, o);
  }
};

/// The one of `values` whose to_string is `name` (the names a checkpoint stores), or std::nullopt.
template <class E>
std::optional<E> parse_name(std::string_view name, std::initializer_list<E> values) {
  for (const E v : values)
    if (name == to_string(v)) return v;
  return std::nullopt;
}

/// A double as text that reads back exactly ("%a").
inline std::string exact(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

/// One keyed table as a checkpoint holds it, and the arrays the writer references.
template <class T>
struct SavedKeyedTable {
  KeyedOptions options;
  Index d_model = 0;
  KeyIndexSnapshot index;
  RowMatrix<T> weight;  // capacity + 1 rows
  std::vector<std::int64_t> pending;
  std::vector<std::uint64_t> log_keys;
  std::vector<std::int64_t> log_steps;
  /// What the optimizer state is.
  struct Optimizer {
    bool present = false;
    std::string name;
    std::int64_t steps = 0;
    Index planes = 0, width = 0;
    bool with_steps = false;
    friend bool operator==(const Optimizer&, const Optimizer&) = default;
  };
  // Optimizer state (optimizer.present): the rows with state, their planes side by side, row
  // steps.
  Optimizer optimizer;
  std::vector<std::int64_t> state_rows;
  RowMatrix<T> state;  // state_rows.size() x planes·width
  std::vector<std::int64_t> row_steps;
};

/// Collects what to save of one keyed table (state + table + optimizer, or none).
template <class T, class Opt>
SavedKeyedTable<T> gather(const KeyedState<T>& st, const Embedding<T>& table, const Opt* opt) {
  SavedKeyedTable<T> s;
  s.options = st.options();
  s.d_model = st.d_model();
  s.index = KeyIndexAccess::snapshot(st.index());
  s.weight = table.weight();
  s.pending.assign(st.pending().begin(), st.pending().end());
  for (const KeyLogEntry& l : st.log()) {
    s.log_keys.push_back(l.key);
    s.log_steps.push_back(l.step);
  }
  if constexpr (!std::is_same_v<Opt, std::nullptr_t>) {
    if (opt != nullptr) {
      s.optimizer.present = true;
      s.optimizer.name = Opt::name;
      s.optimizer.steps = RowOptimizerAccess::steps(*opt);
      const auto& rs = RowOptimizerAccess::state(*opt);
      s.optimizer.planes = rs.planes();
      s.optimizer.width = RowOptimizerAccess::state_width(*opt, st.d_model());
      s.optimizer.with_steps = rs.with_steps();
      const auto rows = rs.rows();
      s.state.resize(static_cast<Index>(rows.size()), s.optimizer.planes * s.optimizer.width);
      for (std::size_t k = 0; k < rows.size(); ++k) {
        const Index slot = rs.slot(rows[k]);
        s.state_rows.push_back(rows[k]);
        for (int p = 0; p < rs.planes(); ++p)
          for (Index c = 0; c < s.optimizer.width; ++c)
            s.state(static_cast<Index>(k), p * s.optimizer.width + c) = rs.data(p, slot)[c];
        if (s.optimizer.with_steps) s.row_steps.push_back(rs.steps(slot));
      }
    }
  }
  return s;
}

/// Adds one saved table under `prefix` to a writer (the arrays stay in `s`, which must outlive
/// the save).
template <class T>
void add_to(io::SafetensorsWriter& w, const std::string& p, const SavedKeyedTable<T>& s) {
  const KeyIndexSnapshot& ix = s.index;
  const KeyIndexOptions& io = s.options.index;
  w.add(p + "weight", s.weight);
  w.add_array<std::uint64_t>(p + "keys", ix.keys);
  w.add_array<std::int64_t>(p + "rows", ix.rows);
  w.add_array<std::int64_t>(p + "last_step", ix.last_steps);
  w.add_array<std::int64_t>(p + "count", ix.counts);
  w.add_array<double>(p + "score", ix.scores);
  w.add_array<std::uint64_t>(p + "decay", ix.decay);
  w.add_array<std::uint16_t>(p + "sketch", ix.sketch);
  w.add_array<std::int64_t>(p + "pending", s.pending);
  w.add_array<std::uint64_t>(p + "log_keys", s.log_keys);
  w.add_array<std::int64_t>(p + "log_steps", s.log_steps);
  const auto meta = [&](const char* k, const std::string& v) { w.metadata(p + k, v); };
  meta("capacity", std::to_string(ix.capacity));
  meta("d_model", std::to_string(s.d_model));
  meta("policy", to_string(io.policy));
  meta("min_count", std::to_string(io.min_count));
  meta("lfu_half_life", std::to_string(io.lfu_half_life));
  meta("sketch_width", std::to_string(io.sketch_width));
  meta("sketch_half_life", std::to_string(io.sketch_half_life));
  meta("fallback", s.options.fallback == KeyFallback::zeros ? "zeros" : "shared_row");
  meta("init.kind", std::to_string(static_cast<int>(s.options.init.kind)));
  meta("init.a", exact(s.options.init.a));
  meta("init.b", exact(s.options.init.b));
  meta("seed", std::to_string(s.options.seed));
  meta("init_rows", std::to_string(s.options.init_rows));
  meta("origin_step", std::to_string(ix.clock.origin));
  meta("base_step", std::to_string(ix.clock.base));
  meta("last_step", std::to_string(ix.clock.last));
  meta("sketch_epoch", std::to_string(ix.clock.sketch_epoch));
  if (s.optimizer.present) {
    meta("optimizer", s.optimizer.name);
    meta("optimizer.steps", std::to_string(s.optimizer.steps));
    meta("optimizer.planes", std::to_string(s.optimizer.planes));
    meta("optimizer.width", std::to_string(s.optimizer.width));
    meta("optimizer.row_steps", s.optimizer.with_steps ? "1" : "0");
    w.add_array<std::int64_t>(p + "optimizer.rows", s.state_rows);
    w.add(p + "optimizer.state", s.state);
    w.add_array<std::int64_t>(p + "optimizer.row_steps", s.row_steps);
  }
}

/// The one-dimensional tensor p + field of dtype V; `bad(field, what)` reports a problem.
template <class V, class Bad>
std::vector<V> array_field(const io::SafetensorsFile& f, const std::string& p,
                           const std::string& field, const Bad& bad) {
  if (!f.contains(p + field)) bad(field, "no such tensor");
  if (f.info(p + field).shape.size() != 1) bad(field, "is not one-dimensional");
  return f.load_array<V>(p + field);
}

/// Reads and validates everything of one keyed table under `prefix` (FormatError naming the file
/// and the field for anything missing, malformed or inconsistent).
template <class T>
SavedKeyedTable<T> read_table(const io::SafetensorsFile& f, const std::string& p) {
  const std::string& path = f.path();
  const auto bad = [&](const std::string& field, const auto&... what) {
    detail::fail_at_byte(path, 8, "keyed checkpoint field '", p, field, "': ", what...);
  };
  const auto text = [&](const std::string& field) -> const std::string& {
    const auto it = f.metadata().find(p + field);
    if (it == f.metadata().end()) bad(field, "missing from __metadata__");
    return it->second;
  };
  // Every numeric field is one whole number (detail::whole_number): "", " 2" or "1.5x" is a
  // FormatError, never a silent 0, 2 or 1.5.
  const auto integer = [&](const std::string& field) -> std::int64_t {
    const std::string& v = text(field);
    const auto x = detail::whole_number<std::int64_t>(v);
    if (!x) bad(field, detail::quoted(v), " is not a decimal 64-bit integer");
    return *x;
  };
  const auto real = [&](const std::string& field) -> double {
    const std::string& v = text(field);
    const auto x = detail::whole_number<double>(v);
    if (!x) bad(field, detail::quoted(v), " is not a finite number");
    return *x;
  };

  SavedKeyedTable<T> s;
  KeyIndexSnapshot& ix = s.index;
  KeyIndexOptions& io = s.options.index;
  ix.capacity = integer("capacity");
  s.d_model = integer("d_model");
  const std::string& policy = text("policy");
  const auto parsed = parse_name(policy, {EvictionPolicy::lru, EvictionPolicy::lfu,
                                          EvictionPolicy::score, EvictionPolicy::none});
  if (!parsed) bad("policy", "'", policy, "' is not lru, lfu, score or none");
  io.policy = *parsed;
  io.min_count = integer("min_count");
  io.lfu_half_life = integer("lfu_half_life");
  io.sketch_width = integer("sketch_width");
  io.sketch_half_life = integer("sketch_half_life");
  const std::string& fallback = text("fallback");
  if (fallback != "zeros" && fallback != "shared_row")
    bad("fallback", "'", fallback, "' is not zeros or shared_row");
  s.options.fallback = fallback == "zeros" ? KeyFallback::zeros : KeyFallback::shared_row;
  const std::int64_t kind = integer("init.kind");
  if (kind < 0 || kind > static_cast<int>(Init::Kind::zeros))
    bad("init.kind", "is not an Init::Kind");
  s.options.init = Init{static_cast<Init::Kind>(kind), real("init.a"), real("init.b")};
  {
    const std::string& v = text("seed");
    const auto seed = detail::whole_number<std::uint64_t>(v);
    if (!seed) bad("seed", detail::quoted(v), " is not a decimal unsigned 64-bit integer");
    s.options.seed = *seed;
  }
  s.options.init_rows = integer("init_rows");
  // The options must build the table, checked without allocating anything: the table's and the
  // sketch's sizes must be the file's (so they are bounded by its size) before an index is built.
  try {
    KeyIndexAccess::validate(ix.capacity, io);
    s.options.init.validate();
  } catch (const Error& e) {
    bad("capacity", "the saved options are not valid: ", e.message());
  }
  if (s.d_model <= 0) bad("d_model", "must be positive");
  if (s.options.init_rows < 0) bad("init_rows", "is negative");
  if (!f.contains(p + "weight") || f.info(p + "weight").shape.size() != 2 ||
      f.info(p + "weight").shape[0] != static_cast<std::uint64_t>(ix.capacity) + 1 ||
      f.info(p + "weight").shape[1] != static_cast<std::uint64_t>(s.d_model)) {
    bad("weight", "is not a tensor of capacity + 1 = ", ix.capacity + 1,
        " x d_model = ", s.d_model);
  }
  if (!f.contains(p + "sketch") || f.info(p + "sketch").shape.size() != 1 ||
      f.info(p + "sketch").shape[0] != KeyIndexAccess::sketch_size(ix.capacity, io)) {
    bad("sketch", "is not one-dimensional with the ", KeyIndexAccess::sketch_size(ix.capacity, io),
        " counters the options give");
  }
  ix.options = io;
  ix.options.fallback_row = static_cast<TokenId>(ix.capacity);
  ix.clock.origin = integer("origin_step");
  ix.clock.base = integer("base_step");
  ix.clock.last = integer("last_step");
  ix.clock.sketch_epoch = integer("sketch_epoch");
  if (ix.clock.origin < -1 || (ix.clock.origin >= 0 && (ix.clock.base < ix.clock.origin ||
                                                        ix.clock.last < ix.clock.base))) {
    bad("origin_step", "the steps are out of order (origin <= base <= last)");
  }
  if (ix.clock.sketch_epoch < 0) bad("sketch_epoch", "is negative");
  // The table.
  s.weight = f.template load<T>(p + "weight");
  if (s.options.fallback == KeyFallback::zeros && !s.weight.row(ix.capacity).isZero(0)) {
    bad("weight", "the zero fallback row is not zero");
  }
  // The index.
  ix.keys = array_field<std::uint64_t>(f, p, "keys", bad);
  ix.rows = array_field<std::int64_t>(f, p, "rows", bad);
  ix.last_steps = array_field<std::int64_t>(f, p, "last_step", bad);
  ix.counts = array_field<std::int64_t>(f, p, "count", bad);
  ix.scores = array_field<double>(f, p, "score", bad);
  ix.sketch = array_field<std::uint16_t>(f, p, "sketch", bad);
  // Format 1 kept decayed counts as floats in `score`, relative to 2^decay_base; format 2 keeps
  // them whole in `decay` (detail::DecayedCount).
  const bool format1 = f.metadata().at("ember.keyed.format") == "1";
  const std::int64_t decay_base = format1 ? integer("decay_base") : 0;
  if (decay_base < 0) bad("decay_base", "is negative");
  ix.decay = format1 ? std::vector<std::uint64_t>(ix.keys.size(), 0)
                     : array_field<std::uint64_t>(f, p, "decay", bad);
  const std::size_t n = ix.keys.size();
  if (ix.rows.size() != n || ix.last_steps.size() != n || ix.counts.size() != n ||
      ix.scores.size() != n || ix.decay.size() != n) {
    bad("rows", "keys, rows, last_step, count, score and decay differ in length");
  }
  if (ix.clock.origin < 0 && n != 0)
    bad("origin_step", "is -1 (never stepped) but keys are resident");
  std::set<std::int64_t> rows_seen;
  std::set<std::uint64_t> keys_seen;
  const bool decayed = io.policy == EvictionPolicy::lfu && io.lfu_half_life > 0;
  // A decayed count must read as a float relative to the latest half-life, as the index keeps it.
  const std::int64_t latest_epoch =
      decayed && ix.clock.origin >= 0 ? (ix.clock.last - ix.clock.origin) / io.lfu_half_life : 0;
  const std::uint64_t largest_decay = DecayedCount::largest_at(latest_epoch);
  for (std::size_t i = 0; i < n; ++i) {
    if (ix.rows[i] < 0 || ix.rows[i] >= ix.capacity)
      bad("rows", ix.rows[i], " at entry ", i, " is outside [0, capacity)");
    if (!rows_seen.insert(ix.rows[i]).second)
      bad("rows", "row ", ix.rows[i], " at entry ", i, " is given twice");
    if (!keys_seen.insert(ix.keys[i]).second)
      bad("keys", "key ", ix.keys[i], " at entry ", i, " is given twice");
    if (ix.counts[i] < 1 || ix.counts[i] > std::numeric_limits<std::uint32_t>::max())
      bad("count", ix.counts[i], " at entry ", i, " is outside [1, 2^32)");
    if (ix.last_steps[i] < ix.clock.origin || ix.last_steps[i] > ix.clock.last) {
      bad("last_step", ix.last_steps[i], " at entry ", i, " is outside [origin_step, last_step]");
    }
    const double sc = ix.scores[i];
    if (!std::isfinite(sc)) bad("score", "not finite at entry ", i);
    if (format1 && decayed) {
      if (sc < 0.0 || static_cast<double>(static_cast<float>(sc)) != sc)
        bad("score", "a decayed count must be a non-negative float at entry ", i);
      ix.decay[i] = DecayedCount::of_value(sc, decay_base);  // an old underflow: one sighting
      ix.scores[i] = 0.0;
    } else if (io.policy != EvictionPolicy::score && sc != 0.0) {
      bad("score", "must be 0 for this policy at entry ", i);
    }
    if (decayed && ix.decay[i] > largest_decay) {
      bad("decay", ix.decay[i], " at entry ", i,
          " is above the largest count a float holds relative to the latest half-life");
    }
    if (!decayed && ix.decay[i] != 0) bad("decay", "must be 0 for this policy at entry ", i);
  }
  s.pending = array_field<std::int64_t>(f, p, "pending", bad);
  for (const std::int64_t r : s.pending)
    if (r < 0 || r > ix.capacity) bad("pending", "row ", r, " is outside the table");
  s.log_keys = array_field<std::uint64_t>(f, p, "log_keys", bad);
  s.log_steps = array_field<std::int64_t>(f, p, "log_steps", bad);
  if (s.log_keys.size() != s.log_steps.size()) bad("log_steps", "differs in length from log_keys");
  // The optimizer.
  if (f.metadata().count(p + "optimizer") != 0) {
    s.optimizer.present = true;
    s.optimizer.name = text("optimizer");
    s.optimizer.steps = integer("optimizer.steps");
    s.optimizer.planes = integer("optimizer.planes");
    s.optimizer.width = integer("optimizer.width");
    const std::string& rs = text("optimizer.row_steps");
    if (rs != "0" && rs != "1") bad("optimizer.row_steps", "is not 0 or 1");
    s.optimizer.with_steps = rs == "1";
    if (s.optimizer.steps < 0 || s.optimizer.planes < 0 || s.optimizer.planes > 8 ||
        s.optimizer.width < 0 || s.optimizer.width > s.d_model) {
      bad("optimizer.steps", "steps, planes or width out of range");
    }
    s.state_rows = array_field<std::int64_t>(f, p, "optimizer.rows", bad);
    if (!f.contains(p + "optimizer.state")) bad("optimizer.state", "no such tensor");
    s.state = f.template load<T>(p + "optimizer.state", {.allow_non_finite = true});
    if (s.state.rows() != static_cast<Index>(s.state_rows.size()) ||
        s.state.cols() != s.optimizer.planes * s.optimizer.width) {
      bad("optimizer.state", "is not rows x planes · width");
    }
    s.row_steps = array_field<std::int64_t>(f, p, "optimizer.row_steps", bad);
    if (s.row_steps.size() != (s.optimizer.with_steps ? s.state_rows.size() : 0))
      bad("optimizer.row_steps", "has the wrong length");
    std::set<std::int64_t> seen;
    for (const std::int64_t r : s.state_rows) {
      if (r < 0 || r > ix.capacity || !seen.insert(r).second)
        bad("optimizer.rows", "row ", r, " is outside the table or given twice");
    }
  }
  return s;
}

/// Builds a keyed table's state, table and optimizer state from what read_table returned, at
/// `capacity` (0: the saved one; another resizes as KeyedEmbedding::resize does).
template <class T, class Opt>
void rebuild(const SavedKeyedTable<T>& s, KeyedState<T>& state, Embedding<T>& table, Opt* opt,
             Index capacity, const std::string& path) {
  state.index() = KeyIndexAccess::restore(s.index);
  table.weight() = s.weight;
  state.pending().assign(s.pending.begin(), s.pending.end());
  state.log().clear();
  for (std::size_t i = 0; i < s.log_keys.size(); ++i)
    state.log().push_back({s.log_keys[i], s.log_steps[i]});
  detail::RowState<T>* rs = nullptr;
  if constexpr (!std::is_same_v<Opt, std::nullptr_t>) {
    if (opt != nullptr) {
      if (!s.optimizer.present) {
        detail::fail_at_byte(path, 8, "keyed checkpoint: no optimizer state was saved, but a ",
                             Opt::name, " asks for it");
      }
      auto& st = RowOptimizerAccess::state(*opt);
      const Index width = RowOptimizerAccess::state_width(*opt, s.d_model);
      if (s.optimizer.name != Opt::name || s.optimizer.planes != st.planes() ||
          s.optimizer.width != width || s.optimizer.with_steps != st.with_steps()) {
        detail::fail_at_byte(path, 8, "keyed checkpoint: the saved optimizer is ", s.optimizer.name,
                             " (", s.optimizer.planes, " planes of ", s.optimizer.width,
                             "), not this ", Opt::name);
      }
      opt->reset();
      RowOptimizerAccess::set_steps(*opt, s.optimizer.steps);
      if (width > 0) {
        st.follow_table(s.index.capacity + 1, width);
        for (std::size_t k = 0; k < s.state_rows.size(); ++k) {
          const Index slot = st.ensure(static_cast<Index>(s.state_rows[k]));
          for (int p = 0; p < st.planes(); ++p)
            for (Index c = 0; c < width; ++c)
              st.data(p, slot)[c] = s.state(static_cast<Index>(k), p * width + c);
          if (s.optimizer.with_steps) st.steps(slot) = s.row_steps[k];
        }
      }
      rs = &st;
    }
  }
  if (capacity > 0 && capacity != s.index.capacity) state.resize(capacity, table, rs);
}

/// rebuild with the optimizer's new state built on `copy` (a copy of *opt made here, engaged only
/// with an optimizer), so `opt` is untouched when it throws: the caller moves `copy` into *opt once
/// everything succeeded.
template <class T, class Opt>
void rebuild_on_copy(const SavedKeyedTable<T>& s, KeyedState<T>& state, Embedding<T>& table,
                     const Opt* opt, std::optional<Opt>& copy, Index capacity,
                     const std::string& path) {
  if constexpr (!std::is_same_v<Opt, std::nullptr_t>) {
    if (opt != nullptr) copy.emplace(*opt);
  }
  rebuild<T, Opt>(s, state, table, copy ? &*copy : nullptr, capacity, path);
}

/// rebuild into a keyed layer, the optimizer's new state built on a copy and moved in only once
/// everything succeeded (so `opt` is untouched when it throws).
template <class T, class L, class Opt>
void rebuild_into(const SavedKeyedTable<T>& s, L& layer, Opt* opt, Index capacity,
                  const std::string& path) {
  std::optional<Opt> copy;
  rebuild_on_copy(s, KeyedAccess::state(layer), KeyedAccess::table(layer), opt, copy, capacity,
                  path);
  if (copy) *opt = std::move(*copy);
}

/// Opens a keyed checkpoint for the public call `where` and checks it holds the layer `layer`.
inline io::SafetensorsFile open_keyed(const std::string& path, const char* layer,
                                      const Where& where = "io::SafetensorsFile") {
  io::SafetensorsFile f = SafetensorsAccess::open(path, where);
  const auto it = f.metadata().find("ember.keyed.layer");
  if (it == f.metadata().end() || it->second != layer) {
    const std::string_view found =
        it == f.metadata().end() ? std::string_view("nothing") : std::string_view(it->second);
    detail::fail_at_byte(path, 8, "keyed checkpoint field 'ember.keyed.layer': expected '", layer,
                         "', found '", found, "'");
  }
  const auto v = f.metadata().find("ember.keyed.format");
  if (v == f.metadata().end() || (v->second != "1" && v->second != "2")) {
    detail::fail_at_byte(path, 8,
                         "keyed checkpoint field 'ember.keyed.format': expected '2' (or '1')");
  }
  return f;
}

inline void stamp_keyed(io::SafetensorsWriter& w, const char* layer) {
  w.metadata("ember.keyed.layer", layer).metadata("ember.keyed.format", "2");
}

/// Writes one keyed table (its state, table and optimizer) as a file of layer `layer`, with the
/// extra __metadata__ entries `meta`, atomically.
template <class T, class Opt>
void save_one(const std::string& path, const char* layer, const KeyedState<T>& state,
              const Embedding<T>& table, const Opt* opt,
              const std::vector<std::pair<std::string, std::string>>& meta) {
  const auto s = gather(state, table, opt);
  io::SafetensorsWriter w;
  stamp_keyed(w, layer);
  for (const auto& [k, v] : meta) w.metadata(k, v);
  add_to(w, "", s);
  w.save(path);
}

/// The "scale" of a keyed checkpoint: one whole finite number (detail::whole_number).
/// Throws: FormatError naming the file and the field when it is missing or malformed.
inline double keyed_scale(const io::SafetensorsFile& f) {
  const auto it = f.metadata().find("scale");
  if (it == f.metadata().end())
    detail::fail_at_byte(f.path(), 8, "keyed checkpoint field 'scale': missing");
  const auto scale = detail::whole_number<double>(it->second);
  if (!scale) {
    detail::fail_at_byte(f.path(), 8,
                         "keyed checkpoint field 'scale': ", detail::quoted(it->second),
                         " is not a finite number");
  }
  return *scale;
}

/// The pooling mode a checkpoint names ("sum", "mean", "max"), or std::nullopt.
inline std::optional<BagMode> parse_mode(const std::string& mode) {
  return parse_name(mode, {BagMode::sum, BagMode::mean, BagMode::max});
}

}  // namespace detail

namespace detail {
/// An ember row optimizer (optim::SGD, Adam, RowwiseAdagrad): what a keyed checkpoint can hold
/// the state of. It keeps the optimizer overloads of save_keyed and load_keyed apart from the
/// forms that take a pointer.
template <class O>
concept KeyedCheckpointOptimizer = requires(const O& o) {
  RowOptimizerAccess::steps(o);
};
}  // namespace detail

namespace io {

/// Options of the keyed checkpoint loaders.
struct KeyedLoadOptions {
  /// The capacity to load into (per table of a KeyedTableBatchedBags); 0: the saved one.
  /// Growing keeps every key on its row; shrinking evicts by the saved policy (as resize).
  Index capacity = 0;
};

/// Writes the whole state of `emb` (rows, keys, steps, counts, scores, the admission sketch, the
/// eviction log, the rows awaiting an optimizer reset) and, with `opt`, the optimizer's step
/// count and per-row state to a safetensors file at `path`, atomically (a failed save leaves any
/// older file as it was). `opt` may be passed as the optimizer or as its address (null: none).
/// Format: docs/keyed.md.
/// Throws: FormatError on I/O failure.
/// Example: `io::save_keyed("users.safetensors", users, adagrad);`
template <class T, class Opt = std::nullptr_t>
void save_keyed(const std::string& path, const KeyedEmbedding<T>& emb, const Opt* opt = nullptr) {
  detail::save_one(path, "KeyedEmbedding", detail::KeyedAccess::state(emb), emb.table(), opt,
                   {{"scale", detail::exact(static_cast<double>(emb.scale()))}});
}

/// save_keyed(path, emb, &opt).
template <class T, detail::KeyedCheckpointOptimizer Opt>
void save_keyed(const std::string& path, const KeyedEmbedding<T>& emb, const Opt& opt) {
  save_keyed(path, emb, &opt);
}

/// Loads a KeyedEmbedding saved by save_keyed, and with `opt` its optimizer state (the optimizer
/// must be of the saved type; its options stay yours). With options.capacity, the table is
/// loaded into another capacity. Training on after loading gives the bits of training on without
/// the checkpoint.
/// Throws: FormatError naming the file and the field for a missing, malformed or inconsistent
///         entry, another layer's file, or an optimizer the file has no state for (or of another
///         type); nothing is loaded and `opt` is untouched then. CapacityError when shrinking
///         without eviction does not fit.
template <class T, class Opt = std::nullptr_t>
[[nodiscard]] KeyedEmbedding<T> load_keyed(const std::string& path, Opt* opt = nullptr,
                                           KeyedLoadOptions options = {}) {
  const io::SafetensorsFile f = detail::open_keyed(path, "KeyedEmbedding", "io::load_keyed");
  const auto s = detail::read_table<T>(f, "");
  const double scale = detail::keyed_scale(f);
  KeyedOptions ko = s.options;
  ko.scale = LookupScale::constant(scale);
  KeyedEmbedding<T> emb(s.index.capacity, s.d_model, ko);
  detail::rebuild_into(s, emb, opt, options.capacity, path);
  return emb;
}

/// load_keyed<T>(path, &opt, options): the optimizer as a training loop holds it.
/// Example: `auto users = io::load_keyed<float>("users.safetensors", adagrad);`
template <class T, detail::KeyedCheckpointOptimizer Opt>
[[nodiscard]] KeyedEmbedding<T> load_keyed(const std::string& path, Opt& opt,
                                           KeyedLoadOptions options = {}) {
  return load_keyed<T>(path, &opt, options);
}

/// save_keyed for a KeyedEmbeddingBag (its mode recorded too). Throws: as save_keyed.
template <class T, class Opt = std::nullptr_t>
void save_keyed(const std::string& path, const KeyedEmbeddingBag<T>& bag,
                const Opt* opt = nullptr) {
  detail::save_one(path, "KeyedEmbeddingBag", detail::KeyedAccess::state(bag), bag.table(), opt,
                   {{"mode", to_string(bag.mode())}});
}

/// save_keyed(path, bag, &opt).
template <class T, detail::KeyedCheckpointOptimizer Opt>
void save_keyed(const std::string& path, const KeyedEmbeddingBag<T>& bag, const Opt& opt) {
  save_keyed(path, bag, &opt);
}

/// load_keyed for a KeyedEmbeddingBag. Throws: as load_keyed.
template <class T, class Opt = std::nullptr_t>
[[nodiscard]] KeyedEmbeddingBag<T> load_keyed_bag(const std::string& path, Opt* opt = nullptr,
                                                  KeyedLoadOptions options = {}) {
  const io::SafetensorsFile f = detail::open_keyed(path, "KeyedEmbeddingBag", "io::load_keyed_bag");
  const auto s = detail::read_table<T>(f, "");
  const auto it = f.metadata().find("mode");
  const std::string text = it == f.metadata().end() ? std::string() : it->second;
  const std::optional<BagMode> mode = detail::parse_mode(text);
  if (!mode) {
    detail::fail_at_byte(path, 8, "keyed checkpoint field 'mode': '", text,
                         "' is not sum, mean or max");
  }
  KeyedEmbeddingBag<T> bag(s.index.capacity, s.d_model, *mode, s.options);
  detail::rebuild_into(s, bag, opt, options.capacity, path);
  return bag;
}

/// load_keyed_bag<T>(path, &opt, options).
template <class T, detail::KeyedCheckpointOptimizer Opt>
[[nodiscard]] KeyedEmbeddingBag<T> load_keyed_bag(const std::string& path, Opt& opt,
                                                  KeyedLoadOptions options = {}) {
  return load_keyed_bag<T>(path, &opt, options);
}

/// save_keyed for a KeyedTableBatchedBags: every table under "table<t>.", the features, and with
/// `optimizers` (one per table, or empty) their state. Throws: as save_keyed; ShapeError if
/// optimizers is neither empty nor one per table.
template <class T, class Opt = optim::SGD<T>>
void save_keyed(const std::string& path, const KeyedTableBatchedBags<T>& bags,
                std::span<Opt> optimizers = {}) {
  using O = std::remove_const_t<Opt>;
  if (!optimizers.empty()) {
    detail::check_extent("save_keyed", "optimizers", 0, bags.num_tables(),
                         static_cast<Index>(optimizers.size()), "num_tables()");
  }
  std::vector<detail::SavedKeyedTable<T>> saved;
  for (Index t = 0; t < bags.num_tables(); ++t) {
    const O* opt = optimizers.empty() ? nullptr : &optimizers[static_cast<std::size_t>(t)];
    saved.push_back(detail::gather(detail::KeyedAccess::state_of(bags, t), bags.table(t), opt));
  }
  io::SafetensorsWriter w;
  detail::stamp_keyed(w, "KeyedTableBatchedBags");
  std::string features;
  for (Index f = 0; f < bags.num_features(); ++f) {
    const BagFeature& feat = bags.feature(f);
    if (f > 0) features += ",";
    features +=
        std::to_string(feat.table) + ":" + to_string(feat.mode) + ":" + (feat.weighted ? "1" : "0");
  }
  w.metadata("tables", std::to_string(bags.num_tables())).metadata("features", features);
  for (Index t = 0; t < bags.num_tables(); ++t)
    detail::add_to(w, "table" + std::to_string(t) + ".", saved[static_cast<std::size_t>(t)]);
  w.save(path);
}

/// save_keyed(path, bags, std::span(optimizers)): the optimizers as a training loop keeps them.
template <class T, detail::KeyedCheckpointOptimizer Opt>
void save_keyed(const std::string& path, const KeyedTableBatchedBags<T>& bags,
                const std::vector<Opt>& optimizers) {
  save_keyed(path, bags, std::span<const Opt>(optimizers));
}

/// load_keyed for a KeyedTableBatchedBags, with `optimizers` (one per table, or empty) receiving
/// their state; options.capacity applies to every table. Throws: as load_keyed; ShapeError if
/// optimizers is neither empty nor one per saved table.
template <class T, class Opt = optim::SGD<T>>
[[nodiscard]] KeyedTableBatchedBags<T> load_keyed_bags(const std::string& path,
                                                       std::span<Opt> optimizers = {},
                                                       KeyedLoadOptions options = {}) {
  const io::SafetensorsFile f =
      detail::open_keyed(path, "KeyedTableBatchedBags", "io::load_keyed_bags");
  const auto bad = [&](const auto&... what) {
    detail::fail_at_byte(path, 8, "keyed checkpoint field '", what...);
  };
  const auto tables_it = f.metadata().find("tables");
  const auto features_it = f.metadata().find("features");
  if (tables_it == f.metadata().end() || features_it == f.metadata().end()) bad("tables': missing");
  const auto count = detail::whole_number<std::int64_t>(tables_it->second);
  if (!count || *count < 1 || *count > 4096)
    bad("tables': ", detail::quoted(tables_it->second), " is not a count in [1, 4096]");
  const std::int64_t nt = *count;
  std::vector<BagFeature> features;
  std::string list = features_it->second;
  std::size_t at = 0;
  while (at <= list.size()) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    const std::string item = list.substr(at, comma - at);
    const std::size_t c1 = item.find(':');
    const std::size_t c2 = c1 == std::string::npos ? c1 : item.find(':', c1 + 1);
    if (c2 == std::string::npos)
      bad("features': ", detail::quoted(item), " is not table:mode:weighted");
    BagFeature feat;
    const auto table = detail::whole_number<std::int64_t>(std::string_view(item).substr(0, c1));
    const std::optional<BagMode> mode = detail::parse_mode(item.substr(c1 + 1, c2 - c1 - 1));
    const std::string weighted = item.substr(c2 + 1);
    if (!table || *table < 0 || *table >= nt || !mode || (weighted != "0" && weighted != "1"))
      bad("features': ", detail::quoted(item), " is not table:mode:weighted");
    feat.table = static_cast<Index>(*table);
    feat.mode = *mode;
    feat.weighted = weighted == "1";
    features.push_back(feat);
    at = comma + 1;
  }
  if (!optimizers.empty()) {
    detail::check_extent("load_keyed_bags", "optimizers", 0, static_cast<Index>(nt),
                         static_cast<Index>(optimizers.size()), "the saved tables");
  }
  std::vector<detail::SavedKeyedTable<T>> saved;
  std::vector<KeyedTableConfig> configs;
  for (long long t = 0; t < nt; ++t) {
    saved.push_back(detail::read_table<T>(f, "table" + std::to_string(t) + "."));
    configs.push_back({saved.back().index.capacity, saved.back().d_model, saved.back().options});
  }
  KeyedTableBatchedBags<T> bags = [&] {
    try {
      return KeyedTableBatchedBags<T>(configs, features);
    } catch (const Error& e) {
      detail::fail_at_byte(path, 8, "keyed checkpoint field 'features': ", e.message());
    }
  }();
  std::vector<Opt> copies(optimizers.begin(), optimizers.end());
  for (long long t = 0; t < nt; ++t) {
    Opt* opt = copies.empty() ? nullptr : &copies[static_cast<std::size_t>(t)];
    detail::rebuild(saved[static_cast<std::size_t>(t)],
                    detail::KeyedAccess::state_of(bags, static_cast<Index>(t)),
                    detail::KeyedAccess::table_of(bags, static_cast<Index>(t)), opt,
                    options.capacity, path);
  }
  std::move(copies.begin(), copies.end(), optimizers.begin());
  return bags;
}

/// load_keyed_bags<T>(path, std::span(optimizers), options).
template <class T, detail::KeyedCheckpointOptimizer Opt>
[[nodiscard]] KeyedTableBatchedBags<T> load_keyed_bags(const std::string& path,
                                                       std::vector<Opt>& optimizers,
                                                       KeyedLoadOptions options = {}) {
  return load_keyed_bags<T>(path, std::span<Opt>(optimizers), options);
}

}  // namespace io
}  // namespace ember::inline EMBER_ISA
