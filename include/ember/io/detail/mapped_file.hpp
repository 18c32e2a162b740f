/// MappedFile: a read-only, whole-file memory map (POSIX mmap) that ember's loaders parse from,
/// so every read is bounds-checked against the real file size and large tables are never copied.
// SPDX-License-Identifier: MIT
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ember/config.hpp"
#include "ember/errors.hpp"

namespace ember::inline EMBER_ISA::io::detail {

/// A read-only view of a whole file: data()[0, size()). Empty files map to size() == 0 and a
/// non-null dummy pointer. Move-only; unmaps on destruction.
class MappedFile {
 public:
  MappedFile() = default;

  /// Maps `path` read-only. Throws FormatError (offset 0) if it cannot be opened, is not a
  /// regular file (a directory, FIFO, socket or device), or cannot be mapped.
  ///
  /// O_NONBLOCK makes opening a FIFO return at once (it is then refused as not a regular file)
  /// instead of blocking until a writer appears; it has no effect on regular files.
  /// Not defended against: another process truncating the file while it is mapped (reads past
  /// the new end raise SIGBUS, as with any mmap-based reader).
  explicit MappedFile(std::string path) : path_(std::move(path)) {
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) fail("cannot open file");
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      errno = err;
      fail("cannot stat file");
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                         : S_ISFIFO(st.st_mode) ? "a FIFO"
                         : S_ISSOCK(st.st_mode) ? "a socket"
                                                : "a device or special file";
      throw FormatError(path_ + ": not a regular file (it is " + kind + ")", path_, 0);
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        errno = err;
        fail("cannot map file");
      }
      data_ = static_cast<const unsigned char*>(p);
      mapped_ = true;
    }
    ::close(fd);
  }

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept { swap(other); }
  MappedFile& operator=(MappedFile&& other) noexcept {
    MappedFile tmp(std::move(other));
    swap(tmp);
    return *this;
  }
  ~MappedFile() {
    if (mapped_) ::munmap(const_cast<unsigned char*>(data_), size_);
  }

  /// First byte of the file (never null, even for an empty file).
  [[nodiscard]] const unsigned char* data() const noexcept { return data_; }
  /// File size in bytes.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// The path the file was opened with.
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  [[noreturn]] void fail(const char* what) const {
    throw FormatError(path_ + ": " + what + " (" + std::strerror(errno) + ")", path_, 0);
  }
  void swap(MappedFile& o) noexcept {
    std::swap(path_, o.path_);
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(mapped_, o.mapped_);
  }

  static constexpr unsigned char empty_[1] = {0};
  std::string path_;
  const unsigned char* data_ = empty_;
  std::size_t size_ = 0;
  bool mapped_ = false;
};

}  // namespace ember::inline EMBER_ISA::io::detail
