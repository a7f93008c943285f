//===- JsonFields.cpp - Reading the fields of a family's JSON -------------===//

#include "JsonFields.h"
#include "kgen/Error.h"

#include <set>

namespace kgen {

void JsonFields::fail(const std::string &what) const {
  throw Error(std::string("invalid ") + family_ + " JSON: " + what);
}

void JsonFields::rejectUnknown(const json &j,
                               std::initializer_list<const char *> known,
                               const char *what) const {
  if (!j.is_object())
    fail(std::string(what) + " must be a JSON object, got " + j.dump());
  std::set<std::string> ok(known.begin(), known.end());
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!ok.count(it.key()))
      fail(std::string("unknown field '") + it.key() + "' in " + what);
}

int64_t JsonFields::getInt(const json &j, const char *key, int64_t dflt) const {
  if (!j.contains(key))
    return dflt;
  const json &v = j.at(key);
  if (!v.is_number_integer())
    fail(std::string("'") + key + "' must be an integer, got " + v.dump());
  return v.get<int64_t>();
}

std::vector<int64_t> JsonFields::getInts(const json &j, const char *key,
                                         size_t n) const {
  const json &v = j.at(key);
  if (!v.is_array() || v.size() != n)
    fail(std::string("'") + key + "' must be an array of " + std::to_string(n) +
         " integers, got " + v.dump());
  std::vector<int64_t> out;
  for (const json &e : v) {
    if (!e.is_number_integer())
      fail(std::string("'") + key + "' must hold integers, got " + v.dump());
    out.push_back(e.get<int64_t>());
  }
  return out;
}

bool JsonFields::getBool(const json &j, const char *key, bool dflt) const {
  if (!j.contains(key))
    return dflt;
  const json &v = j.at(key);
  if (!v.is_boolean())
    fail(std::string("'") + key + "' must be true or false, got " + v.dump());
  return v.get<bool>();
}

std::pair<int64_t, int64_t>
JsonFields::getPair(const json &j, const char *key,
                    std::pair<int64_t, int64_t> dflt) const {
  if (!j.contains(key))
    return dflt;
  const json &v = j.at(key);
  if (v.is_number_integer())
    return {v.get<int64_t>(), v.get<int64_t>()};
  if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() ||
      !v[1].is_number_integer())
    fail(std::string("'") + key +
         "' must be an integer or an array of 2 integers, got " + v.dump());
  return {v[0].get<int64_t>(), v[1].get<int64_t>()};
}

std::string JsonFields::getString(const json &j, const char *key) const {
  const json &v = j.at(key);
  if (!v.is_string())
    fail(std::string("'") + key + "' must be a string, got " + v.dump());
  return v.get<std::string>();
}

DType JsonFields::getDType(const json &j, const char *key, DType dflt) const {
  if (!j.contains(key))
    return dflt;
  std::string s = getString(j, key);
  if (auto d = parseDType(s))
    return *d;
  fail(std::string("'") + key + "' = \"" + s +
       "\" is not a dtype (bf16, f16, f32)");
}

} // namespace kgen
