/// MappedTable<T>: a read-only V x d table read from a file, either zero-copy over the file's
/// memory map (when dtype, byte order, layout and alignment allow) or over a converted copy; T is
/// float or double, or Eigen::half / Eigen::bfloat16 for 16-bit tables served without a copy.
// SPDX-License-Identifier: MIT
#pragma once

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
/// When zero_copy() is true, matrix() points straight into the read-only memory map of the file:
/// nothing was copied and pages are read on first touch, so a table larger than RAM can be
/// queried. That needs the stored dtype to be T, little-endian bytes in row-major (C) order, and
/// data aligned to alignof(T); otherwise (F16/BF16 data read as float, float read as double,
/// big-endian or Fortran-order .npy, an unaligned offset) the loader makes a converted, owning
/// copy. A 16-bit T (Eigen::half from F16, Eigen::bfloat16 from BF16) never converts: other dtypes
/// are a FormatError (SafetensorsFile::load_reduced or from_float round them instead).
///
/// Lifetime: the MappedTable, its copies and its view() keep the mapping (or the copy) alive; a
/// Map taken from matrix() is valid while one of them lives.
template <class T>
class MappedTable {
  static_assert(
      Scalar<T> || HalfStorage<T>,
      "ember::io::MappedTable<T>: T must be float, double, Eigen::half or Eigen::bfloat16");

 public:
  /// What view() returns: EmbeddingView<T>, or ReducedEmbeddingView<T> for a 16-bit T.
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
  /// A View of the table that keeps the memory alive on its own, with lookup scale `scale`.
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
