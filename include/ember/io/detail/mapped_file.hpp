/// MappedFile: a read-only, whole-file memory map (POSIX mmap) that ember's loaders parse from,
/// so every read is bounds-checked against the real file size and large tables are never copied;
/// ReadOnlyFile: the descriptor it maps, open once.
// SPDX-License-Identifier: MIT
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/errors.hpp"

namespace ember::inline EMBER_ISA::detail {

/// A read-only descriptor of a regular file, closed on destruction: what MappedFile maps, and
/// what a loader that also reads with pread reads from, so that both see the one file, opened
/// once. Every failure is a FileError (offset 0) whose message starts with the public call that
/// opened the file: `io::load_npy: cannot open "x.npy": No such file or directory`.
class ReadOnlyFile {
 public:
  /// Opens `path` read-only for the public call `where`. Throws FileError if it cannot be opened
  /// or is not a regular file (a directory, a FIFO, a socket, a device). O_NONBLOCK: a FIFO is
  /// refused at once instead of blocking until a writer appears.
  ReadOnlyFile(std::string path, const Where& where)
      : path_(std::move(path)), fd_(::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)) {
    if (fd_ < 0) throw error(where, "cannot open");
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      const FileError e = error(where, "cannot stat");
      ::close(fd_);
      throw e;
    }
    if (!S_ISREG(st.st_mode)) {
      const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                         : S_ISFIFO(st.st_mode) ? "a FIFO"
                         : S_ISSOCK(st.st_mode) ? "a socket"
                                                : "a device or special file";
      const std::error_code code =
          S_ISDIR(st.st_mode) ? std::make_error_code(std::errc::is_a_directory) : std::error_code();
      ::close(fd_);
      throw FileError(
          where.str() + ": cannot open \"" + path_ + "\": not a regular file (it is " + kind + ")",
          path_, 0, code);
    }
    size_ = static_cast<std::size_t>(st.st_size);
  }
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;
  ~ReadOnlyFile() { ::close(fd_); }

  /// The descriptor, open for reading.
  [[nodiscard]] int fd() const noexcept { return fd_; }
  /// File size in bytes when it was opened.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// The path the file was opened with.
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

  /// The FileError "<where>: <what> "<path>": <the system's reason>" of the failure errno
  /// reports (read first, before anything else can change it).
  [[nodiscard]] FileError error(const Where& where, const char* what) const {
    const int code = errno;
    return FileError(where.str() + ": " + what + " \"" + path_ + "\": " + std::strerror(code),
                     path_, 0, std::error_code(code, std::generic_category()));
  }

 private:
  std::string path_;
  int fd_;
  std::size_t size_ = 0;
};

/// A read-only view of a whole file: data()[0, size()). Empty files map to size() == 0 and a
/// non-null dummy pointer. Unmaps on destruction.
class MappedFile {
 public:
  /// Maps `path` read-only for the public call `where`. Throws FileError (offset 0), its message
  /// starting with `where`, if it cannot be opened, is not a regular file, or cannot be mapped.
  /// Not defended against: another process truncating the mapped file.
  MappedFile(std::string path, const Where& where)
      : MappedFile(ReadOnlyFile(std::move(path), where), where) {}

  /// Maps the file open as `file` (the descriptor may be closed afterwards: the map stays).
  /// Throws FileError as above if it cannot be mapped.
  MappedFile(const ReadOnlyFile& file, const Where& where)
      : path_(file.path()), size_(file.size()) {
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.fd(), 0);
      if (p == MAP_FAILED) throw file.error(where, "cannot map");
      data_ = static_cast<const unsigned char*>(p);
    }
  }

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() {
    if (size_ > 0) ::munmap(const_cast<unsigned char*>(data_), size_);
  }

  /// First byte of the file (never null, even for an empty file).
  [[nodiscard]] const unsigned char* data() const noexcept { return data_; }
  /// File size in bytes.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// The path the file was opened with.
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  static constexpr unsigned char empty_[1] = {0};
  std::string path_;
  const unsigned char* data_ = empty_;
  std::size_t size_ = 0;
};

}  // namespace ember::inline EMBER_ISA::detail
