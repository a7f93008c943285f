//===- JsonFields.h - Reading the fields of a family's JSON -----*- C++ -*-===//
//
// The field readers every family's JSON parser shares (Json.cpp,
// AttentionJson.cpp, MlstmJson.cpp). Each failure throws kgen::Error
// "invalid <family> JSON: ..." naming the field, what it must be and what it
// was. Private to lib/Codegen.
//
//===----------------------------------------------------------------------===//

#ifndef KGEN_LIB_CODEGEN_JSONFIELDS_H
#define KGEN_LIB_CODEGEN_JSONFIELDS_H

#include "kgen/Problem.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace kgen {

class JsonFields {
public:
  using json = nlohmann::json;
  explicit JsonFields(const char *family) : family_(family) {}

  [[noreturn]] void fail(const std::string &what) const;
  /// `j` is an object with no field outside `known`; `what` names it.
  void rejectUnknown(const json &j, std::initializer_list<const char *> known,
                     const char *what) const;
  int64_t getInt(const json &j, const char *key, int64_t dflt) const;
  /// Exactly `n` integers (required).
  std::vector<int64_t> getInts(const json &j, const char *key, size_t n) const;
  bool getBool(const json &j, const char *key, bool dflt = false) const;
  /// [a, b], or a single integer n standing for [n, n].
  std::pair<int64_t, int64_t> getPair(const json &j, const char *key,
                                      std::pair<int64_t, int64_t> dflt) const;
  std::string getString(const json &j, const char *key) const; ///< required
  DType getDType(const json &j, const char *key, DType dflt) const;

private:
  const char *family_;
};

} // namespace kgen

#endif
