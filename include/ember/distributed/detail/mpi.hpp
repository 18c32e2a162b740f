/// MPI helpers for ember's distributed components: owned communicators and row datatypes, and the
/// error agreement that makes every rank throw the same exception before any data exchange.
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
#include <vector>

#include "ember/config.hpp"
#include "ember/errors.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

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

/// An MPI object ember created (a duplicated communicator, a committed datatype), released with
/// `Free` unless MPI has already been finalized. Move-only.
template <class H, int (*Free)(H*)>
class Handle {
 public:
  explicit Handle(H handle) noexcept : handle_(handle) {}
  Handle(Handle&& other) noexcept
      : handle_(other.handle_), owned_(std::exchange(other.owned_, false)) {}
  Handle& operator=(Handle&&) = delete;
  ~Handle() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned_ && !finalized) Free(&handle_);
  }
  [[nodiscard]] H get() const noexcept { return handle_; }

 private:
  H handle_;
  bool owned_ = true;
};

/// A duplicate of `comm`, so ember's messages never mix with the caller's.
inline Handle<MPI_Comm, MPI_Comm_free> duplicate(MPI_Comm comm) {
  MPI_Comm dup = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(comm, &dup), "MPI_Comm_dup");
  return Handle<MPI_Comm, MPI_Comm_free>(dup);
}

/// A committed MPI datatype of `d` contiguous T (float or double): one table row, so counts and
/// displacements of the row exchanges are in rows and stay far below INT_MAX.
template <Scalar T>
Handle<MPI_Datatype, MPI_Type_free> row_type(Index d) {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  const MPI_Datatype scalar = std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE;
  check_mpi(MPI_Type_contiguous(static_cast<int>(d), scalar, &type), "MPI_Type_contiguous");
  check_mpi(MPI_Type_commit(&type), "MPI_Type_commit");
  return Handle<MPI_Datatype, MPI_Type_free>(type);
}

/// The displacements of an exchange's `counts`: their exclusive prefix sum.
inline std::vector<int> exclusive_sum(const std::vector<int>& counts) {
  std::vector<int> displs(counts.size(), 0);
  for (std::size_t r = 1; r < counts.size(); ++r) displs[r] = displs[r - 1] + counts[r - 1];
  return displs;
}

/// MPI_Alltoallv of items of `type`: send[displs[r], + counts[r]) goes to rank r, whose items
/// arrive in recv[recv_displs[r], + recv_counts[r]).
inline void alltoallv(const void* send, const std::vector<int>& counts,
                      const std::vector<int>& displs, void* recv,
                      const std::vector<int>& recv_counts, const std::vector<int>& recv_displs,
                      MPI_Datatype type, MPI_Comm comm) {
  check_mpi(MPI_Alltoallv(send, counts.data(), displs.data(), type, recv, recv_counts.data(),
                          recv_displs.data(), type, comm),
            "MPI_Alltoallv");
}

/// What went wrong on one rank, in a fixed-size record that can be broadcast as bytes.
struct ErrorRecord {
  enum Kind : std::int32_t { none, index, shape, value, format, other, file, capacity, state };
  std::int32_t kind = none;
  std::int32_t dimension = 0;  // ShapeError::dimension(); FormatError: is_line()
  std::int64_t a = 0;          // IndexError position / ShapeError expected / FormatError offset /
                               // CapacityError capacity
  std::int64_t b = 0;          // IndexError value / ShapeError actual / CapacityError needed
  std::int64_t c = 0;          // IndexError bound / FileError code().value()
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
  } catch (const std::exception& e) {
    rec.kind = ErrorRecord::other;
    copy_text(rec.message, e.what());
    if (const auto* x = dynamic_cast<const IndexError*>(&e)) {
      rec.kind = ErrorRecord::index;
      rec.a = static_cast<std::int64_t>(x->position());
      rec.b = x->value();
      rec.c = x->bound();
    } else if (const auto* y = dynamic_cast<const ShapeError*>(&e)) {
      rec.kind = ErrorRecord::shape;
      rec.dimension = y->dimension();
      rec.a = static_cast<std::int64_t>(y->expected());
      rec.b = static_cast<std::int64_t>(y->actual());
    } else if (const auto* z = dynamic_cast<const ValueError*>(&e)) {
      rec.kind = ErrorRecord::value;
      rec.real = z->value();
    } else if (const auto* f = dynamic_cast<const FormatError*>(&e)) {
      rec.kind = ErrorRecord::format;
      if (const auto* file = dynamic_cast<const FileError*>(f)) {
        rec.kind = ErrorRecord::file;
        rec.c = file->code().value();  // errno, generic category (or 0: none)
      }
      rec.dimension = f->is_line() ? 1 : 0;
      rec.a = static_cast<std::int64_t>(f->offset());
      copy_text(rec.path, f->path());
    } else if (const auto* c = dynamic_cast<const CapacityError*>(&e)) {
      rec.kind = ErrorRecord::capacity;
      rec.a = c->capacity();
      rec.b = c->needed();
    } else if (dynamic_cast<const StateError*>(&e) != nullptr) {
      rec.kind = ErrorRecord::state;
    }
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
    case ErrorRecord::file:
      throw FileError(msg, std::string(rec.path), static_cast<std::uint64_t>(rec.a),
                      rec.c == 0
                          ? std::error_code()
                          : std::error_code(static_cast<int>(rec.c), std::generic_category()));
    case ErrorRecord::capacity:
      throw CapacityError(msg, rec.a, rec.b);
    case ErrorRecord::state:
      throw StateError(msg);
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

}  // namespace ember::inline EMBER_ISA::detail
