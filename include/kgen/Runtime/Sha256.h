//===- Sha256.h - SHA-256 for cache keys and entry checksums ----*- C++ -*-===//

#ifndef KGEN_RUNTIME_SHA256_H
#define KGEN_RUNTIME_SHA256_H

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace kgen {

/// Incremental SHA-256 (FIPS 180-4).
class Sha256 {
public:
  Sha256();
  void update(std::string_view data);
  std::array<uint8_t, 32> digest(); ///< finishes; the object is spent
  std::string hexDigest();

private:
  void block(const uint8_t *p);
  uint32_t h_[8];
  uint8_t buf_[64];
  uint64_t len_ = 0;
  size_t used_ = 0;
};

std::string sha256Hex(std::string_view data);

/// Whether `s` is a digest as sha256Hex writes it: 64 lowercase hex digits
/// (cache keys, bundle checksums).
bool isSha256Hex(std::string_view s);

} // namespace kgen

#endif
