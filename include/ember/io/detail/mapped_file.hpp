/// MappedFile: a read-only, whole-file memory map (POSIX mmap) that ember's loaders parse from,
/// so every read is bounds-checked against the real file size and large tables are never copied.
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
#include "ember/errors.hpp"

namespace ember::inline EMBER_ISA::io::detail {

/// A read-only view of a whole file: data()[0, size()). Empty files map to size() == 0 and a
/// non-null dummy pointer. Unmaps on destruction.
class MappedFile {
 public:
  /// Maps `path` read-only. Throws FileError (offset 0) if it cannot be opened, is not a regular
  /// file, or cannot be mapped. (O_NONBLOCK: a FIFO is refused at once instead of blocking
  /// until a writer appears.) Not defended against: another process truncating the mapped file.
  explicit MappedFile(std::string path) : path_(std::move(path)) {
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) fail("cannot open file");
    // Closed on every way out; a failure's message reads errno before the close.
    const struct Closer {
      int handle;
      ~Closer() { ::close(handle); }
    } closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0) fail("cannot stat file");
    if (!S_ISREG(st.st_mode)) {
      const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                         : S_ISFIFO(st.st_mode) ? "a FIFO"
                         : S_ISSOCK(st.st_mode) ? "a socket"
                                                : "a device or special file";
      const std::error_code code =
          S_ISDIR(st.st_mode) ? std::make_error_code(std::errc::is_a_directory) : std::error_code();
      throw FileError(path_ + ": not a regular file (it is " + kind + ")", path_, 0, code);
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) fail("cannot map file");
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
  [[noreturn]] void fail(const char* what) const {
    const int error = errno;
    throw FileError(path_ + ": " + what + " (" + std::strerror(error) + ")", path_, 0,
                    std::error_code(error, std::generic_category()));
  }

  static constexpr unsigned char empty_[1] = {0};
  std::string path_;
  const unsigned char* data_ = empty_;
  std::size_t size_ = 0;
};

}  // namespace ember::inline EMBER_ISA::io::detail
