/// The public operations shared by ember's reduced-precision tables (ReducedEmbedding<half|bf16>,
/// QuantizedEmbedding): float lookup, fused lookup + positions and tied logits over rows decoded
/// on the fly, written once for every storage format.
// SPDX-License-Identifier: MIT
#pragma once

#include <memory>
#include <span>
#include <string>
#include <type_traits>

#include <Eigen/Core>

#include "ember/detail/gather_convert.hpp"
#include "ember/detail/lookup.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/detail/validate.hpp"
#include "ember/errors.hpp"
#include "ember/positional.hpp"
#include "ember/tied_logits.hpp"
#include "ember/types.hpp"

namespace ember::detail {

/// CRTP base of every decoded table (ReducedEmbedding, ReducedEmbeddingView, QuantizedEmbedding):
/// forward, the fused lookup, tied logits and the float master copy they may use. Derived provides
/// table() (a row decoder, see gather_convert.hpp), vocab_size(), d_model(), scale() (float) and
/// the static names forward_name, logits_name, logits_backward_name and set_float_master_name
/// used in error messages. The master is used only while its shape is the table's (an owner's
/// table may be reshaped after set_float_master): else logits throw StateError.
template <class Derived>
class DecodedTableOps {
 public:
  // ---- the float master copy for logits -----------------------------------------------------

  /// Keeps `master` (V x d, float) as the table used by logits and logits_backward.
  /// Throws: ShapeError if its shape differs from the table's; nothing changes then.
  void set_float_master(RowMatrix<float> master) {
    constexpr const char* where = Derived::set_float_master_name;
    check_extent(where, "master", 0, self().vocab_size(), master.rows(), "vocab_size");
    check_extent(where, "master", 1, self().d_model(), master.cols(), "d_model");
    master_ = std::make_shared<const RowMatrix<float>>(std::move(master));
  }
  /// Drops the float master: logits decode the stored rows again.
  void clear_float_master() noexcept { master_.reset(); }
  /// The float master copy, or null.
  [[nodiscard]] const RowMatrix<float>* float_master() const noexcept { return master_.get(); }

  // ---- lookup and logits --------------------------------------------------------------------

  /// Returns decode(table.row(ids[i])) · scale() for each i, computed and returned in float.
  ///
  /// Shapes:  ids[n] -> out[n, d] (float).
  /// Throws:  IndexError if some ids[i] is outside [0, vocab_size()).
  /// Complexity: O(n·d); reads n · (bytes per row) of the table.
  template <class R>
  [[nodiscard]] RowMatrix<float> forward(const R& ids) const {
    return with_ids(ids, [&](auto span) {
      check_ids(span, self().vocab_size(), Derived::forward_name);
      RowMatrix<float> out(static_cast<Index>(span.size()), self().d_model());
      gather_decode<float>(self().table(), span, self().scale(), no_positions(), 0, 0,
                           mutable_table(out));
      return out;
    });
  }

  /// Writes decode(table.row(ids[i])) · scale() into out.row(i) (out may be a block).
  /// Throws:  IndexError for an id out of range; ShapeError if out is not n x d. `out` is
  ///          untouched when it throws.
  template <class R>
  void forward(const R& ids, Eigen::Ref<RowMatrix<float>> out) const {
    forward_as<float>(ids, out);
  }

  /// hidden · Wᵀ, the tied output projection, in float: from the float master copy when one is
  /// kept (exact float logits), else from the stored rows decoded 4096 at a time (never the whole
  /// table at once).
  /// Shapes:  hidden[n, d] -> logits[n, V].
  /// Throws:  ShapeError if hidden has not d columns; StateError if the float master no longer has
  ///          the table's shape (weight() reshaped after set_float_master).
  /// Complexity: 2·n·V·d flops, plus V·d decodes without a master copy.
  [[nodiscard]] RowMatrix<float> logits(const Eigen::Ref<const RowMatrix<float>>& hidden) const {
    constexpr const char* where = Derived::logits_name;
    check_logits(where, self().vocab_size(), self().d_model(), hidden.rows(), hidden.cols());
    const RowMatrix<float>* master = checked_master(where);
    RowMatrix<float> out(hidden.rows(), self().vocab_size());
    logits_unchecked(master, hidden, out);
    return out;
  }

  /// Writes the logits into out (n x V), which must not overlap hidden.
  /// Throws: ShapeError on a shape mismatch, StateError as logits(hidden); out is untouched then.
  void logits(const Eigen::Ref<const RowMatrix<float>>& hidden,
              Eigen::Ref<RowMatrix<float>> out) const {
    constexpr const char* where = Derived::logits_name;
    check_logits(where, self().vocab_size(), self().d_model(), hidden.rows(), hidden.cols(),
                 out.rows(), out.cols());
    logits_unchecked(checked_master(where), hidden, out);
  }

  /// Backward of logits(): grad_hidden = grad_logits · W (assigned, W decoded or the master) and
  /// grad_weight += grad_logitsᵀ · hidden (accumulated in float, V x d).
  /// Throws: ShapeError on any mismatch, StateError as logits(hidden); nothing is written then.
  void logits_backward(const Eigen::Ref<const RowMatrix<float>>& hidden,
                       const Eigen::Ref<const RowMatrix<float>>& grad_logits,
                       Eigen::Ref<RowMatrix<float>> grad_hidden,
                       Eigen::Ref<RowMatrix<float>> grad_weight) const {
    constexpr const char* where = Derived::logits_backward_name;
    const Index v = self().vocab_size();
    const Index d = self().d_model();
    const Index n = hidden.rows();
    check_extent(where, "hidden", 1, d, hidden.cols(), "d_model");
    check_extent(where, "grad_logits", 0, n, grad_logits.rows(), "hidden's rows");
    check_extent(where, "grad_logits", 1, v, grad_logits.cols(), "vocab_size");
    check_extent(where, "grad_hidden", 0, n, grad_hidden.rows(), "hidden's rows");
    check_extent(where, "grad_hidden", 1, d, grad_hidden.cols(), "d_model");
    check_extent(where, "grad_weight", 0, v, grad_weight.rows(), "vocab_size");
    check_extent(where, "grad_weight", 1, d, grad_weight.cols(), "d_model");
    if (const RowMatrix<float>* master = checked_master(where)) {
      grad_hidden.noalias() = grad_logits * *master;
    } else {
      logits_backward_decode(self().table(), grad_logits, grad_hidden);
    }
    grad_weight.noalias() += grad_logits.transpose() * hidden;
  }

  /// The fused lookup: out[i] = decode(W[ids[i]]) · scale() + positions[offset + i % seq_len],
  /// in float, one pass (the free embed_with_positions overloads call this).
  /// Throws: as ember::embed_with_positions.
  template <class R>
  void embed_with_positions(const Eigen::Ref<const RowMatrix<float>>& positions, const R& ids,
                            Eigen::Ref<RowMatrix<float>> out, Index seq_len,
                            Index offset = 0) const {
    with_ids(ids, [&](auto span) {
      constexpr const char* where = "ember::embed_with_positions";
      check_fused(where, static_cast<Index>(span.size()), self().d_model(), positions.rows(),
                  positions.cols(), out.rows(), out.cols(), seq_len, offset);
      check_ids(span, self().vocab_size(), where);
      gather_decode<float>(self().table(), span, self().scale(), const_table(positions), seq_len,
                           offset, mutable_table(out));
    });
  }

 protected:
  /// forward into an output of element type O (float, or the storage type).
  template <class O, class R>
  void forward_as(const R& ids, Eigen::Ref<RowMatrix<O>> out) const {
    with_ids(ids, [&](auto span) {
      constexpr const char* where = Derived::forward_name;
      check_lookup_out(where, static_cast<Index>(span.size()), self().d_model(), out.rows(),
                       out.cols());
      check_ids(span, self().vocab_size(), where);
      gather_decode<O>(self().table(), span, self().scale(), no_positions(), 0, 0,
                       mutable_table(out));
    });
  }

 protected:
  /// Shares `other`'s float master, or none (a view of a ReducedEmbedding): shared ownership, so
  /// the master stays alive when `other` later replaces or clears its own.
  template <class OtherDerived>
  void share_float_master(const DecodedTableOps<OtherDerived>& other) noexcept {
    master_ = other.master_;
  }

 private:
  template <class>
  friend class DecodedTableOps;

  [[nodiscard]] const Derived& self() const noexcept { return static_cast<const Derived&>(*this); }
  static ConstTableRef<float> no_positions() noexcept { return {nullptr, 0, 0, 0}; }

  /// The float master (or null), checked against the table's shape: an owner's weight() can be
  /// given another shape after set_float_master, and a stale master must not reach a GEMM.
  /// Throws: StateError naming `where` and both shapes.
  [[nodiscard]] const RowMatrix<float>* checked_master(const char* where) const {
    const RowMatrix<float>* master = master_.get();
    const Index v = self().vocab_size();
    const Index d = self().d_model();
    if (master != nullptr && (master->rows() != v || master->cols() != d)) [[unlikely]] {
      throw StateError(std::string(where) + ": the float master is " +
                       std::to_string(master->rows()) + " x " + std::to_string(master->cols()) +
                       " but the table is " + std::to_string(v) + " x " + std::to_string(d) +
                       "; set_float_master again or clear_float_master()");
    }
    return master;
  }

  void logits_unchecked(const RowMatrix<float>* master,
                        const Eigen::Ref<const RowMatrix<float>>& hidden,
                        Eigen::Ref<RowMatrix<float>> out) const {
    if (master != nullptr) {
      out.noalias() = hidden * master->transpose();
    } else {
      logits_decode(self().table(), hidden, out);
    }
  }

  // Never written, only replaced: copies share it, so copying a table or view copies no floats.
  std::shared_ptr<const RowMatrix<float>> master_;
};

}  // namespace ember::detail

namespace ember {

/// embed_with_positions over a reduced-precision table (ReducedEmbedding, QuantizedEmbedding):
/// rows decoded, scaled and added to float positions in one pass, written as float.
/// Shapes and Throws: as embed_with_positions over an Embedding<float>.
template <class Derived, class R>
void embed_with_positions(const detail::DecodedTableOps<Derived>& tokens,
                          const Eigen::Ref<const RowMatrix<float>>& positions, const R& ids,
                          Eigen::Ref<RowMatrix<float>> out, Index seq_len, Index offset = 0) {
  tokens.embed_with_positions(positions, ids, out, seq_len, offset);
}

}  // namespace ember
