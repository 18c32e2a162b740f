/// Table<Codec, Holder>: an embedding table as two independent choices, how a row is stored (a
/// codec of ember/codec/) and who owns the bytes (Owned or Borrowed), with lookup, fused
/// positions, backward, tied logits and their backward written once for every combination.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <concepts>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>

#include <Eigen/Core>

#include "ember/check.hpp"
#include "ember/codec/concepts.hpp"
#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/detail/gather.hpp"
#include "ember/detail/logits.hpp"
#include "ember/detail/prefetch.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/errors.hpp"
#include "ember/init.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

/// The constant a table's lookup multiplies every row by, fixed when the table is built: √d_model
/// by default (Vaswani et al. 2017, §3.4), or a model's own (1 for LLaMA and GPT-2; Gemma's
/// √d_model rounded to bfloat16), rounded once to the table's value type. Never used by logits.
class LookupScale {
 public:
  /// √d_model (the default).
  [[nodiscard]] static LookupScale sqrt_d_model() noexcept { return {}; }
  /// No scale: lookups return the stored rows (LLaMA, GPT-2).
  [[nodiscard]] static LookupScale none() noexcept { return constant(1.0); }
  /// A fixed constant, rounded once to the table's value type.
  /// Throws: ValueError unless value is finite.
  [[nodiscard]] static LookupScale constant(double value) {
    detail::check_finite_value("LookupScale::constant", "value", value);
    LookupScale s;
    s.value_ = value;
    s.fixed_ = true;
    return s;
  }
  /// The scale of a table of width d_model, in the table's value type V.
  template <class V>
  [[nodiscard]] V resolve(Index d_model) const noexcept {
    return static_cast<V>(fixed_ ? value_ : std::sqrt(static_cast<double>(d_model)));
  }

 private:
  double value_ = 0.0;
  bool fixed_ = false;
};

template <class Codec, template <class> class Holder>
class Table;

namespace detail {
/// ember's own kernels' door into a table's stored rows (not for users).
struct TableAccess {
  template <class Tab>
  [[nodiscard]] static auto rows(const Tab& table) noexcept {
    return table.codec_rows();
  }
  /// The lookup of Table::forward for a caller that validated its input (every id in
  /// [0, vocab_size()), `out` n x d, as the keyed layers do for the rows their index gave):
  /// nothing is checked again.
  template <class Tab, class Id>
  static void forward_validated(const Tab& table, std::span<const Id> ids,
                                Eigen::Ref<RowMatrix<typename Tab::Value>> out) {
    gather<typename Tab::Value, codec::StreamingDecode<typename Tab::Codec>>(
        table.codec_rows(), ids, table.scale(), nullptr, mutable_table(out));
  }
  /// The accumulation of Table::backward for a caller that validated its input (every id in
  /// [0, vocab_size()), grad_out n x d, `grad` checked by SparseRowGradAccess::check_shape), with
  /// the table's `options` (Embedding::accumulate_options): nothing is checked again.
  template <class Tab, class Id>
  static void backward_validated(const Tab& table, std::span<const Id> ids,
                                 const Eigen::Ref<const RowMatrix<typename Tab::Value>>& grad_out,
                                 SparseRowGrad<typename Tab::Value>& grad,
                                 AccumulateOptions options) {
    using V = typename Tab::Value;
    SparseRowGradAccess::accumulate_validated(grad, ids, DirectRows<V>{const_table(grad_out)},
                                              table.d_model(), table.scale(), table.vocab_size(),
                                              options, false);
  }
};
/// The stored rows of any ember table, as the kernels take them.
template <class Tab>
[[nodiscard]] auto rows_of(const Tab& table) noexcept {
  return TableAccess::rows(table);
}
}  // namespace detail

/// Holder: the table owns its rows (a RowMatrix of vocab_size x units-per-row units).
template <class Codec>
class Owned {
 public:
  /// The stored table as bytes, vocab_size · row_bytes() of them, rows packed.
  [[nodiscard]] std::span<const std::uint8_t> bytes() const noexcept {
    return {reinterpret_cast<const std::uint8_t*>(storage_.data()),
            static_cast<std::size_t>(storage_.size()) * sizeof(typename Codec::Unit)};
  }

 protected:
  static constexpr const char* name = Codec::family;
  Owned(RowMatrix<typename Codec::Unit> storage, Index d, Codec codec)
      : storage_(std::move(storage)), d_(d), codec_(std::move(codec)) {}

  [[nodiscard]] detail::CodecRows<Codec> codec_rows() const noexcept {
    return {codec_, storage_.data(), storage_.rows(), d_, storage_.cols()};
  }
  [[nodiscard]] const Codec& stored_codec() const noexcept { return codec_; }

  RowMatrix<typename Codec::Unit> storage_;
  Index d_;
  Codec codec_;
};

/// Holder: the table reads rows it does not own (caller memory or a file mapping), optionally
/// keeping their owner alive through a shared handle.
template <class Codec>
class Borrowed {
 public:
  /// Units (elements of the storage type) between the starts of consecutive rows.
  [[nodiscard]] Index row_stride() const noexcept { return view_.stride; }
  /// First unit of row 0.
  [[nodiscard]] const typename Codec::Unit* data() const noexcept { return view_.data; }
  /// The owner the view keeps alive (null for caller memory).
  [[nodiscard]] const std::shared_ptr<const void>& keep_alive() const noexcept {
    return keep_alive_;
  }

 protected:
  static constexpr const char* name = Codec::view_family;
  Borrowed(const typename Codec::Unit* data, Index rows, Index d, Index stride,
           std::shared_ptr<const void> keep_alive, Codec codec)
      : view_{codec, data, rows, d, stride}, keep_alive_(std::move(keep_alive)) {}

  [[nodiscard]] const detail::CodecRows<Codec>& codec_rows() const noexcept { return view_; }
  [[nodiscard]] const Codec& stored_codec() const noexcept { return view_.codec; }

  detail::CodecRows<Codec> view_;
  std::shared_ptr<const void> keep_alive_;
};

/// True for every ember table type (Table<Codec, Holder> and the types derived from it).
template <class T>
concept EmbeddingTable = requires {
  T::is_ember_table;
}
&&T::is_ember_table;

/// An embedding table: vocab_size rows of d_model values, each row stored by `Codec` and held by
/// `Holder` (Owned or Borrowed). Every operation below is the same code for every codec and
/// holder; the names users know are this template: Embedding<T> (Plain<T>, Owned, plus training
/// state), EmbeddingView<T> (Plain<T>, Borrowed), ReducedEmbedding<S> / ReducedEmbeddingView<S>
/// (Reduced<S>), QuantizedEmbedding / QuantizedEmbeddingView (Int8Rowwise).
///
/// Conventions:
/// - Lookup returns decode(row) · scale() in the codec's value type (T for Plain<T>, float for
///   every other codec). scale() is fixed at construction (LookupScale) and never stored.
/// - Ids are any contiguous range of integers, checked once at the door: an id outside
///   [0, vocab_size) throws IndexError naming its position, value and bound, in every build type,
///   and nothing is written.
/// - Tied logits (hidden · Wᵀ) never take the scale.
///
/// Thread safety: const members may run concurrently on one table (while borrowed memory is
/// unchanged). With OpenMP enabled by the including program, lookups and backward split their
/// loops across threads; results are bit-identical for any thread count.
template <class C, template <class> class H>
class Table : public H<C> {
  static_assert(
      codec::RowCodec<C>,
      "ember::Table<C, Holder>: C must meet the codec contract of ember/codec/concepts.hpp");
  using Base = H<C>;
  static constexpr bool owned = std::is_same_v<H<C>, Owned<C>>;
  static constexpr bool borrowed = std::is_same_v<H<C>, Borrowed<C>>;
  static_assert(
      !owned || codec::OwnedCodec<C>,
      "ember::Table<C, Owned>: an owning table needs a default-constructible codec with a "
      "static units_per_row (codec::OwnedCodec)");

 public:
  /// How rows are stored.
  using Codec = C;
  /// The element type of the stored rows (T, Eigen::half, std::uint8_t, ...).
  using Unit = typename C::Unit;
  /// What lookups compute in and return: T for Plain<T>, float otherwise.
  using Value = typename C::Value;
  /// The same as Value.
  using Scalar = Value;
  /// Marks ember tables (see EmbeddingTable).
  static constexpr bool is_ember_table = true;
  /// True when a row is d_model units of the storage type (plain and 16-bit tables): weight()
  /// then views the stored table as a matrix.
  static constexpr bool element_rows = C::element_rows;
  /// The matrix weight() returns for a view: read-only, row-major, rows row_stride() apart.
  using Map = Eigen::Map<const RowMatrix<Unit>, Eigen::Unaligned, Eigen::OuterStride<>>;

  // ---- construction: views --------------------------------------------------------------------

  /// A view of `vocab_size` rows of `d_model` values at `data`, row r at data + r · row_stride
  /// units (-1: packed rows), holding `keep_alive` (the memory's owner, if given) while it lives.
  /// Throws:  ShapeError if a size is not positive, row_stride is below a packed row (other than
  ///          -1) or the codec cannot store rows of d_model values; ValueError if data is null or
  ///          not aligned to alignof(Unit).
  Table(const Unit* data, Index vocab_size, Index d_model, Index row_stride = -1,
        std::shared_ptr<const void> keep_alive = {},
        LookupScale scale = {}) requires(borrowed&& std::is_default_constructible_v<C>)
      : Table(C{}, data, vocab_size, d_model, row_stride, std::move(keep_alive), scale) {}

  /// A view as above over rows of a codec with state (e.g. a block format chosen at run time).
  Table(C codec, const Unit* data, Index vocab_size, Index d_model, Index row_stride,
        std::shared_ptr<const void> keep_alive = {}, LookupScale scale = {}) requires(borrowed)
      : Base(data, vocab_size, d_model, checked_view(codec, data, vocab_size, d_model, row_stride),
             std::move(keep_alive), codec),
        scale_(scale.template resolve<Value>(d_model)) {}

  /// A view of a row-major Eigen object of Unit with direct access (a RowMatrix, a block, a Map,
  /// Embedding::weight()), which must outlive the view. Throws: as the pointer constructor.
  template <class Derived>
  explicit Table(const Eigen::MatrixBase<Derived>& table,
                 std::shared_ptr<const void> keep_alive = {},
                 LookupScale scale = {}) requires(borrowed&& element_rows)
      : Table(detail::const_table(table.derived()).data, table.rows(), table.cols(),
              detail::const_table(table.derived()).stride, std::move(keep_alive), scale) {
    static_assert(std::is_same_v<typename Derived::Scalar, Unit>,
                  "ember: a view's matrix must hold the table's storage type");
  }

  /// A view of an owning table of the same codec, with its scale and the float master it has now
  /// (if any, kept alive; later set_float_master or clear_float_master calls on either side do not
  /// reach the other). The table must outlive the view and keep its rows.
  template <class Owner>
  requires(borrowed&& std::derived_from<Owner, Table<C, Owned>>) explicit Table(const Owner& owner)
      : Base(detail::rows_of(owner).data, owner.vocab_size(), owner.d_model(),
             detail::rows_of(owner).stride, {}, owner.codec()),
        scale_(owner.scale()),
        master_(owner.master_) {}

  /// Views of temporaries would dangle at once: they do not compile.
  explicit Table(RowMatrix<Unit>&&) requires(borrowed) = delete;
  template <class Owner>
  requires(borrowed&& std::derived_from<Owner, Table<C, Owned>>) explicit Table(const Owner&&) =
      delete;

  // ---- construction: owning tables ------------------------------------------------------------

  /// Adopts a table already in the storage type (moved in, not copied when an rvalue).
  /// Throws: ShapeError if the table has no rows or no columns.
  explicit Table(RowMatrix<Unit> table, LookupScale scale = {}) requires(owned&& element_rows)
      : Table(adopted(std::move(table)), scale) {}

  /// A vocab_size x d_model table filled by `init` from `seed` in the value type (then rounded to
  /// a 16-bit codec). Throws: ShapeError if a size is not positive; ValueError for a bad `init`.
  Table(Index vocab_size, Index d_model, const Init& init, std::uint64_t seed = 0,
        LookupScale scale = {}) requires(owned&& element_rows)
      : Base(initial(vocab_size, d_model, init, seed), d_model, C{}),
        scale_(scale.template resolve<Value>(d_model)) {}

  /// A vocab_size x d_model table initialised N(0, 1/d_model) from `seed`: a scaled lookup then
  /// has unit variance per element. Throws: ShapeError if a size is not positive.
  Table(Index vocab_size, Index d_model, std::uint64_t seed = 0,
        LookupScale scale = {}) requires(owned&& element_rows)
      : Table(vocab_size, d_model, Init::normal(), seed, scale) {}

  /// Encodes a float or double table[V, d] into the codec (16-bit: round to nearest even; int8:
  /// FBGEMM's row-wise quantization), optionally keeping a float copy as the master for logits.
  /// Throws:  ShapeError if the table is empty; ValueError naming the row, column and value of a
  ///          non-finite entry or of one that overflows a 16-bit storage type. Complexity: O(V·d).
  template <class Derived>
  [[nodiscard]] static Table from_float(const Eigen::MatrixBase<Derived>& table,
                                        bool keep_float_master = false,
                                        LookupScale scale = {}) requires(owned && !C::is_plain &&
                                                                         codec::EncodingCodec<C>) {
    return Table(encoded(table, keep_float_master, where("from_float")), scale);
  }

  // ---- shape and storage ----------------------------------------------------------------------

  /// Number of rows V.
  [[nodiscard]] Index vocab_size() const noexcept { return this->codec_rows().rows; }
  /// Values per row.
  [[nodiscard]] Index d_model() const noexcept { return this->codec_rows().d; }
  /// The codec of the stored rows.
  [[nodiscard]] const C& codec() const noexcept { return this->stored_codec(); }
  /// Bytes of one stored row (without the padding of a longer stride).
  [[nodiscard]] Index row_bytes() const noexcept { return this->codec_rows().row_bytes(); }
  /// Bytes of the stored rows, vocab_size() · row_bytes().
  [[nodiscard]] std::size_t storage_bytes() const noexcept {
    return static_cast<std::size_t>(vocab_size()) * static_cast<std::size_t>(row_bytes());
  }
  /// The lookup scale, fixed at construction (√d_model unless a LookupScale said otherwise).
  [[nodiscard]] Value scale() const noexcept { return scale_; }
  /// The storage format ("f32", "f16", "bf16", "int8_rowwise", ...).
  [[nodiscard]] const char* codec_name() const noexcept { return this->codec().name(); }

  /// The stored table, vocab_size x d_model, unscaled (plain and 16-bit tables).
  [[nodiscard]] const RowMatrix<Unit>& weight() const noexcept requires(owned&& element_rows) {
    return this->storage_;
  }
  /// The stored table for in-place updates (optimizer steps, loading): its values can change, its
  /// shape cannot (Embedding::resize changes the vocabulary).
  [[nodiscard]] Eigen::Map<RowMatrix<Unit>> weight() noexcept requires(owned&& element_rows) {
    return {this->storage_.data(), this->storage_.rows(), this->storage_.cols()};
  }
  /// The viewed table, vocab_size x d_model, unscaled (plain and 16-bit views).
  [[nodiscard]] Map weight() const noexcept requires(borrowed&& element_rows) {
    const auto& v = this->view_;
    return Map(v.data, v.rows, v.d, Eigen::OuterStride<>(v.stride));
  }

  // ---- lookup ---------------------------------------------------------------------------------

  /// Returns decode(row ids[i]) · scale() for each i, in the value type.
  ///
  /// Shapes:  ids[n] -> out[n, d].
  /// Throws:  IndexError if some ids[i] is outside [0, vocab_size()).
  /// Complexity: O(n·d); reads n rows; ids are checked once before any copy.
  template <class R>
  [[nodiscard]] RowMatrix<Value> forward(const R& ids) const {
    RowMatrix<Value> out(static_cast<Index>(std::ranges::size(ids)), d_model());
    forward(ids, out);
    return out;
  }

  /// As forward(ids), into out (n x d; a block of a larger matrix works).
  /// Throws:  as forward(ids); ShapeError if out is not n x d. `out` is untouched when it throws.
  template <class R>
  void forward(const R& ids, Eigen::Ref<RowMatrix<Value>> out) const {
    forward_as<Value>(ids, out);
  }

  /// forward into a buffer of the storage type of a 16-bit codec (element rows, not plain): the
  /// float result rounded to it (round to nearest even; a value beyond its range becomes ±inf, as
  /// a cast would). Throws: as forward(ids, out).
  template <class R>
  void forward(const R& ids, Eigen::Ref<RowMatrix<Unit>> out) const
      requires(element_rows && !C::is_plain) {
    forward_as<Unit>(ids, out);
  }

  /// The fused lookup: out[i] = decode(row ids[i]) · scale() + positions[offset + i % seq_len],
  /// one pass per output row, bit-identical to forward followed by SinusoidalEncoding::add_to.
  /// `positions` is any max_len x d table (sinusoidal, or learned positions, added unscaled).
  ///
  /// Shapes:  ids[B·seq_len] (batch-major), positions[max_len, d] -> out[B·seq_len, d].
  /// Throws:  IndexError for an id outside [0, V) or offset + seq_len > max_len (or offset < 0);
  ///          ShapeError if seq_len <= 0, ids.size() is not a multiple of seq_len, out is not
  ///          n x d, or positions has not d columns. `out` is untouched when it throws.
  /// Complexity: O(n·d), one pass.
  template <class R>
  void embed_with_positions(const Eigen::Ref<const RowMatrix<Value>>& positions, const R& ids,
                            Eigen::Ref<RowMatrix<Value>> out, Index seq_len,
                            Index offset = 0) const {
    detail::with_ids(ids, [&](auto span) {
      constexpr const char* where_fused = "ember::embed_with_positions";
      detail::check_fused(where_fused, static_cast<Index>(span.size()), d_model(), positions.rows(),
                          positions.cols(), out.rows(), out.cols(), seq_len, offset);
      detail::check_ids(span, vocab_size(), where_fused);
      detail::RowAddends<Value> add;
      add.positions = detail::const_table(positions);
      add.seq_len = seq_len;
      add.offset = offset;
      detail::gather<Value>(detail::rows_of(*this), span, scale_, add, detail::mutable_table(out));
    });
  }

  /// Accumulates the table gradient of forward: grad[t] += scale() · Σ_{i : ids[i] = t}
  /// grad_out[i], in the value type, into a row-sparse gradient (never into the table itself):
  /// only rows present in ids are touched; repeated ids accumulate; bit-identical for any threads.
  /// Shapes:  ids[n], grad_out[n, d] -> grad (V x d, row-sparse).
  /// Throws:  IndexError for an id outside [0, vocab_size()); ShapeError if grad_out is not n x d
  ///          or grad is bound to another table shape. grad is unchanged when it throws.
  /// Complexity: O(n + u log u + n·d) for u distinct ids; memory O(touched rows · d).
  template <class R>
  void backward(const R& ids, const Eigen::Ref<const RowMatrix<Value>>& grad_out,
                SparseRowGrad<Value>& grad) const {
    backward_with(ids, grad_out, grad, {});
  }

  // ---- tied logits ----------------------------------------------------------------------------

  /// hidden · Wᵀ, the tied output projection (no scale), in the value type: a plain table as
  /// stored, any other codec through its float master if kept, else from the stored rows
  /// (docs/lm_head.md): `mode` exact (the default) dots the hidden rows as given with the decoded
  /// values; quantized_hidden rounds each hidden row once to the dot type ggml uses for the
  /// storage type and takes integer dot products (the 16-bit codecs: float products of the
  /// rounded values; plain tables and masters compute it as exact).
  ///
  /// Shapes:  hidden[n, d] -> logits[n, V].
  /// Throws:  ShapeError if hidden has not d columns; ValueError if mode is not a LogitsMode, or
  ///          (quantized_hidden on a table that quantizes) naming the row, column and value of a
  ///          non-finite hidden value.
  /// Complexity: 2·n·V·d flops; the table is read once per call for n <= 8 (a plain float table,
  ///          a ggml table, or quantized_hidden), once per 4096 decoded rows otherwise.
  [[nodiscard]] RowMatrix<Value> logits(const Eigen::Ref<const RowMatrix<Value>>& hidden,
                                        LogitsMode mode = LogitsMode::exact) const {
    RowMatrix<Value> out(hidden.rows(), vocab_size());
    logits(hidden, out, mode);
    return out;
  }

  /// Writes hidden · Wᵀ into out (n x V), which must not overlap hidden or the table.
  /// Throws: as logits(hidden, mode), or ShapeError if out is not n x V; OverlapError if out
  ///         shares memory with hidden, the table or its float master; out is untouched then.
  void logits(const Eigen::Ref<const RowMatrix<Value>>& hidden, Eigen::Ref<RowMatrix<Value>> out,
              LogitsMode mode = LogitsMode::exact) const {
    const detail::Where w = where("logits");
    detail::check_logits(w, vocab_size(), d_model(), hidden.rows(), hidden.cols(), out.rows(),
                         out.cols());
    detail::check_logits_mode(w, mode);
    detail::check_logits_apart(w, hidden, out, "the table", stored_memory(), master_memory());
    if constexpr (codec::QuantizedDot<C>) {
      if (mode == LogitsMode::quantized_hidden && master_ == nullptr &&
          codec().quantizes_hidden()) {
        if (const auto bad = find_non_finite(hidden)) {
          detail::throw_non_finite(w.str() + ": hidden", "row", *bad);
        }
      }
    }
    detail::logits(logits_table(), hidden, out, mode);
  }

  /// Backward of logits(): grad_hidden = grad_logits · W (assigned) and
  /// grad_weight += grad_logitsᵀ · hidden (accumulated). For a tied model, add the input side's
  /// gradient into the same matrix with SparseRowGrad::add_to(grad_weight).
  ///
  /// Shapes:  hidden[n, d], grad_logits[n, V] -> grad_hidden[n, d], grad_weight[V, d].
  /// Throws:  ShapeError on any mismatch; OverlapError if grad_hidden or grad_weight shares memory
  ///          with the other, hidden, grad_logits, the table or its float master; nothing is
  ///          written then.
  /// Complexity: two GEMMs, 4·n·V·d flops.
  void logits_backward(const Eigen::Ref<const RowMatrix<Value>>& hidden,
                       const Eigen::Ref<const RowMatrix<Value>>& grad_logits,
                       Eigen::Ref<RowMatrix<Value>> grad_hidden,
                       Eigen::Ref<RowMatrix<Value>> grad_weight) const {
    const detail::Where w = where("logits_backward");
    detail::check_logits_backward(w, vocab_size(), d_model(), hidden, grad_logits, grad_hidden,
                                  grad_weight);
    detail::check_logits_backward_apart(w, hidden, grad_logits, grad_hidden, grad_weight,
                                        "the table", stored_memory(), master_memory());
    detail::logits_backward(logits_table(), hidden, grad_logits, grad_hidden, grad_weight);
  }

  // ---- the float master copy for logits (codecs other than plain) ---------------------------

  /// Keeps `master` (V x d, float) as the table used by logits and logits_backward: exact float
  /// logits from a reduced or quantized table. Copies and views share it (it is never written).
  /// Throws: ShapeError if its shape differs from the table's; nothing changes then.
  void set_float_master(RowMatrix<float> master) requires(!C::is_plain) {
    const detail::Where w = where("set_float_master");
    detail::check_dims(w, "master", master, vocab_size(), "vocab_size", d_model(), "d_model");
    master_ = std::make_shared<const RowMatrix<float>>(std::move(master));
  }
  /// Drops the float master: logits decode the stored rows again.
  void clear_float_master() noexcept requires(!C::is_plain) { master_.reset(); }
  /// The float master copy, or null.
  [[nodiscard]] const RowMatrix<float>* float_master() const noexcept requires(!C::is_plain) {
    return master_.get();
  }

  // ---- decoding the stored rows ---------------------------------------------------------------

  /// Row r decoded, unscaled by the lookup scale. Throws: IndexError if r is out of range.
  [[nodiscard]] RowVector<Value> dequantize_row(Index r) const {
    detail::check_row(r, vocab_size(), where("dequantize_row"));
    RowVector<Value> out(d_model());
    detail::rows_of(*this).decode(r, Value(1), out.data());
    return out;
  }
  /// The whole table decoded, V x d (O(V·d) memory: for analysis and small tables).
  [[nodiscard]] RowMatrix<Value> dequantize() const {
    RowMatrix<Value> out(vocab_size(), d_model());
    detail::decode_block(detail::rows_of(*this), 0, vocab_size(), out);
    return out;
  }
  /// The table decoded to float (exact for 16-bit codecs), V x d: dequantize().
  [[nodiscard]] RowMatrix<float> to_float() const requires(!C::is_plain) { return dequantize(); }

  /// Per-row error of the storage: entry r is max_c |original(r, c) - decoded(r, c)| in double.
  /// Shapes:  original[V, d] -> V.
  /// Throws:  ShapeError if original is not vocab_size() x d_model().
  template <class Derived>
  [[nodiscard]] Eigen::VectorXd max_row_error(const Eigen::MatrixBase<Derived>& original) const {
    const detail::Where w = where("max_row_error");
    detail::check_dims(w, "original", original, vocab_size(), "vocab_size", d_model(), "d_model");
    Eigen::VectorXd out(vocab_size());
    RowVector<Value> row(d_model());
    const auto rows = detail::rows_of(*this);
    for (Index r = 0; r < vocab_size(); ++r) {
      rows.decode(r, Value(1), row.data());
      out[r] = (original.row(r).template cast<double>() - row.template cast<double>())
                   .cwiseAbs()
                   .maxCoeff();
    }
    return out;
  }

 protected:
  /// A call of this table in messages: "Embedding::forward", "QuantizedEmbeddingView::logits".
  [[nodiscard]] static constexpr detail::Where where(const char* call) noexcept {
    return {Base::name, call};
  }

  /// backward with the options of a trainable table (padding row, frequency scaling).
  template <class R>
  void backward_with(const R& ids, const Eigen::Ref<const RowMatrix<Value>>& grad_out,
                     SparseRowGrad<Value>& grad, AccumulateOptions options) const {
    detail::with_ids(ids, [&](auto span) {
      const detail::Where w = where("backward");
      detail::check_backward_grad_out(w, static_cast<Index>(span.size()), d_model(),
                                      grad_out.rows(), grad_out.cols());
      detail::SparseRowGradAccess::accumulate(grad, span, grad_out, scale_, vocab_size(), options,
                                              w);
    });
  }

  /// The lookup behind forward(ids, out), in the value type or the 16-bit storage type O.
  template <class O, class R>
  void forward_as(const R& ids, Eigen::Ref<RowMatrix<O>> out) const {
    detail::with_ids(ids, [&](auto span) {
      const detail::Where w = where("forward");
      detail::check_lookup_out(w, static_cast<Index>(span.size()), d_model(), out.rows(),
                               out.cols());
      detail::check_ids(span, vocab_size(), w);
      detail::gather<O, codec::StreamingDecode<C>>(detail::rows_of(*this), span, scale_, nullptr,
                                                   detail::mutable_table(out));
    });
  }

  /// What an encoding constructor hands the owning constructor: the rows and the master.
  struct Encoded {
    RowMatrix<Unit> storage;
    Index d;
    std::shared_ptr<const RowMatrix<float>> master;
  };

  /// The owning table of encoded rows (the codec's thin types build theirs through it).
  Table(Encoded e, LookupScale scale) requires(owned)
      : Base(std::move(e.storage), e.d, C{}),
        scale_(scale.template resolve<Value>(e.d)),
        master_(std::move(e.master)) {}

  /// Checks a float/double table for values the codec can hold and encodes it row by row: a
  /// codec with its own range (codec::ChecksEncodable) checks the original values, every other
  /// codec has the floats checked for NaN and infinity.
  template <class Derived>
  static Encoded encoded(const Eigen::MatrixBase<Derived>& table, bool keep_float_master,
                         detail::Where w) requires(codec::EncodingCodec<C>) {
    detail::check_sizes(w, table.rows(), table.cols(), "vocab_size (table rows)",
                        "d_model (table columns)");
    const Index v = table.rows();
    const Index d = table.cols();
    if constexpr (codec::ChecksEncodable<C>) C::check_encodable(table, w);
    RowMatrix<float> f = table.template cast<float>();
    if constexpr (!codec::ChecksEncodable<C>) {
      if (const auto bad = find_non_finite(f)) {
        throw ValueError(detail::message(w, "value ", bad->value, " at row ", bad->row, ", column ",
                                         bad->col, " is not finite"),
                         bad->value);
      }
    }
    RowMatrix<Unit> storage(v, C::units_per_row(d));
    for (Index r = 0; r < v; ++r) C::encode_row(f.row(r).data(), d, storage.row(r).data());
    if (!keep_float_master) return {std::move(storage), d, nullptr};
    return {std::move(storage), d, std::make_shared<const RowMatrix<float>>(std::move(f))};
  }

 private:
  template <class, template <class> class>
  friend class Table;
  friend struct detail::TableAccess;

  // How far above a width checked_view looks for one the codec holds (ggml's blocks: 256).
  static constexpr Index kMaxWidthSearch = Index{1} << 16;

  static Index checked_view(const C& codec, const Unit* data, Index vocab_size, Index d_model,
                            Index row_stride) {
    const detail::Where w{Base::name, nullptr};
    if (d_model > 0 && !codec.holds_width(d_model)) {
      // expected(): the next width the codec holds (a block format: the next whole block).
      Index next = d_model + 1;
      while (next - d_model < kMaxWidthSearch && !codec.holds_width(next)) ++next;
      throw ShapeError(detail::message(w, "the ", codec.name(), " format cannot store rows of ",
                                       d_model, " values (the next width it holds is ", next, ")"),
                       1, next, d_model);
    }
    return detail::checked_view_stride(w, data, vocab_size, d_model,
                                       d_model > 0 ? codec.units_per_row(d_model) : d_model,
                                       row_stride);
  }

  static Encoded adopted(RowMatrix<Unit> table) {
    detail::check_sizes({Base::name, nullptr}, table.rows(), table.cols(),
                        "vocab_size (table rows)", "d_model (table columns)");
    const Index d = table.cols();
    return {std::move(table), d, nullptr};
  }

  static RowMatrix<Unit> initial(Index vocab_size, Index d_model, const Init& init,
                                 std::uint64_t seed) {
    detail::check_sizes({Base::name, nullptr}, vocab_size, d_model);
    RowMatrix<Value> t(vocab_size, d_model);  // filled in float for a 16-bit table, then rounded
    init.fill(t, seed);
    if constexpr (C::is_plain) {
      return t;
    } else {
      return t.template cast<Unit>();
    }
  }

  /// The memory of the stored rows, which the logits read.
  [[nodiscard]] detail::MemoryRange stored_memory() const {
    const auto stored = detail::rows_of(*this);
    return detail::MemoryRange::of(stored.data, stored.rows, stored.codec.units_per_row(stored.d),
                                   stored.stride);
  }
  /// The memory of the float master, which the logits read instead when one is kept; empty
  /// without one.
  [[nodiscard]] detail::MemoryRange master_memory() const noexcept {
    return master_ != nullptr ? detail::MemoryRange::of_matrix(*master_) : detail::MemoryRange{};
  }

  /// W for the logits kernels: the stored rows, and the master if one is kept (it has the
  /// table's shape: set_float_master checks it, and no table with a master changes its shape).
  [[nodiscard]] detail::LogitsTable<C, codec::logits_kind_v<C>> logits_table() const noexcept {
    return {detail::rows_of(*this), master_.get()};
  }

  Value scale_{};
  // Never written, only replaced: copies share it, so copying a table copies no floats.
  std::shared_ptr<const RowMatrix<float>> master_;
};

}  // namespace ember::inline EMBER_ISA
