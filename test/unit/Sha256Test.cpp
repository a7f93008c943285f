//===- Sha256Test.cpp - SHA-256 against the FIPS 180-4 vectors ------------===//

#include "kgen/Runtime/Sha256.h"

#include <gtest/gtest.h>

using namespace kgen;

TEST(Sha256, Empty) {
  EXPECT_EQ(sha256Hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, Abc) {
  EXPECT_EQ(sha256Hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, TwoBlocks448Bits) {
  EXPECT_EQ(
      sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, Long896Bits) {
  EXPECT_EQ(
      sha256Hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
                "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, MillionA) {
  EXPECT_EQ(sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalMatchesOneShot) {
  // Chunk sizes that straddle the 64-byte block and the 56-byte padding
  // boundary in every way.
  std::string data;
  for (int i = 0; i < 1000; ++i)
    data += char(i * 131 + 7);
  for (size_t chunk : {1, 3, 55, 56, 63, 64, 65, 127, 999}) {
    Sha256 h;
    for (size_t i = 0; i < data.size(); i += chunk)
      h.update(std::string_view(data).substr(i, chunk));
    EXPECT_EQ(h.hexDigest(), sha256Hex(data)) << "chunk " << chunk;
  }
}

TEST(Sha256, PaddingBoundaries) {
  // Lengths 55, 56 and 64 take the one-block / two-block padding paths;
  // values from Python's hashlib.
  EXPECT_EQ(sha256Hex(std::string(55, 'a')),
            "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(sha256Hex(std::string(56, 'a')),
            "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(sha256Hex(std::string(64, 'a')),
            "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST(Sha256, DigestBytes) {
  Sha256 h;
  h.update("abc");
  auto d = h.digest();
  EXPECT_EQ(d[0], 0xba);
  EXPECT_EQ(d[31], 0xad);
}
