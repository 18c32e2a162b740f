/// MappedTable<T>: a read-only V x d table read from a file, either zero-copy over the file's
/// memory map (when dtype, byte order, layout and alignment allow) or over a converted copy; T is
/// float or double, or Eigen::half / Eigen::bfloat16 for 16-bit tables served without a copy.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

#include <Eigen/Core>

#include "ember/config.hpp"
#include "ember/embedding_view.hpp"
#include "ember/io/detail/mapped_file.hpp"
#include "ember/reduced_view.hpp"
#include "ember/table.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::io {

/// A read-only row-major table[V, d] loaded from a file by map_npy() or
/// SafetensorsFile::map<T>().
///
/// matrix() is an `Eigen::Map<const RowMatrix<T>>`. When zero_copy() is true it points straight
/// into the read-only memory map of the file: nothing was copied, pages are read on first touch,
/// so a table larger than RAM can be queried. That needs the stored dtype to be T, the bytes
/// little-endian in row-major (C) order, and the data's address aligned to alignof(T). Otherwise
/// (F16/BF16 data, float stored but double asked for, big-endian or Fortran-order .npy, data at an
/// unaligned offset) the loader falls back to a converted, owning copy and zero_copy() is false;
/// matrix() works the same either way.
///
/// 16-bit tables (T = Eigen::half from F16 data, Eigen::bfloat16 from BF16): the same, except that
/// the stored dtype must already be T's - a F32 tensor asked for as half is a FormatError, not a
/// silent rounding (convert it with SafetensorsFile::load_reduced or from_float instead); only
/// byte order, Fortran order or a misaligned offset fall back to an owning copy. view() is then a
/// ReducedEmbeddingView<T> (lookup decoded to float).
///
/// Lifetime: the MappedTable keeps the mapping alive (shared with the file object it came from);
/// a Map taken from matrix() is valid as long as some MappedTable (or copy of it) lives.
/// Copies share the same memory.
template <class T>
class MappedTable {
  static_assert(
      Scalar<T> || HalfStorage<T>,
      "ember::io::MappedTable<T>: T must be float, double, Eigen::half or Eigen::bfloat16");

 public:
  /// What view() returns: EmbeddingView<T> for float and double, ReducedEmbeddingView<T> for
  /// Eigen::half and Eigen::bfloat16.
  using View = std::conditional_t<Scalar<T>, EmbeddingView<T>, ReducedEmbeddingView<T>>;

  /// A zero-copy table over `data`, which must lie inside `file` and be aligned for T.
  MappedTable(std::shared_ptr<const detail::MappedFile> file, const T* data, Index rows, Index cols)
      : file_(std::move(file)), data_(data), rows_(rows), cols_(cols) {}

  /// An owning table (the converted-copy fallback).
  explicit MappedTable(RowMatrix<T> copy)
      : copy_(std::make_shared<const RowMatrix<T>>(std::move(copy))),
        data_(copy_->data()),
        rows_(copy_->rows()),
        cols_(copy_->cols()) {}

  /// The table[V, d], row-major, read-only.
  [[nodiscard]] Eigen::Map<const RowMatrix<T>> matrix() const noexcept {
    return Eigen::Map<const RowMatrix<T>>(data_, rows_, cols_);
  }
  /// True when matrix() points into the file's memory map (no copy was made).
  [[nodiscard]] bool zero_copy() const noexcept { return file_ != nullptr; }
  /// Number of rows V.
  [[nodiscard]] Index vocab_size() const noexcept { return rows_; }
  /// Row width d.
  [[nodiscard]] Index d_model() const noexcept { return cols_; }
  /// An owning copy of the table.
  [[nodiscard]] RowMatrix<T> to_matrix() const { return matrix(); }
  /// A view of the table (lookup, backward, logits, fused positions): an EmbeddingView<T>, or a
  /// ReducedEmbeddingView<T> for 16-bit T, that shares ownership of the mapping (or of the
  /// converted copy): the view alone keeps the memory alive. `scale` is the view's lookup scale
  /// (√d_model by default).
  [[nodiscard]] View view(LookupScale scale = {}) const {
    std::shared_ptr<const void> owner =
        file_ ? std::shared_ptr<const void>(file_) : std::shared_ptr<const void>(copy_);
    return View(data_, rows_, cols_, cols_, std::move(owner), scale);
  }

 private:
  std::shared_ptr<const detail::MappedFile> file_;
  std::shared_ptr<const RowMatrix<T>> copy_;
  const T* data_ = nullptr;
  Index rows_ = 0;
  Index cols_ = 0;
};

}  // namespace ember::inline EMBER_ISA::io
