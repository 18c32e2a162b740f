/// AtomicFile: writes a file through a temporary in the same directory, flushed and fsync'ed, then
/// renamed over the target, so a failed save never leaves a half-written file in its place.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ember/config.hpp"
#include "ember/errors.hpp"

namespace ember::inline EMBER_ISA::io::detail {

/// Fault injection for AtomicFile, a test seam (detail API): while a ScopedWriteFault is alive on
/// a thread, every AtomicFile written on that thread fails the way it describes (the cost
/// elsewhere: one thread-local pointer test per flushed buffer).
struct WriteFault {
  /// The write that would take the file past this many bytes writes up to the limit, then fails
  /// with `error` (a short write followed by an error, as a full disk does).
  std::size_t fail_after_bytes = static_cast<std::size_t>(-1);
  int error = ENOSPC;        ///< errno reported by the failing write
  bool fail_fsync = false;   ///< fsync of the temporary fails with EIO
  bool fail_rename = false;  ///< the final rename fails with EXDEV
};

/// The fault installed on this thread, or nullptr.
inline thread_local const WriteFault* active_write_fault = nullptr;

/// Installs `fault` on the calling thread for the lifetime of this object (scopes nest).
class ScopedWriteFault {
 public:
  explicit ScopedWriteFault(WriteFault fault) : fault_(fault), previous_(active_write_fault) {
    active_write_fault = &fault_;
  }
  ScopedWriteFault(const ScopedWriteFault&) = delete;
  ScopedWriteFault& operator=(const ScopedWriteFault&) = delete;
  ~ScopedWriteFault() { active_write_fault = previous_; }

 private:
  WriteFault fault_;
  const WriteFault* previous_;
};

/// A file being written atomically. write() appends bytes; commit() flushes, fsyncs and renames the
/// temporary onto the target path. Destroying an uncommitted AtomicFile removes the temporary and
/// leaves any existing file at the target untouched.
///
/// Throws FileError (naming the target path and the byte offset reached) on any I/O failure.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path) : path_(std::move(path)) {
    std::string tmp = path_ + ".tmp.XXXXXX";
    fd_ = ::mkstemp(tmp.data());
    if (fd_ < 0) fail("cannot create temporary file");
    tmp_path_ = std::move(tmp);
    // mkstemp creates 0600; give the file the target's mode if it exists, else rw-r--r--.
    struct stat st {};
    const ::mode_t mode = ::stat(path_.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0644;
    if (::fchmod(fd_, mode) != 0) {
      const int err = errno;
      ::close(fd_);
      ::unlink(tmp_path_.c_str());
      errno = err;
      fail("cannot set the mode of the temporary file");
    }
    buffer_.reserve(buffer_capacity);
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_ && !tmp_path_.empty()) ::unlink(tmp_path_.c_str());
  }

  /// Appends `n` bytes.
  void write(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    if (buffer_.size() + n > buffer_capacity) flush_buffer();
    if (n >= buffer_capacity) {
      write_all(p, n);
    } else {
      buffer_.insert(buffer_.end(), p, p + n);
    }
  }
  void write(std::string_view s) { write(s.data(), s.size()); }

  /// Flushes, fsyncs and renames the temporary file onto the target.
  void commit() {
    flush_buffer();
    const WriteFault* fault = active_write_fault;
    const bool fsync_fault = fault != nullptr && fault->fail_fsync;
    if (fsync_fault) errno = EIO;
    if (fsync_fault || ::fsync(fd_) != 0) fail("cannot flush (fsync) temporary file");
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("cannot close temporary file");
    const bool rename_fault = fault != nullptr && fault->fail_rename;
    if (rename_fault) errno = EXDEV;
    if (rename_fault || std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
      fail("cannot rename temporary file");
    }
    committed_ = true;
  }

 private:
  static constexpr std::size_t buffer_capacity = std::size_t{1} << 20;

  void flush_buffer() {
    if (!buffer_.empty()) write_all(buffer_.data(), buffer_.size());
    buffer_.clear();
  }
  void write_all(const unsigned char* p, std::size_t n) {
    const WriteFault* fault = active_write_fault;
    const std::size_t room =
        fault == nullptr ? n
                         : fault->fail_after_bytes - std::min(on_disk_, fault->fail_after_bytes);
    const bool inject = n > room;
    if (inject) n = room;
    while (n > 0) {
      const ::ssize_t k = ::write(fd_, p, n);
      if (k < 0) {
        if (errno == EINTR) continue;
        fail("write failed");
      }
      p += k;
      n -= static_cast<std::size_t>(k);
      on_disk_ += static_cast<std::size_t>(k);
    }
    if (inject) {
      errno = fault->error;
      fail("write failed");
    }
  }
  // Reports the bytes that reached the file (what a reader of the partial file would see).
  [[noreturn]] void fail(const char* what) const {
    const int error = errno;
    throw FileError(path_ + ": " + what + " at byte " + std::to_string(on_disk_) + " (" +
                        std::strerror(error) + ")",
                    path_, on_disk_, std::error_code(error, std::generic_category()));
  }

  std::string path_;
  std::string tmp_path_;
  int fd_ = -1;
  bool committed_ = false;
  std::size_t on_disk_ = 0;  // bytes handed to ::write() successfully
  std::vector<unsigned char> buffer_;
};

}  // namespace ember::inline EMBER_ISA::io::detail
