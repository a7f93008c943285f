//===- TuningDB.cpp - Tuned GEMM configs per device and problem -----------===//
//
// Loading is strict (every field required, unknown fields refused, values
// checked as record() checks them) so that what the dispatcher trusts is
// exactly what `kgen tune` wrote; a file that fails is reported and left
// alone. Saving follows the kernel cache: temp file in the same directory,
// fsync, rename, fsync of the directory.
//
//===----------------------------------------------------------------------===//

#include "kgen/Runtime/TuningDB.h"
#include "Posix.h"
#include "kgen/Codegen/AttentionJson.h"
#include "kgen/Codegen/Json.h"
#include "kgen/Error.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <tuple>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace kgen;
using namespace kgen::posix;
using nlohmann::json;

namespace {

constexpr const char *kLoadFix =
    " (fix the file, or move it away and kgen starts a new one)";
constexpr const char *kWriteFix = " (set KGEN_TUNING_DB to a writable file)";

//===----------------------------------------------------------------------===//
// Ordering: sorted vectors make lookups binary searches and the saved text
// independent of insertion order.
//===----------------------------------------------------------------------===//

/// M last, so that the records of one problem shape sit together (in the
/// CSV too) ordered by M.
auto problemTuple(const GemmProblem &p) {
  return std::tuple(p.n, p.k, p.ab, p.c, p.transA, p.transB, p.staticM,
                    p.staticN, p.staticK, p.alignA, p.alignB, p.alignC, p.bias,
                    p.act, p.residual, p.batch, p.m);
}
bool problemLess(const GemmProblem &a, const GemmProblem &b) {
  return problemTuple(a) < problemTuple(b);
}
bool recordLess(const TuningRecord &r, const GemmProblem &p) {
  return problemLess(r.problem, p);
}

auto keyTuple(const DeviceKey &k) {
  return std::tie(k.device, k.arch, k.target, k.computeUnits, k.kgenVersion,
                  k.compiler, k.compilerVersion);
}

/// Faster wins; then the later measurement; then the kernel name, so that
/// merging is independent of order even for exact ties.
bool better(const TuningRecord &a, const TuningRecord &b) {
  return std::tie(a.timeUs, b.tunedAt, a.kernel) <
         std::tie(b.timeUs, a.tunedAt, b.kernel);
}

//===----------------------------------------------------------------------===//
// Validation shared by record() and load
//===----------------------------------------------------------------------===//

std::optional<std::string> checkKey(const DeviceKey &k) {
  // An empty field means the caller did not fill it in; two such keys would
  // match each other and share records measured on different setups.
  std::pair<const char *, const std::string *> fields[] = {
      {"name", &k.device},
      {"arch", &k.arch},
      {"kgen_version", &k.kgenVersion},
      {"compiler", &k.compiler},
      {"compiler_version", &k.compilerVersion}};
  for (auto [name, value] : fields)
    if (value->empty())
      return std::string("'") + name + "' is empty";
  if (k.computeUnits <= 0)
    return "'compute_units' = " + std::to_string(k.computeUnits) +
           " must be > 0";
  return std::nullopt;
}

/// Shortest text that reads back as `v`: "0", "2.5", "-1".
std::string shortest(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

/// The measured fields every record has (Measurement): a positive time,
/// rates >= 0 (0: unknown).
std::optional<std::string> checkMeasurements(const Measurement &r) {
  if (!std::isfinite(r.timeUs) || r.timeUs <= 0)
    return "'time_us' = " + shortest(r.timeUs) + " must be > 0";
  std::pair<const char *, double> rates[] = {{"tflops", r.tflops},
                                             {"gb_s", r.gbs},
                                             {"runner_up_us", r.runnerUpUs},
                                             {"heuristic_us", r.heuristicUs}};
  for (auto [name, value] : rates)
    if (!std::isfinite(value) || value < 0)
      return std::string("'") + name + "' = " + shortest(value) +
             " must be >= 0 (0: unknown)";
  return std::nullopt;
}

std::optional<std::string> checkRecord(const TuningRecord &r) {
  if (auto why = checkProblem(r.problem))
    return "'problem': " + *why;
  return checkMeasurements(r);
}

std::string nowUtc() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

//===----------------------------------------------------------------------===//
// JSON readers. `where` is the JSON path of the value, e.g.
// "devices[0].records[2]"; every message starts with it.
//===----------------------------------------------------------------------===//

[[noreturn]] void fail(const std::string &where, const std::string &what) {
  throw Error(where + ": " + what);
}

std::string at(const std::string &where, const char *key) {
  return where.empty() ? key : where + "." + key;
}

/// `j` must be an object with exactly the fields `fields`.
void exactFields(const json &j, std::initializer_list<const char *> fields,
                 const std::string &where) {
  if (!j.is_object())
    fail(where, "must be a JSON object, got " + j.dump());
  std::set<std::string> known(fields.begin(), fields.end());
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!known.count(it.key()))
      fail(where, "unknown field '" + it.key() + "'");
  for (const char *f : fields)
    if (!j.contains(f))
      fail(where, std::string("missing field '") + f + "'");
}

std::string getString(const json &j, const char *key,
                      const std::string &where) {
  const json &v = j.at(key);
  if (!v.is_string())
    fail(at(where, key), "must be a string, got " + v.dump());
  return v.get<std::string>();
}

double getNumber(const json &j, const char *key, const std::string &where) {
  const json &v = j.at(key);
  if (!v.is_number())
    fail(at(where, key), "must be a number, got " + v.dump());
  return v.get<double>();
}

const json &getArray(const json &j, const char *key, const std::string &where) {
  const json &v = j.at(key);
  if (!v.is_array())
    fail(at(where, key), "must be an array, got " + v.dump());
  return v;
}

/// Json.cpp's parsers name the field but not where it is in this file.
template <typename Fn>
auto parseNested(const json &j, const char *key, const std::string &where,
                 Fn parse) {
  try {
    return parse(j.at(key));
  } catch (const Error &e) {
    fail(at(where, key), e.what());
  } catch (const json::exception &e) {
    fail(at(where, key), e.what());
  }
}

DeviceKey parseKey(const json &j, const std::string &where) {
  exactFields(j,
              {"name", "arch", "target", "compute_units", "kgen_version",
               "compiler", "compiler_version"},
              where);
  DeviceKey k;
  k.device = getString(j, "name", where);
  k.arch = getString(j, "arch", where);
  std::string t = getString(j, "target", where);
  auto target = parseTarget(t);
  if (!target)
    fail(at(where, "target"), "\"" + t + "\" is not a kgen target");
  k.target = *target;
  const json &cu = j.at("compute_units");
  if (!cu.is_number_integer() || cu.get<int64_t>() <= 0 ||
      cu.get<int64_t>() > std::numeric_limits<int>::max())
    fail(at(where, "compute_units"),
         "must be a positive integer, got " + cu.dump());
  k.computeUnits = cu.get<int>();
  k.kgenVersion = getString(j, "kgen_version", where);
  k.compiler = getString(j, "compiler", where);
  k.compilerVersion = getString(j, "compiler_version", where);
  if (auto why = checkKey(k))
    fail(where, *why);
  return k;
}

/// A record's measured fields, read from its object `j`.
void readMeasurement(const json &j, const std::string &where, Measurement &m) {
  m.kernel = getString(j, "kernel", where);
  m.timeUs = getNumber(j, "time_us", where);
  m.tflops = getNumber(j, "tflops", where);
  m.gbs = getNumber(j, "gb_s", where);
  m.runnerUpUs = getNumber(j, "runner_up_us", where);
  m.heuristicUs = getNumber(j, "heuristic_us", where);
  m.tunedAt = getString(j, "tuned_at", where);
}

/// A record's object `j` with its measured fields added.
json withMeasurement(json j, const Measurement &m) {
  j["kernel"] = m.kernel;
  j["time_us"] = m.timeUs;
  j["tflops"] = m.tflops;
  j["gb_s"] = m.gbs;
  j["runner_up_us"] = m.runnerUpUs;
  j["heuristic_us"] = m.heuristicUs;
  j["tuned_at"] = m.tunedAt;
  return j;
}

TuningRecord parseRecord(const json &j, const std::string &where) {
  exactFields(j,
              {"problem", "config", "kernel", "time_us", "tflops", "gb_s",
               "runner_up_us", "heuristic_us", "tuned_at"},
              where);
  TuningRecord r;
  r.problem = parseNested(j, "problem", where, gemmProblemFromJson);
  r.config = parseNested(j, "config", where, gemmConfigFromJson);
  readMeasurement(j, where, r);
  if (auto why = checkRecord(r))
    fail(where, *why);
  return r;
}

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

std::string parentDir(const std::string &path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

/// mkdir -p; directories it creates are 0700, as the kernel cache's are
/// (the DB sits in the cache root by default).
void makeDirs(const std::string &dir, const std::string &path) {
  std::filesystem::path prefix;
  for (const auto &part : std::filesystem::path(dir)) {
    prefix /= part;
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST)
      throw Error("cannot write tuning DB " + path + ": cannot create " +
                  prefix.string() + ": " + errnoText() + kWriteFix);
  }
}

void writeAtomically(const std::string &path, const std::string &text) {
  std::string dir = parentDir(path);
  makeDirs(dir, path);
  auto die = [&](const std::string &what) {
    throw Error("cannot write tuning DB " + path + ": " + what + ": " +
                errnoText() + kWriteFix);
  };
  std::string tmp = path + ".tmp.XXXXXX";
  Fd fd(::mkstemp(tmp.data()));
  if (fd.fd < 0)
    die("cannot create a temp file in " + dir);
  if (!writeAll(fd.fd, text.data(), text.size())) {
    int saved = errno;
    ::unlink(tmp.c_str());
    errno = saved;
    die("cannot write " + tmp);
  }
  // Data first, then the name: a crash leaves the old DB or the new one,
  // never a truncated file that the next load would refuse.
  if (::fsync(fd.fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    int saved = errno;
    ::unlink(tmp.c_str());
    errno = saved;
    die("cannot publish " + tmp);
  }
  syncDir(dir);
}

std::string fixed(double v, int decimals) {
  char buf[400]; // enough for any finite double in fixed notation
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v,
                                 std::chars_format::fixed, decimals);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

/// RFC 4180 quoting; kgen's kernel names never need it, names from other
/// tools might.
std::string csvField(const std::string &s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos)
    return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"')
      out += '"';
    out += c;
  }
  return out + "\"";
}

//===----------------------------------------------------------------------===//
// Attention and mLSTM records
//===----------------------------------------------------------------------===//

bool familyLess(const FamilyRecord &a, const FamilyRecord &b) {
  return std::pair(int(a.family), a.problem.dump()) <
         std::pair(int(b.family), b.problem.dump());
}

bool better(const FamilyRecord &a, const FamilyRecord &b) {
  return std::tie(a.timeUs, b.tunedAt, a.kernel) <
         std::tie(b.timeUs, a.tunedAt, b.kernel);
}

/// The family a problem's JSON names ("family" is part of both families'
/// problem JSON).
std::optional<TuneFamily> familyOf(const json &problem) {
  if (!problem.is_object() || !problem.contains("family") ||
      !problem.at("family").is_string())
    return std::nullopt;
  return parseTuneFamily(problem.at("family").get<std::string>());
}

/// Parses and re-serializes a family problem (throws kgen::Error), so that
/// equal problems have equal text; checks it as the dispatcher would.
json canonicalProblem(TuneFamily f, const json &j) {
  try {
    if (f == TuneFamily::Attention) {
      AttentionProblem p = attentionProblemFromJson(j);
      if (auto why = checkProblem(p))
        throw Error(*why);
      return toJson(p);
    }
    MlstmProblem p = mlstmProblemFromJson(j);
    if (auto why = checkProblem(p))
      throw Error(*why);
    return toJson(p);
  } catch (const json::exception &e) {
    throw Error(e.what());
  }
}

json canonicalConfig(TuneFamily f, const json &j) {
  try {
    if (f == TuneFamily::Attention)
      return toJson(attentionConfigFromJson(j));
    return toJson(mlstmConfigFromJson(j));
  } catch (const json::exception &e) {
    throw Error(e.what());
  }
}

/// Canonicalizes `r` in place; the reason it cannot be stored otherwise.
std::optional<std::string> checkFamilyRecord(FamilyRecord &r) {
  auto named = familyOf(r.problem);
  if (!named || *named != r.family)
    return "'problem' is not a " + std::string(toString(r.family)) +
           " problem (its 'family' must be \"" +
           std::string(toString(r.family)) + "\")";
  try {
    r.problem = canonicalProblem(r.family, r.problem);
  } catch (const Error &e) {
    return std::string("'problem': ") + e.what();
  }
  try {
    r.config = canonicalConfig(r.family, r.config);
  } catch (const Error &e) {
    return std::string("'config': ") + e.what();
  }
  return checkMeasurements(r);
}

json familyRecordJson(const FamilyRecord &r) {
  return withMeasurement(json{{"family", std::string(toString(r.family))},
                              {"problem", r.problem},
                              {"config", r.config}},
                         r);
}

FamilyRecord parseFamilyRecord(const json &j, const std::string &where) {
  exactFields(j,
              {"family", "problem", "config", "kernel", "time_us", "tflops",
               "gb_s", "runner_up_us", "heuristic_us", "tuned_at"},
              where);
  FamilyRecord r;
  std::string f = getString(j, "family", where);
  auto family = parseTuneFamily(f);
  if (!family)
    fail(at(where, "family"),
         "\"" + f + "\" is not a tuned family (attention, mlstm)");
  r.family = *family;
  r.problem = j.at("problem");
  r.config = j.at("config");
  readMeasurement(j, where, r);
  if (auto why = checkFamilyRecord(r))
    fail(where, *why);
  return r;
}

/// A miss as stored: canonical problem JSON of either family.
json parseFamilyMiss(const json &j, const std::string &where) {
  auto f = familyOf(j);
  if (!f)
    fail(where, "must be an attention or mlstm problem with its 'family' "
                "field, got " +
                    j.dump());
  try {
    return canonicalProblem(*f, j);
  } catch (const Error &e) {
    fail(where, e.what());
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Public JSON forms
//===----------------------------------------------------------------------===//

json kgen::toJson(const DeviceKey &k) {
  return json{{"name", k.device},
              {"arch", k.arch},
              {"target", toString(k.target)},
              {"compute_units", k.computeUnits},
              {"kgen_version", k.kgenVersion},
              {"compiler", k.compiler},
              {"compiler_version", k.compilerVersion}};
}

json kgen::toJson(const TuningRecord &r) {
  return withMeasurement(
      json{{"problem", toJson(r.problem)}, {"config", toJson(r.config)}}, r);
}

DeviceKey kgen::deviceKeyFromJson(const json &j) {
  return parseKey(j, "device");
}

TuningRecord kgen::tuningRecordFromJson(const json &j) {
  return parseRecord(j, "record");
}

std::vector<int64_t> kgen::mBuckets(int64_t m) {
  std::vector<int64_t> out;
  if (m <= 0)
    return out;
  auto add = [&](int64_t b) {
    if (b != m && std::find(out.begin(), out.end(), b) == out.end())
      out.push_back(b);
  };
  for (int64_t q : {16, 32, 64, 128})
    if (m <= std::numeric_limits<int64_t>::max() - (q - 1))
      add((m + q - 1) / q * q);
  if (m <= (int64_t(1) << 62))
    add(int64_t(std::bit_ceil(uint64_t(m))));
  return out;
}

std::string kgen::defaultTuningDbPath(const CacheOptions &opts) {
  if (const char *env = envOrNull("KGEN_TUNING_DB")) {
    // Absolute, so a later chdir does not move the DB.
    std::error_code ec;
    std::filesystem::path p = std::filesystem::absolute(env, ec);
    return ec ? std::string(env) : p.lexically_normal().string();
  }
  std::string root = opts.resolvedDir();
  return root.empty() ? "" : root + "/tuning.json";
}

std::string_view kgen::toString(TuneFamily f) {
  return f == TuneFamily::Attention ? "attention" : "mlstm";
}

std::optional<TuneFamily> kgen::parseTuneFamily(std::string_view s) {
  if (s == "attention")
    return TuneFamily::Attention;
  if (s == "mlstm")
    return TuneFamily::Mlstm;
  return std::nullopt;
}

json kgen::tuningProblemJson(const AttentionProblem &p) { return toJson(p); }
json kgen::tuningProblemJson(const MlstmProblem &p) { return toJson(p); }

std::vector<AttentionProblem>
kgen::attentionBuckets(const AttentionProblem &p) {
  std::vector<int64_t> qs{p.seqlenQ}, ks{p.seqlenK};
  for (int64_t b : mBuckets(p.seqlenQ))
    qs.push_back(b);
  for (int64_t b : mBuckets(p.seqlenK))
    ks.push_back(b);
  std::vector<AttentionProblem> out;
  for (int64_t q : qs)
    for (int64_t k : ks) {
      if (q == p.seqlenQ && k == p.seqlenK)
        continue;
      AttentionProblem b = p;
      b.seqlenQ = q;
      b.seqlenK = k;
      out.push_back(b);
    }
  return out;
}

std::vector<MlstmProblem> kgen::mlstmBuckets(const MlstmProblem &p) {
  std::vector<MlstmProblem> out;
  for (int64_t s : mBuckets(p.s)) {
    MlstmProblem b = p;
    b.s = s;
    out.push_back(b);
  }
  return out;
}

//===----------------------------------------------------------------------===//
// TuningDB
//===----------------------------------------------------------------------===//

const TuningDB::Device *TuningDB::find(const DeviceKey &key) const {
  auto it = std::lower_bound(devices_.begin(), devices_.end(), key,
                             [](const Device &d, const DeviceKey &k) {
                               return keyTuple(d.key) < keyTuple(k);
                             });
  return it != devices_.end() && it->key == key ? &*it : nullptr;
}

TuningDB::Device &TuningDB::findOrAdd(const DeviceKey &key) {
  auto it = std::lower_bound(devices_.begin(), devices_.end(), key,
                             [](const Device &d, const DeviceKey &k) {
                               return keyTuple(d.key) < keyTuple(k);
                             });
  if (it == devices_.end() || !(it->key == key))
    it = devices_.insert(it, Device{key, {}, {}, {}, {}});
  return *it;
}

bool TuningDB::insertRecord(Device &d, TuningRecord r) {
  auto it = std::lower_bound(d.records.begin(), d.records.end(), r.problem,
                             recordLess);
  if (it != d.records.end() && it->problem == r.problem) {
    if (!better(r, *it))
      return false;
    *it = std::move(r);
  } else {
    it = d.records.insert(it, std::move(r));
  }
  auto miss = std::lower_bound(d.misses.begin(), d.misses.end(), it->problem,
                               problemLess);
  if (miss != d.misses.end() && *miss == it->problem)
    d.misses.erase(miss);
  return true;
}

bool TuningDB::insertMiss(Device &d, const GemmProblem &p) {
  auto rec =
      std::lower_bound(d.records.begin(), d.records.end(), p, recordLess);
  if (rec != d.records.end() && rec->problem == p)
    return false;
  auto it = std::lower_bound(d.misses.begin(), d.misses.end(), p, problemLess);
  if ((it != d.misses.end() && *it == p) || d.misses.size() >= kMaxMisses)
    return false;
  d.misses.insert(it, p);
  return true;
}

bool TuningDB::insertRecord(Device &d, FamilyRecord r) {
  auto it = std::lower_bound(d.familyRecords.begin(), d.familyRecords.end(), r,
                             familyLess);
  if (it != d.familyRecords.end() && !familyLess(r, *it)) {
    if (!better(r, *it))
      return false;
    *it = std::move(r);
  } else {
    it = d.familyRecords.insert(it, std::move(r));
  }
  auto miss =
      std::find(d.familyMisses.begin(), d.familyMisses.end(), it->problem);
  if (miss != d.familyMisses.end())
    d.familyMisses.erase(miss);
  return true;
}

bool TuningDB::insertMiss(Device &d, const json &p) {
  auto f = familyOf(p);
  if (!f)
    return false;
  FamilyRecord probe;
  probe.family = *f;
  probe.problem = p;
  auto rec = std::lower_bound(d.familyRecords.begin(), d.familyRecords.end(),
                              probe, familyLess);
  if (rec != d.familyRecords.end() && !familyLess(probe, *rec))
    return false;
  auto textLess = [](const json &a, const json &b) {
    return a.dump() < b.dump();
  };
  auto it = std::lower_bound(d.familyMisses.begin(), d.familyMisses.end(), p,
                             textLess);
  if ((it != d.familyMisses.end() && *it == p) ||
      d.familyMisses.size() >= kMaxMisses)
    return false;
  d.familyMisses.insert(it, p);
  return true;
}

TuningDB TuningDB::fromJson(const json &j) {
  if (!j.is_object())
    fail("top level", "must be a JSON object, got " + j.dump());
  // The schema first: a file of another schema version gets that message
  // rather than one about the fields it has.
  if (!j.contains("schema"))
    fail("top level",
         "missing field 'schema' (\"" + std::string(kTuningDbSchema) + "\")");
  const json &schema = j.at("schema");
  if (!schema.is_string() || schema.get<std::string>() != kTuningDbSchema)
    fail("schema", "is " + schema.dump() + ", this kgen reads \"" +
                       std::string(kTuningDbSchema) + "\"");
  exactFields(j, {"schema", "devices"}, "top level");

  TuningDB db;
  const json &devices = getArray(j, "devices", "");
  for (size_t i = 0; i < devices.size(); ++i) {
    std::string where = "devices[" + std::to_string(i) + "]";
    const json &dj = devices[i];
    // family_records and family_misses are optional: written only when
    // there are some, so GEMM-only files keep their shape.
    {
      json required = dj;
      if (required.is_object()) {
        required.erase("family_records");
        required.erase("family_misses");
      }
      exactFields(required, {"device", "records", "misses"}, where);
    }
    DeviceKey key = parseKey(dj.at("device"), at(where, "device"));
    // Two entries of one key or two records of one problem have no
    // defined winner a hand edit intended; say so rather than pick one.
    if (db.find(key))
      fail(at(where, "device"), "the same device key as an earlier entry; "
                                "merge their records into one entry");
    Device &d = db.findOrAdd(key);
    const json &records = getArray(dj, "records", where);
    for (size_t r = 0; r < records.size(); ++r) {
      std::string rw = where + ".records[" + std::to_string(r) + "]";
      TuningRecord rec = parseRecord(records[r], rw);
      auto it = std::lower_bound(d.records.begin(), d.records.end(),
                                 rec.problem, recordLess);
      if (it != d.records.end() && it->problem == rec.problem)
        fail(rw, "the same problem as an earlier record of this device; "
                 "keep one of them");
      d.records.insert(it, std::move(rec));
    }
    const json &misses = getArray(dj, "misses", where);
    for (size_t m = 0; m < misses.size(); ++m) {
      std::string mw = where + ".misses[" + std::to_string(m) + "]";
      GemmProblem p;
      try {
        p = gemmProblemFromJson(misses[m]);
      } catch (const Error &e) {
        fail(mw, e.what());
      } catch (const json::exception &e) {
        fail(mw, e.what());
      }
      if (auto why = checkProblem(p))
        fail(mw, *why);
      insertMiss(d, p);
    }
    if (dj.contains("family_records")) {
      const json &frs = getArray(dj, "family_records", where);
      for (size_t r = 0; r < frs.size(); ++r) {
        std::string rw = where + ".family_records[" + std::to_string(r) + "]";
        FamilyRecord rec = parseFamilyRecord(frs[r], rw);
        auto it = std::lower_bound(d.familyRecords.begin(),
                                   d.familyRecords.end(), rec, familyLess);
        if (it != d.familyRecords.end() && !familyLess(rec, *it))
          fail(rw, "the same problem as an earlier record of this device; "
                   "keep one of them");
        d.familyRecords.insert(it, std::move(rec));
      }
    }
    if (dj.contains("family_misses")) {
      const json &fms = getArray(dj, "family_misses", where);
      for (size_t m = 0; m < fms.size(); ++m)
        insertMiss(d, parseFamilyMiss(fms[m], where + ".family_misses[" +
                                                  std::to_string(m) + "]"));
    }
  }
  return db;
}

json TuningDB::toJson() const {
  json devices = json::array();
  for (const Device &d : devices_) {
    json records = json::array();
    for (const TuningRecord &r : d.records)
      records.push_back(kgen::toJson(r));
    json misses = json::array();
    for (const GemmProblem &p : d.misses)
      misses.push_back(kgen::toJson(p));
    json dev{{"device", kgen::toJson(d.key)},
             {"records", std::move(records)},
             {"misses", std::move(misses)}};
    if (!d.familyRecords.empty()) {
      json frs = json::array();
      for (const FamilyRecord &r : d.familyRecords)
        frs.push_back(familyRecordJson(r));
      dev["family_records"] = std::move(frs);
    }
    if (!d.familyMisses.empty())
      dev["family_misses"] = d.familyMisses;
    devices.push_back(std::move(dev));
  }
  return json{{"schema", std::string(kTuningDbSchema)},
              {"devices", std::move(devices)}};
}

TuningDB TuningDB::load(const std::string &path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.fd < 0) {
    if (errno == ENOENT)
      return TuningDB();
    throw Error("cannot read tuning DB " + path + ": " + errnoText() +
                " (check its permissions, or set KGEN_TUNING_DB to another "
                "file)");
  }
  std::string text;
  char buf[1 << 16];
  for (;;) {
    ssize_t r = ::read(fd.fd, buf, sizeof(buf));
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      throw Error("cannot read tuning DB " + path + ": " + errnoText() +
                  " (set KGEN_TUNING_DB to a file)");
    if (r == 0)
      break;
    text.append(buf, size_t(r));
  }
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error &e) {
    throw Error("tuning DB " + path + " is not valid JSON: " + e.what() +
                kLoadFix);
  }
  try {
    return fromJson(j);
  } catch (const Error &e) {
    throw Error("tuning DB " + path + ": " + e.what() + kLoadFix);
  }
}

void TuningDB::save(const std::string &path) const {
  writeAtomically(path, toJson().dump(2) + "\n");
}

void TuningDB::mergeAndSave(const std::string &path) {
  makeDirs(parentDir(path), path);
  std::string lockPath = path + ".lock";
  Fd lock(::open(lockPath.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                 0600));
  if (lock.fd < 0)
    throw Error("cannot write tuning DB " + path + ": cannot open " + lockPath +
                ": " + errnoText() + kWriteFix);
  while (::flock(lock.fd, LOCK_EX) != 0)
    if (errno != EINTR)
      throw Error("cannot write tuning DB " + path + ": cannot lock " +
                  lockPath + ": " + errnoText() + kWriteFix);
  TuningDB disk = load(path);
  disk.merge(*this);
  disk.save(path);
  *this = std::move(disk);
  // Closing the descriptor (Fd) releases the lock.
}

bool TuningDB::record(const DeviceKey &key, TuningRecord r) {
  if (auto why = checkKey(key))
    throw Error("tuning DB: invalid device key " + kgen::toJson(key).dump() +
                ": " + *why);
  if (auto why = checkRecord(r))
    throw Error("tuning DB: cannot record " + kgen::toJson(r.problem).dump() +
                ": " + *why);
  if (r.tunedAt.empty())
    r.tunedAt = nowUtc();
  return insertRecord(findOrAdd(key), std::move(r));
}

void TuningDB::merge(const TuningDB &other) {
  if (&other == this)
    return;
  for (const Device &od : other.devices_) {
    Device &d = findOrAdd(od.key);
    for (const TuningRecord &r : od.records)
      insertRecord(d, r);
    for (const GemmProblem &p : od.misses)
      insertMiss(d, p);
    for (const FamilyRecord &r : od.familyRecords)
      insertRecord(d, r);
    for (const json &p : od.familyMisses)
      insertMiss(d, p);
  }
}

TuningDB::Match TuningDB::lookup(const DeviceKey &key,
                                 const GemmProblem &p) const {
  const Device *d = find(key);
  if (!d)
    return {};
  auto recordOf = [&](const GemmProblem &q) -> const TuningRecord * {
    auto it =
        std::lower_bound(d->records.begin(), d->records.end(), q, recordLess);
    return it != d->records.end() && it->problem == q ? &*it : nullptr;
  };
  if (const TuningRecord *r = recordOf(p))
    return {r, Match::Exact, p};
  for (int64_t m : mBuckets(p.m)) {
    GemmProblem q = p;
    q.m = m;
    if (const TuningRecord *r = recordOf(q))
      return {r, Match::Bucket, q};
  }
  return {};
}

bool TuningDB::noteMiss(const DeviceKey &key, const GemmProblem &p) {
  if (auto why = checkKey(key))
    throw Error("tuning DB: invalid device key " + kgen::toJson(key).dump() +
                ": " + *why);
  if (auto why = checkProblem(p))
    throw Error("tuning DB: cannot note a miss for " + kgen::toJson(p).dump() +
                ": " + *why);
  return insertMiss(findOrAdd(key), p);
}

std::vector<GemmProblem> TuningDB::misses(const DeviceKey &key) const {
  const Device *d = find(key);
  return d ? d->misses : std::vector<GemmProblem>();
}

size_t TuningDB::staleCount(const DeviceKey &key) const {
  size_t n = 0;
  for (const Device &d : devices_)
    if (!(d.key == key))
      n += d.records.size() + d.familyRecords.size();
  return n;
}

std::vector<TuningRecord> TuningDB::records(const DeviceKey &key) const {
  const Device *d = find(key);
  return d ? d->records : std::vector<TuningRecord>();
}

size_t TuningDB::size() const {
  size_t n = 0;
  for (const Device &d : devices_)
    n += d.records.size() + d.familyRecords.size();
  return n;
}

void TuningDB::exportCsv(std::ostream &os, const DeviceKey &key) const {
  // std::to_string and std::to_chars ignore the stream's locale: a locale
  // with ',' as decimal point or digit grouping would break the columns.
  std::string out = "M,N,K,kernel,time_us,tflops,gb_s\n";
  if (const Device *d = find(key))
    for (const TuningRecord &r : d->records)
      out += std::to_string(r.problem.m) + "," + std::to_string(r.problem.n) +
             "," + std::to_string(r.problem.k) + "," + csvField(r.kernel) +
             "," + fixed(r.timeUs, 3) + "," + fixed(r.tflops, 2) + "," +
             fixed(r.gbs, 2) + "\n";
  os << out;
}

//===----------------------------------------------------------------------===//
// Attention and mLSTM
//===----------------------------------------------------------------------===//

bool TuningDB::record(const DeviceKey &key, FamilyRecord r) {
  if (auto why = checkKey(key))
    throw Error("tuning DB: invalid device key " + kgen::toJson(key).dump() +
                ": " + *why);
  if (auto why = checkFamilyRecord(r))
    throw Error("tuning DB: cannot record the " +
                std::string(toString(r.family)) + " problem " +
                r.problem.dump() + ": " + *why);
  if (r.tunedAt.empty())
    r.tunedAt = nowUtc();
  return insertRecord(findOrAdd(key), std::move(r));
}

TuningDB::FamilyMatch
TuningDB::lookupFamily(const DeviceKey &key,
                       const std::vector<json> &tries) const {
  const Device *d = find(key);
  if (!d || tries.empty())
    return {};
  for (size_t i = 0; i < tries.size(); ++i) {
    FamilyRecord probe;
    probe.family = *familyOf(tries[i]);
    probe.problem = tries[i];
    auto it = std::lower_bound(d->familyRecords.begin(), d->familyRecords.end(),
                               probe, familyLess);
    if (it != d->familyRecords.end() && !familyLess(probe, *it))
      return {&*it, i == 0 ? Match::Exact : Match::Bucket, tries[i]};
  }
  return {};
}

TuningDB::FamilyMatch TuningDB::lookup(const DeviceKey &key,
                                       const AttentionProblem &p) const {
  std::vector<json> tries{tuningProblemJson(p)};
  for (const AttentionProblem &b : attentionBuckets(p))
    tries.push_back(tuningProblemJson(b));
  return lookupFamily(key, tries);
}

TuningDB::FamilyMatch TuningDB::lookup(const DeviceKey &key,
                                       const MlstmProblem &p) const {
  std::vector<json> tries{tuningProblemJson(p)};
  for (const MlstmProblem &b : mlstmBuckets(p))
    tries.push_back(tuningProblemJson(b));
  return lookupFamily(key, tries);
}

namespace {
template <class P>
bool noteFamilyMiss(const DeviceKey &key, const P &p,
                    const std::function<bool(const json &)> &insert) {
  if (auto why = checkKey(key))
    throw Error("tuning DB: invalid device key " + kgen::toJson(key).dump() +
                ": " + *why);
  if (auto why = checkProblem(p))
    throw Error("tuning DB: cannot note a miss for " + toJson(p).dump() + ": " +
                *why);
  return insert(tuningProblemJson(p));
}
} // namespace

bool TuningDB::noteMiss(const DeviceKey &key, const AttentionProblem &p) {
  return noteFamilyMiss(
      key, p, [&](const json &j) { return insertMiss(findOrAdd(key), j); });
}

bool TuningDB::noteMiss(const DeviceKey &key, const MlstmProblem &p) {
  return noteFamilyMiss(
      key, p, [&](const json &j) { return insertMiss(findOrAdd(key), j); });
}

std::vector<json> TuningDB::familyMisses(const DeviceKey &key,
                                         TuneFamily f) const {
  std::vector<json> out;
  if (const Device *d = find(key))
    for (const json &p : d->familyMisses)
      if (familyOf(p) == f)
        out.push_back(p);
  return out;
}

std::vector<FamilyRecord> TuningDB::familyRecords(const DeviceKey &key,
                                                  TuneFamily f) const {
  std::vector<FamilyRecord> out;
  if (const Device *d = find(key))
    for (const FamilyRecord &r : d->familyRecords)
      if (r.family == f)
        out.push_back(r);
  return out;
}

void TuningDB::exportCsv(std::ostream &os, const DeviceKey &key,
                         TuneFamily f) const {
  std::string out = f == TuneFamily::Attention
                        ? "batch,heads_q,heads_kv,seqlen_q,seqlen_k,"
                          "head_dim_qk,head_dim_v,kernel,time_us,tflops,gb_s\n"
                        : "B,NH,S,DQK,DV,kernel,time_us,tflops,gb_s\n";
  for (const FamilyRecord &r : familyRecords(key, f)) {
    std::vector<int64_t> cols;
    if (f == TuneFamily::Attention) {
      AttentionProblem p = attentionProblemFromJson(r.problem);
      cols = {p.batch,   p.headsQ,    p.headsKv, p.seqlenQ,
              p.seqlenK, p.headDimQk, p.headDimV};
    } else {
      MlstmProblem p = mlstmProblemFromJson(r.problem);
      cols = {p.b, p.nh, p.s, p.dqk, p.dv};
    }
    for (int64_t c : cols)
      out += std::to_string(c) + ",";
    out += csvField(r.kernel) + "," + fixed(r.timeUs, 3) + "," +
           fixed(r.tflops, 2) + "," + fixed(r.gbs, 2) + "\n";
  }
  os << out;
}
