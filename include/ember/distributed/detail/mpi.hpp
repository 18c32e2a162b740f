/// MPI helpers for ember's distributed components: datatype mapping, a row datatype, and the error
/// agreement that makes every rank throw the same exception before any data exchange.
// SPDX-License-Identifier: MIT
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "ember/config.hpp"
#include "ember/errors.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::distributed::detail {

/// The MPI datatype of a scalar ember stores or sends.
template <class T>
[[nodiscard]] MPI_Datatype mpi_type() noexcept {
  if constexpr (std::is_same_v<T, float>) {
    return MPI_FLOAT;
  } else if constexpr (std::is_same_v<T, double>) {
    return MPI_DOUBLE;
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    return MPI_INT64_T;
  } else if constexpr (std::is_same_v<T, int>) {
    return MPI_INT;
  } else {
    static_assert(ember::detail::always_false<T>, "ember: no MPI datatype for this scalar");
    return MPI_DATATYPE_NULL;
  }
}

/// Throws std::runtime_error naming `what` unless an MPI call returned MPI_SUCCESS. (MPI's default
/// handler aborts first; this matters only under MPI_ERRORS_RETURN.)
inline void check_mpi(int code, const char* what) {
  if (code != MPI_SUCCESS) [[unlikely]] {
    char text[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    MPI_Error_string(code, text, &len);
    throw std::runtime_error(std::string("ember: ") + what +
                             " failed: " + std::string(text, static_cast<std::size_t>(len)));
  }
}

/// A committed MPI datatype of `d` contiguous T: one table row, so counts and displacements of the
/// row exchanges are in rows and stay far below INT_MAX. Move-only; frees the type unless MPI has
/// already been finalized.
class RowType {
 public:
  RowType() = default;
  RowType(MPI_Datatype scalar, Index d) {
    check_mpi(MPI_Type_contiguous(static_cast<int>(d), scalar, &type_), "MPI_Type_contiguous");
    check_mpi(MPI_Type_commit(&type_), "MPI_Type_commit");
  }
  RowType(const RowType&) = delete;
  RowType& operator=(const RowType&) = delete;
  RowType(RowType&& other) noexcept : type_(std::exchange(other.type_, MPI_DATATYPE_NULL)) {}
  RowType& operator=(RowType&& other) noexcept {
    if (this != &other) {
      release();
      type_ = std::exchange(other.type_, MPI_DATATYPE_NULL);
    }
    return *this;
  }
  ~RowType() { release(); }
  [[nodiscard]] MPI_Datatype get() const noexcept { return type_; }

 private:
  void release() noexcept {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (type_ != MPI_DATATYPE_NULL && !finalized) MPI_Type_free(&type_);
    type_ = MPI_DATATYPE_NULL;
  }
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

/// What went wrong on one rank, in a fixed-size record that can be broadcast as bytes.
struct ErrorRecord {
  enum Kind : std::int32_t { none = 0, index = 1, shape = 2, value = 3, format = 4, other = 5 };
  std::int32_t kind = none;
  std::int32_t dimension = 0;  // ShapeError::dimension(); FormatError: is_line()
  std::int64_t a = 0;          // IndexError position / ShapeError expected / FormatError offset
  std::int64_t b = 0;          // IndexError value / ShapeError actual
  std::int64_t c = 0;          // IndexError bound
  double real = 0.0;           // ValueError value
  char message[512] = {};
  char path[256] = {};  // FormatError path
};

/// Copies `text` into a fixed buffer, truncating and always NUL-terminating.
template <std::size_t N>
void copy_text(char (&dst)[N], const std::string& text) noexcept {
  const std::size_t len = std::min(text.size(), N - 1);
  std::memcpy(dst, text.data(), len);
  dst[len] = '\0';
}

/// Runs the rank-local validation `check` and records the ember exception it throws, if any.
/// Nothing escapes, so the caller always reaches the collective agree() afterwards.
template <class F>
[[nodiscard]] ErrorRecord capture(F&& check) noexcept {
  ErrorRecord rec;
  try {
    check();
  } catch (const IndexError& e) {
    rec.kind = ErrorRecord::index;
    rec.a = static_cast<std::int64_t>(e.position());
    rec.b = e.value();
    rec.c = e.bound();
    copy_text(rec.message, e.what());
  } catch (const ShapeError& e) {
    rec.kind = ErrorRecord::shape;
    rec.dimension = e.dimension();
    rec.a = static_cast<std::int64_t>(e.expected());
    rec.b = static_cast<std::int64_t>(e.actual());
    copy_text(rec.message, e.what());
  } catch (const ValueError& e) {
    rec.kind = ErrorRecord::value;
    rec.real = e.value();
    copy_text(rec.message, e.what());
  } catch (const FormatError& e) {
    rec.kind = ErrorRecord::format;
    rec.dimension = e.is_line() ? 1 : 0;
    rec.a = static_cast<std::int64_t>(e.offset());
    copy_text(rec.message, e.what());
    copy_text(rec.path, e.path());
  } catch (const std::exception& e) {
    rec.kind = ErrorRecord::other;
    copy_text(rec.message, e.what());
  } catch (...) {
    rec.kind = ErrorRecord::other;
    copy_text(rec.message, "ember: unknown exception during validation");
  }
  return rec;
}

/// Throws the exception described by `rec` (kind != none).
[[noreturn]] inline void rethrow(const ErrorRecord& rec) {
  const std::string msg(rec.message);
  switch (rec.kind) {
    case ErrorRecord::index:
      throw IndexError(msg, static_cast<Index>(rec.a), rec.b, rec.c);
    case ErrorRecord::shape:
      throw ShapeError(msg, rec.dimension, static_cast<Index>(rec.a), static_cast<Index>(rec.b));
    case ErrorRecord::value:
      throw ValueError(msg, rec.real);
    case ErrorRecord::format:
      throw FormatError(msg, std::string(rec.path), static_cast<std::uint64_t>(rec.a),
                        rec.dimension != 0);
    default:
      throw std::runtime_error(msg);
  }
}

/// Collective. Every rank passes what its own validation found; if any rank failed, every rank
/// throws the exception of the lowest failing rank (same type, fields and message); otherwise all
/// return. Cost on the success path: one MPI_Allreduce of one int.
inline void agree(MPI_Comm comm, const ErrorRecord& local) {
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int mine = local.kind != ErrorRecord::none ? rank : size;
  int first = size;
  check_mpi(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  if (first == size) return;
  ErrorRecord rec = local;
  check_mpi(MPI_Bcast(&rec, static_cast<int>(sizeof rec), MPI_BYTE, first, comm), "MPI_Bcast");
  rethrow(rec);
}

/// capture(check) then agree(): the one-line form used at the door of every collective call.
template <class F>
void validate_collectively(MPI_Comm comm, F&& check) {
  agree(comm, capture(std::forward<F>(check)));
}

}  // namespace ember::inline EMBER_ISA::distributed::detail
