// The frames of kvconform's subprocess protocols (kernels: docs/plugins.md; engines: docs/engines.md):
// a u32 little-endian header length, the header (UTF-8 JSON), then the bytes of the buffers the
// header lists (`"buffers": [{"name", "dtype", "shape", "nbytes"}]`) back to back. One implementation
// for every C++ side that speaks them: the host (worker.h, which reads them under a deadline), the
// oracle engine and the llama.cpp worker (which block on their stdin). Python's is
// kvconform.protocol. Header-only, nlohmann/json and POSIX read/write alone: a worker built in its own
// CMake project (engines/llama_cpp) includes it without linking kvconform.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace kvc::framing {

// The four bytes that start a message of a header of n bytes, and the length they say.
inline std::string length_prefix(uint32_t n) {
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out;
}
inline uint32_t read_length(const char* p) {
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return n;
}

// The start of a message: its length prefix and header (the buffers' bytes follow it).
inline std::string frame(const nlohmann::json& header) {
  const std::string text = header.dump();
  return length_prefix(static_cast<uint32_t>(text.size())) + text;
}

// n bytes from fd, retried across signals and short reads; false at the end of the stream or an error.
inline bool read_exact(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n) {
    const ssize_t r = ::read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}
// All of n bytes to fd; false when the other side is gone (or another error).
inline bool write_all(int fd, const void* p, size_t n) {
  auto* c = static_cast<const char*>(p);
  while (n) {
    const ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// A blocking side's next message header, as text (its parse is the caller's: a worker answers a
// header that is not JSON with an error reply). False at the end of the stream; throws
// std::runtime_error for a length over max_header (no frame: bytes that are not the protocol).
inline bool read_header(int fd, std::string& header, uint32_t max_header = 1u << 24) {
  char len[4];
  if (!read_exact(fd, len, 4)) return false;
  const uint32_t n = read_length(len);
  if (n > max_header) throw std::runtime_error("header too long (" + std::to_string(n) + " bytes)");
  header.assign(n, '\0');
  return read_exact(fd, header.data(), n);
}
// The bytes of the buffers a header lists, each appended to `bytes` (nullptr: read and dropped, to
// stay in frame); false at the end of the stream.
inline bool read_buffers(int fd, const nlohmann::json& header, std::string* bytes = nullptr) {
  if (!header.is_object() || !header.contains("buffers") || !header["buffers"].is_array()) return true;
  for (const nlohmann::json& b : header["buffers"]) {
    std::string data(b.value("nbytes", size_t(0)), '\0');
    if (!read_exact(fd, data.data(), data.size())) return false;
    if (bytes) *bytes += data;
  }
  return true;
}

// One message: the header and then `payload` (the bytes of the buffers the header lists, in order).
// False when the other side is gone.
inline bool send(int fd, const nlohmann::json& header, const void* payload = nullptr, size_t nbytes = 0) {
  const std::string head = frame(header);
  return write_all(fd, head.data(), head.size()) && (nbytes == 0 || write_all(fd, payload, nbytes));
}

}  // namespace kvc::framing
