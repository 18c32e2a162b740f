/// InputStem<T>: the full input stem of a transformer - token embedding × √d_model + positions
/// (sinusoidal, or learned as in GPT-2) + optional segment / token-type embedding (BERT) +
/// seeded dropout - fused into one pass forward, with the sparse gradient of every table backward.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/detail/dropout.hpp"
#include "ember/detail/gather.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/embedding.hpp"
#include "ember/errors.hpp"
#include "ember/fused_step.hpp"
#include "ember/init.hpp"
#include "ember/positional.hpp"
#include "ember/random.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

/// Where an InputStem's position rows come from.
enum class PositionKind {
  sinusoidal,  ///< fixed SinusoidalEncoding (Vaswani et al.), no parameters
  learned      ///< a trained max_len x d table (GPT-2's wpe, BERT's position_embeddings)
};

/// Construction options of an InputStem.
struct InputStemOptions {
  Index max_len = 512;                                ///< number of positions, > 0
  PositionKind positions = PositionKind::sinusoidal;  ///< position source
  Index type_vocab_size = 0;       ///< rows of the segment (token-type) table; 0 = no segments
  double dropout = 0.0;            ///< drop probability p in [0, 1)
  std::uint64_t seed = 0;          ///< seeds the initialisation of the tables
  std::uint64_t dropout_seed = 0;  ///< seeds the dropout generator
  double init_std = 0.02;  ///< std of learned position and segment tables (GPT-2/BERT), >= 0
};

/// The gradients of one InputStem backward: one row-sparse gradient per table. `positions` stays
/// empty with sinusoidal positions, `segments` without a segment table.
template <class T>
struct InputStemGrads {
  SparseRowGrad<T> tokens;     ///< of tokens().weight()
  SparseRowGrad<T> positions;  ///< of positions().weight() (learned positions only)
  SparseRowGrad<T> segments;   ///< of segments().weight() (with segments only)
  /// Empties all three, keeping their bound shapes.
  void clear() noexcept {
    tokens.clear();
    positions.clear();
    segments.clear();
  }
};

/// The dropout mask one InputStem forward drew: what its backward needs to route the gradient.
/// Empty (active() false) when the forward applied no dropout (eval mode or p = 0).
template <class T>
class DropoutMask {
 public:
  /// True when the forward dropped elements (the backward must apply the mask).
  [[nodiscard]] bool active() const noexcept { return !keep_.empty(); }
  /// Rows of the forward's output (ids of the batch).
  [[nodiscard]] Index rows() const noexcept { return rows_; }
  /// 1 / (1 - p): the factor of the kept elements.
  [[nodiscard]] T scale() const noexcept { return scale_; }
  /// keep[i·d + c] != 0 when element (i, c) was kept.
  [[nodiscard]] std::span<const std::uint8_t> keep() const noexcept { return keep_; }

 private:
  template <class>
  friend class InputStem;
  std::vector<std::uint8_t> keep_;
  Index rows_ = 0;
  T scale_ = T(1);
};

/// The input stem:
///
///   out[i] = dropout( tokens.weight()[ids[i]] · √d  +  P[offset + i % seq_len]  +  S[seg[i]] )
///
/// for a batch of B sequences of seq_len ids flattened batch-major (row b·seq_len + t).
/// - The √d_model scale belongs to the token lookup only (Embedding's convention); P (sinusoidal
///   or learned) and S (segments) are added unscaled, as in GPT-2 and BERT.
/// - Without segment ids, every row uses segment 0 (BERT's default token_type_ids = 0).
/// - Dropout is inverted dropout: kept elements are multiplied by 1 / (1 - p), dropped ones are
///   0. In training mode with p > 0, each forward draws a fresh mask from the stem's own
///   Random(dropout_seed), one uniform per output element in row-major order, element kept iff
///   uniform() >= p; so a seed fixes every mask of a run. eval() (or p = 0) makes dropout the
///   identity and draws nothing. set_dropout_seed() restarts the stream.
/// - forward into an output returns the DropoutMask it drew; backward takes it, applies it, then
///   gives each table its row-sparse gradient: tokens (scaled by √d, honouring its padding_idx
///   and scale_grad_by_freq), learned positions (one row per position used), segments. The stem
///   keeps no state of a forward for its backward. The tables are ordinary Embedding objects:
///   train them with ember::optim, freeze them, give them padding rows.
///
/// Forward is one pass over the output with the lookup kernel of every table (each output row
/// written once: token, position, segment and mask), bit-identical to a lookup followed by the
/// separate adds; the mask is drawn serially before it, so results are identical for any thread
/// count.
///
/// Example:
/// ```cpp
/// ember::InputStem<float> stem(30522, 768, {.max_len = 512, .positions =
///                              ember::PositionKind::learned, .type_vocab_size = 2, .dropout =
///                              0.1});
/// ember::RowMatrix<float> x(ids.size(), 768);
/// auto mask = stem.forward(ids, segment_ids, /*seq_len=*/128, x);
/// ember::InputStemGrads<float> grads;
/// stem.backward(ids, segment_ids, 128, grad_x, grads, mask);
/// ```
template <class T>
class InputStem {
  static_assert(Scalar<T>, "ember::InputStem<T>: T must be float or double");

 public:
  /// A stem with a fresh token table (ember's default N(0, 1/d) initialiser from options.seed).
  /// Throws:  ShapeError for a non-positive size or a negative type_vocab_size; ValueError for
  ///          dropout outside [0, 1) or a negative / non-finite init_std.
  InputStem(Index vocab_size, Index d_model, const InputStemOptions& options = {})
      : InputStem(Embedding<T>(vocab_size, d_model, options.seed), options) {}

  /// A stem around an existing token table (e.g. Embedding::from_pretrained).
  /// Learned positions are drawn from Random(options.seed + 1), segments from options.seed + 2.
  InputStem(Embedding<T> tokens, const InputStemOptions& options)
      : tokens_(std::move(tokens)), rng_(options.dropout_seed) {
    constexpr const char* where = "InputStem";
    const Index d = tokens_.d_model();
    detail::check_positive_size(where, "max_len", options.max_len);
    detail::check_non_negative_size(where, "type_vocab_size", options.type_vocab_size,
                                    "no segment table");
    detail::check_unit_interval(where, "dropout", options.dropout);
    detail::check_non_negative(where, "init_std", options.init_std);
    const Init init = options.init_std == 0.0 ? Init::zeros() : Init::normal(options.init_std);
    if (options.positions == PositionKind::learned) {
      learned_positions_.emplace(options.max_len, d, init, options.seed + 1);
    } else {
      sinusoid_.emplace(options.max_len, d);
    }
    if (options.type_vocab_size > 0) {
      segments_.emplace(options.type_vocab_size, d, init, options.seed + 2);
    }
    dropout_ = options.dropout;
  }

  /// The token table (scaled by √d at lookup).
  [[nodiscard]] Embedding<T>& tokens() noexcept { return tokens_; }
  [[nodiscard]] const Embedding<T>& tokens() const noexcept { return tokens_; }
  /// Vocabulary size of the token table.
  [[nodiscard]] Index vocab_size() const noexcept { return tokens_.vocab_size(); }
  /// Row width.
  [[nodiscard]] Index d_model() const noexcept { return tokens_.d_model(); }
  /// Number of positions available.
  [[nodiscard]] Index max_len() const noexcept { return position_table().rows(); }

  /// True with learned positions.
  [[nodiscard]] bool learned_positions() const noexcept { return learned_positions_.has_value(); }
  /// The learned position table (added unscaled). Throws StateError with sinusoidal positions.
  [[nodiscard]] Embedding<T>& positions() {
    if (!learned_positions_) throw StateError("InputStem::positions: positions are sinusoidal");
    return *learned_positions_;
  }
  /// The max_len x d rows added for positions, whichever the kind.
  [[nodiscard]] const RowMatrix<T>& position_table() const noexcept {
    return learned_positions_ ? learned_positions_->weight() : sinusoid_->table();
  }

  /// True with a segment (token-type) table.
  [[nodiscard]] bool has_segments() const noexcept { return segments_.has_value(); }
  /// The segment table (added unscaled). Throws StateError if the stem has none.
  [[nodiscard]] Embedding<T>& segments() {
    if (!segments_) throw StateError("InputStem::segments: the stem has no segment embedding");
    return *segments_;
  }

  /// The drop probability.
  [[nodiscard]] double dropout() const noexcept { return dropout_; }
  /// Changes the drop probability. Throws ValueError unless p is in [0, 1).
  void set_dropout(double p) {
    detail::check_unit_interval("InputStem::set_dropout", "dropout", p);
    dropout_ = p;
  }
  /// Restarts the dropout stream from `seed`.
  void set_dropout_seed(std::uint64_t seed) noexcept { rng_ = Random(seed); }
  /// Training mode (dropout active when p > 0). The default.
  void train(bool on = true) noexcept { training_ = on; }
  /// Evaluation mode: dropout is the identity.
  void eval() noexcept { training_ = false; }
  /// True in training mode.
  [[nodiscard]] bool training() const noexcept { return training_; }

  // ---- forward --------------------------------------------------------------------------------

  /// The stem's output for ids (all rows in segment 0 if the stem has segments), into out;
  /// returns the dropout mask it drew, for backward.
  ///
  /// Shapes:  ids[B·seq_len] -> out[B·seq_len, d].
  /// Throws:  IndexError for an id outside [0, vocab_size()) or positions outside [0, max_len());
  ///          ShapeError if seq_len <= 0, ids are not a multiple of seq_len, or out is not n x d.
  ///          out is untouched and no dropout draw is consumed when it throws.
  /// Complexity: O(n·d), one fused pass (+ n·d uniform draws with dropout).
  template <class R>
  DropoutMask<T> forward(const R& ids, Index seq_len, Eigen::Ref<RowMatrix<T>> out,
                         Index offset = 0) {
    return forward_impl(ids, NoSegments{}, seq_len, out, offset);
  }

  /// The stem's output with explicit segment ids (one per id); returns the dropout mask.
  /// Throws:  as above, plus StateError if the stem has no segment table, ShapeError if
  ///          segment_ids.size() != ids.size(), IndexError for a segment id out of range.
  template <class R, class S>
  requires(!std::is_arithmetic_v<S>) DropoutMask<T> forward(const R& ids, const S& segment_ids,
                                                            Index seq_len,
                                                            Eigen::Ref<RowMatrix<T>> out,
                                                            Index offset = 0) {
    return forward_impl(ids, segment_ids, seq_len, out, offset);
  }

  /// Owning form of forward(ids, seq_len, out, offset), for inference (or training without
  /// dropout: the mask is not returned).
  template <class R>
  [[nodiscard]] RowMatrix<T> forward(const R& ids, Index seq_len, Index offset = 0) {
    RowMatrix<T> out(static_cast<Index>(std::size(ids)), d_model());
    static_cast<void>(forward(ids, seq_len, out, offset));
    return out;
  }

  /// Owning form of forward(ids, segment_ids, seq_len, out, offset).
  template <class R, class S>
  requires(!std::is_arithmetic_v<S>)
      [[nodiscard]] RowMatrix<T> forward(const R& ids, const S& segment_ids, Index seq_len,
                                         Index offset = 0) {
    RowMatrix<T> out(static_cast<Index>(std::size(ids)), d_model());
    static_cast<void>(forward(ids, segment_ids, seq_len, out, offset));
    return out;
  }

  // ---- backward -------------------------------------------------------------------------------

  /// Accumulates into grads the gradient of the forward(ids, seq_len, ...) that returned `mask`.
  ///
  /// Shapes:  ids[n], grad_out[n, d] -> grads.tokens (V x d), grads.positions (max_len x d,
  ///          learned only), grads.segments (type_vocab x d, with segments), all row-sparse.
  /// Throws:  as forward for ids and positions; ShapeError if grad_out is not n x d or a gradient
  ///          in grads is bound to another shape; StateError if the mask was drawn for a
  ///          different number of rows. Nothing changes when it throws.
  /// Complexity: O(n log n + n·d) per table.
  template <class R>
  void backward(const R& ids, Index seq_len, const Eigen::Ref<const RowMatrix<T>>& grad_out,
                InputStemGrads<T>& grads, const DropoutMask<T>& mask, Index offset = 0) {
    backward_impl(ids, NoSegments{}, seq_len, grad_out, grads, &mask, offset,
                  accumulate_tokens(grads));
  }

  /// backward with explicit segment ids (as passed to forward).
  template <class R, class S>
  requires(!std::is_arithmetic_v<S>) void backward(const R& ids, const S& segment_ids,
                                                   Index seq_len,
                                                   const Eigen::Ref<const RowMatrix<T>>& grad_out,
                                                   InputStemGrads<T>& grads,
                                                   const DropoutMask<T>& mask, Index offset = 0) {
    backward_impl(ids, segment_ids, seq_len, grad_out, grads, &mask, offset,
                  accumulate_tokens(grads));
  }

  /// backward of a forward that applied no dropout (eval mode or p = 0), without a mask.
  /// Throws:  as backward with a mask, and StateError if the stem is in training mode with
  ///          p > 0 (its forward drew a mask: pass it).
  template <class R>
  void backward(const R& ids, Index seq_len, const Eigen::Ref<const RowMatrix<T>>& grad_out,
                InputStemGrads<T>& grads, Index offset = 0) {
    backward_impl(ids, NoSegments{}, seq_len, grad_out, grads, nullptr, offset,
                  accumulate_tokens(grads));
  }

  /// backward with explicit segment ids, of a forward that applied no dropout.
  template <class R, class S>
  requires(!std::is_arithmetic_v<S>) void backward(const R& ids, const S& segment_ids,
                                                   Index seq_len,
                                                   const Eigen::Ref<const RowMatrix<T>>& grad_out,
                                                   InputStemGrads<T>& grads, Index offset = 0) {
    backward_impl(ids, segment_ids, seq_len, grad_out, grads, nullptr, offset,
                  accumulate_tokens(grads));
  }

  /// backward with the token table's update fused in: the token rows' gradient is summed and
  /// each row stepped by `opt` (any ember::optim optimizer) at once, with no SparseRowGrad
  /// written for it (grads.tokens is left untouched); the position and segment gradients are
  /// accumulated into grads as backward does, for their own optimizers. Bit-identical to
  /// `backward(ids, seq_len, grad_out, grads, mask, offset)` with an empty grads.tokens followed
  /// by `opt.step(tokens(), grads.tokens)`, for any thread count, padding row and frequency
  /// scaling (with `fused` at its defaults).
  ///
  /// Shapes:  as backward.
  /// Throws:  as backward; StateError if the token table is frozen; ValueError for a bad `fused`
  ///          option (or, with the optimizer's check_finite, a non-finite grad_out element).
  ///          Nothing changes when it throws.
  /// Complexity: as backward, plus the update of the u distinct token rows, O(u·d).
  template <class R, class Opt>
  void backward_step(const R& ids, Index seq_len, const Eigen::Ref<const RowMatrix<T>>& grad_out,
                     InputStemGrads<T>& grads, const DropoutMask<T>& mask, Opt& opt,
                     const optim::FusedStepOptions& fused = {}, Index offset = 0) {
    backward_impl(ids, NoSegments{}, seq_len, grad_out, grads, &mask, offset,
                  step_tokens(opt, grad_out, fused), {"InputStem", "backward_step"});
  }

  /// backward_step with explicit segment ids (as passed to forward).
  template <class R, class S, class Opt>
  requires(!std::is_arithmetic_v<S>) void backward_step(
      const R& ids, const S& segment_ids, Index seq_len,
      const Eigen::Ref<const RowMatrix<T>>& grad_out, InputStemGrads<T>& grads,
      const DropoutMask<T>& mask, Opt& opt, const optim::FusedStepOptions& fused = {},
      Index offset = 0) {
    backward_impl(ids, segment_ids, seq_len, grad_out, grads, &mask, offset,
                  step_tokens(opt, grad_out, fused), {"InputStem", "backward_step"});
  }

 private:
  /// The segment ids of a call without them (every row in segment 0).
  struct NoSegments {};

  /// Calls f(ids, segment_ids, with_segments) with both viewed as spans (none for NoSegments).
  template <class R, class S, class F>
  static decltype(auto) with_batch(const R& ids, const S& segment_ids, F&& f) {
    return detail::with_ids(ids, [&](auto span) -> decltype(auto) {
      if constexpr (std::is_same_v<S, NoSegments>) {
        return f(span, std::span<const TokenId>{}, false);
      } else {
        return detail::with_ids(segment_ids,
                                [&](auto segs) -> decltype(auto) { return f(span, segs, true); });
      }
    });
  }

  /// Where the token rows of a backward go (g = grad_out, masked): sink(ids, g, where), after
  /// every check of the backward, accumulates them into grads.tokens or hands them to an
  /// optimizer's fused step.
  [[nodiscard]] auto accumulate_tokens(InputStemGrads<T>& grads) {
    return [&grads, this](auto ids, detail::ConstTableRef<T> g, detail::Where) {
      accumulate(grads.tokens, ids, g, tokens_.scale(), tokens_);
    };
  }
  template <class Opt>
  [[nodiscard]] auto step_tokens(Opt& opt, const Eigen::Ref<const RowMatrix<T>>& grad_out,
                                 const optim::FusedStepOptions& fused) {
    return
        [&opt, &grad_out, &fused, this](auto ids, detail::ConstTableRef<T> g, detail::Where where) {
          const detail::DirectRows<T> rows{g};
          detail::FusedStepAccess::run(
              opt, tokens_,
              detail::fused_rows(ids, rows, false, tokens_.scale(), tokens_.accumulate_options()),
              detail::FusedStepChecks<T>{&grad_out, nullptr, &fused, where});
        };
  }

  // grad += scale · g over `ids` of `table`, all checked by backward_impl (ids, and the gradient's
  // shape by check_shape): no check again.
  template <class Id>
  static void accumulate(SparseRowGrad<T>& grad, std::span<const Id> ids,
                         detail::ConstTableRef<T> g, T scale, const Embedding<T>& table) {
    detail::SparseRowGradAccess::accumulate_validated(grad, ids, detail::DirectRows<T>{g},
                                                      table.d_model(), scale, table.vocab_size(),
                                                      table.accumulate_options(), false);
  }

  template <class Id, class SegId>
  void check_batch(detail::Where where, std::span<const Id> ids, std::span<const SegId> seg_ids,
                   bool with_segments, Index seq_len, Index offset) const {
    const auto n = static_cast<Index>(ids.size());
    detail::check_positions(where, seq_len, offset, max_len());
    detail::check_whole_sequences(where, "ids are", n, seq_len);
    detail::check_ids(ids, vocab_size(), where);
    if (with_segments) {
      if (!segments_) {
        throw StateError(detail::message(where,
                                         "segment ids were given but the stem has no segment "
                                         "embedding (InputStemOptions::type_vocab_size = 0)"));
      }
      detail::check_entries(where, "segment_ids", n, static_cast<Index>(seg_ids.size()),
                            "the number of ids");
      detail::check_ids(seg_ids, segments_->vocab_size(), where);
    }
  }

  template <class R, class S>
  DropoutMask<T> forward_impl(const R& ids_in, const S& segments_in, Index seq_len,
                              Eigen::Ref<RowMatrix<T>> out, Index offset) {
    return with_batch(ids_in, segments_in, [&](auto ids, auto seg_ids, bool with_segments) {
      constexpr detail::Where where{"InputStem", "forward"};
      const auto n = static_cast<Index>(ids.size());
      check_batch(where, ids, seg_ids, with_segments, seq_len, offset);
      detail::check_lookup_out(where, n, d_model(), out.rows(), out.cols());
      DropoutMask<T> mask;
      mask.rows_ = n;
      if (training_ && dropout_ > 0.0) {
        detail::draw_keep_mask(rng_, dropout_, static_cast<std::size_t>(n * d_model()), mask.keep_);
        mask.scale_ = static_cast<T>(1.0 / (1.0 - dropout_));
      }
      detail::RowAddends<T, typename decltype(seg_ids)::value_type> add;
      add.positions = detail::const_table(position_table());
      add.seq_len = seq_len;
      add.offset = offset;
      if (segments_) {
        add.segments = detail::const_table(segments_->weight());
        add.segment_ids = seg_ids;
      }
      if (mask.active()) {
        add.keep = mask.keep_.data();
        add.keep_scale = mask.scale_;
      }
      detail::gather<T>(detail::rows_of(tokens_), ids, tokens_.scale(), add,
                        detail::mutable_table(out));
      return mask;
    });
  }

  template <class R, class S, class TokenSink>
  void backward_impl(const R& ids_in, const S& segments_in, Index seq_len,
                     const Eigen::Ref<const RowMatrix<T>>& grad_out, InputStemGrads<T>& grads,
                     const DropoutMask<T>* mask, Index offset, TokenSink&& token_sink,
                     detail::Where where = {"InputStem", "backward"}) {
    with_batch(ids_in, segments_in, [&](auto ids, auto seg_ids, bool with_segments) {
      const auto n = static_cast<Index>(ids.size());
      check_batch(where, ids, seg_ids, with_segments, seq_len, offset);
      detail::check_backward_grad_out(where, n, d_model(), grad_out.rows(), grad_out.cols());
      using Access = detail::SparseRowGradAccess;
      Access::check_shape(grads.tokens, where, vocab_size(), d_model(), "the token table");
      if (learned_positions_) {
        Access::check_shape(grads.positions, where, max_len(), d_model(), "the position table");
      }
      if (segments_) {
        Access::check_shape(grads.segments, where, segments_->vocab_size(), d_model(),
                            "the segment table");
      }
      if (mask == nullptr && training_ && dropout_ > 0.0) {
        throw StateError(detail::message(
            where, "the stem applies dropout; pass the DropoutMask its forward returned"));
      }
      if (mask != nullptr && mask->active() && mask->rows() != n) {
        throw StateError(detail::message(where, "the dropout mask was drawn for ", mask->rows(),
                                         " rows, but grad_out has ", n,
                                         "; pass the mask of this batch's forward"));
      }

      // Everything validated: from here on only the token sink throws (an optimizer's own checks,
      // before it changes anything), and it runs first.
      detail::ConstTableRef<T> g = detail::const_table(grad_out);
      RowMatrix<T> masked;
      if (mask != nullptr && mask->active()) {
        masked.resize(n, d_model());
        detail::apply_keep_mask(g, mask->keep_.data(), mask->scale_, detail::mutable_table(masked));
        g = detail::const_table(masked);
      }
      token_sink(ids, g, where);
      // The position rows (offset + i % seq_len, checked by check_positions) and the segment ids
      // (checked by check_batch) are in range: accumulated without a second check.
      std::vector<TokenId> rows;
      if (learned_positions_) {
        rows.resize(static_cast<std::size_t>(n));
        for (Index i = 0; i < n; ++i) rows[static_cast<std::size_t>(i)] = offset + i % seq_len;
        accumulate(grads.positions, std::span<const TokenId>(rows), g, T(1), *learned_positions_);
      }
      if (segments_) {
        if (with_segments) {
          accumulate(grads.segments, seg_ids, g, T(1), *segments_);
        } else {
          rows.assign(static_cast<std::size_t>(n), 0);
          accumulate(grads.segments, std::span<const TokenId>(rows), g, T(1), *segments_);
        }
      }
    });
  }

  Embedding<T> tokens_;
  std::optional<Embedding<T>> learned_positions_;
  std::optional<SinusoidalEncoding<T>> sinusoid_;
  std::optional<Embedding<T>> segments_;
  double dropout_ = 0.0;
  bool training_ = true;
  Random rng_;
};

}  // namespace ember::inline EMBER_ISA
