/// The exceptions ember throws at its public entry points: IndexError, ShapeError, ValueError,
/// OverlapError, FormatError (and FileError, derived from it), KeyError, StateError,
/// CapacityError, all derived from ember::Error and from the matching standard exception.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include "ember/config.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

/// Common base of every ember exception, so callers can catch them all at once (a mix-in: each
/// concrete type also derives from the matching std exception).
class Error {
 public:
  virtual ~Error() = default;
  /// The full message, the same text as the std exception's what().
  [[nodiscard]] virtual const char* message() const noexcept = 0;

 protected:
  Error() = default;
  Error(const Error&) = default;
  Error& operator=(const Error&) = default;
};

/// An id or position outside its valid range [0, bound). Fields: position() is the index in the
/// caller's input where the bad value was found (-1 for a single argument), value() the offending
/// value (INT64_MAX for an unsigned 64-bit id above it; the message has the exact value), bound()
/// the exclusive upper bound.
/// Example message: `Embedding::forward: id 50257 at position 3 is outside [0, 50257)`.
class IndexError : public std::out_of_range, public Error {
 public:
  IndexError(const std::string& what, Index position, std::int64_t value, std::int64_t bound)
      : std::out_of_range(what), position_(position), value_(value), bound_(bound) {}
  [[nodiscard]] Index position() const noexcept { return position_; }
  [[nodiscard]] std::int64_t value() const noexcept { return value_; }
  [[nodiscard]] std::int64_t bound() const noexcept { return bound_; }
  [[nodiscard]] const char* message() const noexcept override { return what(); }

 private:
  Index position_;
  std::int64_t value_;
  std::int64_t bound_;
};

/// A tensor (or size argument) whose shape does not match what the call requires. Fields:
/// expected() and actual() hold the mismatched extent, dimension() says which one (0 = rows,
/// 1 = columns, -1 = a scalar size argument such as d_model).
/// Example message: `Embedding::backward: grad_out has 768 columns, expected d_model = 512`.
class ShapeError : public std::invalid_argument, public Error {
 public:
  ShapeError(const std::string& what, int dimension, Index expected, Index actual)
      : std::invalid_argument(what), dimension_(dimension), expected_(expected), actual_(actual) {}
  [[nodiscard]] int dimension() const noexcept { return dimension_; }
  [[nodiscard]] Index expected() const noexcept { return expected_; }
  [[nodiscard]] Index actual() const noexcept { return actual_; }
  [[nodiscard]] const char* message() const noexcept override { return what(); }

 private:
  int dimension_;
  Index expected_;
  Index actual_;
};

/// A scalar argument outside its valid domain (a non-positive standard deviation, a non-finite
/// learning rate, ...). Fields: value() is the offending value.
class ValueError : public std::invalid_argument, public Error {
 public:
  ValueError(const std::string& what, double value) : std::invalid_argument(what), value_(value) {}
  [[nodiscard]] double value() const noexcept { return value_; }
  [[nodiscard]] const char* message() const noexcept override { return what(); }

 private:
  double value_;
};

/// An output argument whose memory overlaps an input of the same call (logits(hidden, out) with
/// `out` over the memory of `hidden` or of the table): the call would read values it had already
/// overwritten. Fields: output() and input() name the two arguments.
/// Example message: `Embedding::logits: out overlaps hidden in memory (out needs its own buffer)`.
class OverlapError : public std::invalid_argument, public Error {
 public:
  OverlapError(const std::string& what, std::string output, std::string input)
      : std::invalid_argument(what), output_(std::move(output)), input_(std::move(input)) {}
  [[nodiscard]] const std::string& output() const noexcept { return output_; }
  [[nodiscard]] const std::string& input() const noexcept { return input_; }
  [[nodiscard]] const char* message() const noexcept override { return what(); }

 private:
  std::string output_;
  std::string input_;
};

/// A malformed or unreadable file. Fields: path() names the file, offset() the byte offset (or
/// line number, see is_line()) where the problem was detected.
class FormatError : public std::runtime_error, public Error {
 public:
  FormatError(const std::string& what, std::string path, std::uint64_t offset, bool is_line = false)
      : std::runtime_error(what), path_(std::move(path)), offset_(offset), is_line_(is_line) {}
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] std::uint64_t offset() const noexcept { return offset_; }
  [[nodiscard]] bool is_line() const noexcept { return is_line_; }
  [[nodiscard]] const char* message() const noexcept override { return what(); }

 private:
  std::string path_;
  std::uint64_t offset_;
  bool is_line_;
};

/// A file that could not be opened, read, created or written: the path or the system is at fault
/// (no such file, a directory, no permission, a full disk), not the file's contents, so the
/// caller may retry or report the path. It is a FormatError, so `catch (const FormatError&)` still
/// catches it; catch FileError first to tell the two apart. Fields: FormatError's (offset(): the
/// bytes written before a write failed, 0 when the file could not be opened) and code(), the
/// system's error (std::errc::no_such_file_or_directory, permission_denied, no_space_on_device,
/// ...; is_a_directory for a directory; empty for another kind of file that is not regular).
/// Example message: `io::GgufFile: cannot open "model.gguf": No such file or directory`.
class FileError : public FormatError {
 public:
  FileError(const std::string& what, std::string path, std::uint64_t offset, std::error_code code)
      : FormatError(what, std::move(path), offset), code_(code) {}
  [[nodiscard]] const std::error_code& code() const noexcept { return code_; }

 private:
  std::error_code code_;
};

/// A call not allowed in the object's current state (an optimizer step on a frozen table, a
/// backward through dropout without its forward, ...). Nothing changes when it is thrown.
class StateError : public std::logic_error, public Error {
 public:
  explicit StateError(const std::string& what) : std::logic_error(what) {}
  [[nodiscard]] const char* message() const noexcept override { return what(); }
};

/// A token (string key) that is not in a vocabulary and no unknown-token id was set.
/// Fields: key() is the missing token. Example message:
/// `Vocabulary::id: token 'qeen' is not in the vocabulary (50000 tokens)`.
class KeyError : public std::out_of_range, public Error {
 public:
  KeyError(const std::string& what, std::string key)
      : std::out_of_range(what), key_(std::move(key)) {}
  [[nodiscard]] const std::string& key() const noexcept { return key_; }
  [[nodiscard]] const char* message() const noexcept override { return what(); }

 private:
  std::string key_;
};

/// A batch that needs more rows than a capacity-bounded table can give it (a KeyIndex with every
/// other row taken by the batch's own keys, or with eviction off). Fields: capacity() is the
/// number of rows keys may hold, needed() the number the call would have needed at once.
/// Example message: `KeyIndex::find_or_insert: the batch needs 70 rows at once, capacity 64`.
class CapacityError : public std::length_error, public Error {
 public:
  CapacityError(const std::string& what, std::int64_t capacity, std::int64_t needed)
      : std::length_error(what), capacity_(capacity), needed_(needed) {}
  [[nodiscard]] std::int64_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] std::int64_t needed() const noexcept { return needed_; }
  [[nodiscard]] const char* message() const noexcept override { return what(); }

 private:
  std::int64_t capacity_;
  std::int64_t needed_;
};

}  // namespace ember::inline EMBER_ISA
