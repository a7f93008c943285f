//===- DispatchKey.h - Keys of the runtime's per-call dispatch tables -----===//
//
// Every launch looks its kernel up by the fields that pick it. The key is
// those fields' bytes in order: one allocation and a copy, where a decimal
// text of them cost a string per field on every call (bench/results,
// 2026-12-06: a third of kgen_gemm_ex's own host instructions).
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_RUNTIME_DISPATCHKEY_H
#define KGEN_RUNTIME_DISPATCHKEY_H

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>

namespace kgen {

/// `values`' bytes, appended to `key` (keys of one table that mix kinds
/// start with a distinct tag value).
inline std::string &appendKey(std::string &key,
                              std::initializer_list<int64_t> values) {
  const size_t at = key.size();
  key.resize(at + values.size() * sizeof(int64_t));
  std::memcpy(key.data() + at, values.begin(), values.size() * sizeof(int64_t));
  return key;
}

} // namespace kgen

#endif
