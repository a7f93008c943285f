//===- TuningDBTest.cpp - The tuning DB -----------------------------------===//
//
// Lookup order (exact, M buckets, none), stale-key rejection, merging runs,
// misses, and the file: round trip, atomic save, strict load that leaves a
// bad file as it was. Files go to a fresh directory under $KGEN_CACHE_DIR
// (set per test by CMake) or the temp dir.
//
//===----------------------------------------------------------------------===//

#include "kgen/Runtime/TuningDB.h"
#include "kgen/Codegen/Json.h"
#include "kgen/Error.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <sys/stat.h>

using namespace kgen;
namespace fs = std::filesystem;

namespace {

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeFile(const std::string &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

DeviceKey h200() {
  return {.device = "NVIDIA H200",
          .arch = "sm_90",
          .target = Target::SM90A,
          .computeUnits = 132,
          .kgenVersion = "0.1.0",
          .compiler = "nvrtc",
          .compilerVersion = "12.4"};
}

/// A linear layer's GEMM: y = x W^T, N and K baked in.
GemmProblem linear(int64_t m, int64_t n = 2048, int64_t k = 2048) {
  return {.m = m, .n = n, .k = k, .transB = true};
}

TuningRecord rec(const GemmProblem &p, double us, int blockM = 64,
                 std::string tunedAt = "2025-01-01T00:00:00Z") {
  TuningRecord r;
  r.problem = p;
  r.config.blockM = blockM;
  r.kernel = "kgen_gemm_" + std::to_string(p.m) + "_b" + std::to_string(blockM);
  r.timeUs = us;
  r.tflops = 2.0 * double(p.m) * double(p.n) * double(p.k) / (us * 1e6);
  r.gbs = 1.5;
  r.runnerUpUs = us * 1.1;
  r.tunedAt = std::move(tunedAt);
  return r;
}

class TuningDBTest : public ::testing::Test {
protected:
  void SetUp() override {
    const char *base = std::getenv("KGEN_CACHE_DIR");
    std::string parent = base && *base ? base : fs::temp_directory_path();
    fs::create_directories(parent);
    std::string tmpl = parent + "/tuningdbtest-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string dir_;
};

//===----------------------------------------------------------------------===//
// Lookup
//===----------------------------------------------------------------------===//

TEST_F(TuningDBTest, ExactHit) {
  TuningDB db;
  EXPECT_TRUE(db.record(h200(), rec(linear(100), 5.0)));
  EXPECT_TRUE(db.record(h200(), rec(linear(112), 6.0)));
  TuningDB::Match m = db.lookup(h200(), linear(100));
  ASSERT_NE(m.record, nullptr);
  EXPECT_EQ(m.kind, TuningDB::Match::Exact);
  EXPECT_EQ(m.record->timeUs, 5.0);
  EXPECT_EQ(m.bucketProblem, linear(100));
}

TEST_F(TuningDBTest, BucketCandidatesFollowTheIssuesRule) {
  EXPECT_EQ(mBuckets(100), (std::vector<int64_t>{112, 128}));
  EXPECT_EQ(mBuckets(300), (std::vector<int64_t>{304, 320, 384, 512}));
  EXPECT_EQ(mBuckets(1), (std::vector<int64_t>{16, 32, 64, 128}));
  EXPECT_EQ(mBuckets(3), (std::vector<int64_t>{16, 32, 64, 128, 4}));
  EXPECT_EQ(mBuckets(64), (std::vector<int64_t>{128}));
  EXPECT_EQ(mBuckets(128), (std::vector<int64_t>{})); // its own bucket
  EXPECT_EQ(mBuckets(4097),
            (std::vector<int64_t>{4112, 4128, 4160, 4224, 8192}));
  EXPECT_EQ(mBuckets(0), (std::vector<int64_t>{}));
}

TEST_F(TuningDBTest, BucketPrefersMultipleOf16Over128) {
  TuningDB db;
  db.record(h200(), rec(linear(128), 7.0));
  db.record(h200(), rec(linear(112), 9.0)); // slower, but the nearer bucket
  db.record(h200(), rec(linear(96), 1.0));  // below M: never a bucket
  TuningDB::Match m = db.lookup(h200(), linear(100));
  ASSERT_NE(m.record, nullptr);
  EXPECT_EQ(m.kind, TuningDB::Match::Bucket);
  EXPECT_EQ(m.bucketProblem, linear(112));
  EXPECT_EQ(m.record->problem.m, 112);

  TuningDB only128;
  only128.record(h200(), rec(linear(128), 7.0));
  m = only128.lookup(h200(), linear(100));
  ASSERT_NE(m.record, nullptr);
  EXPECT_EQ(m.kind, TuningDB::Match::Bucket);
  EXPECT_EQ(m.bucketProblem.m, 128);
}

TEST_F(TuningDBTest, BucketFallsBackToNextPowerOfTwo) {
  TuningDB db;
  db.record(h200(), rec(linear(256), 3.0));  // below 300
  db.record(h200(), rec(linear(1024), 3.0)); // beyond the next power of two
  EXPECT_EQ(db.lookup(h200(), linear(300)).kind, TuningDB::Match::None);
  db.record(h200(), rec(linear(512), 4.0));
  TuningDB::Match m = db.lookup(h200(), linear(300));
  ASSERT_NE(m.record, nullptr);
  EXPECT_EQ(m.kind, TuningDB::Match::Bucket);
  EXPECT_EQ(m.bucketProblem, linear(512));
  // A multiple of 128 comes before the power of two.
  db.record(h200(), rec(linear(384), 5.0));
  EXPECT_EQ(db.lookup(h200(), linear(300)).bucketProblem.m, 384);
}

TEST_F(TuningDBTest, OnlyMIsBucketed) {
  TuningDB db;
  db.record(h200(), rec(linear(112), 5.0));
  std::vector<GemmProblem> others;
  others.push_back(linear(100, 4096, 2048)); // N
  others.push_back(linear(100, 2048, 4096)); // K
  GemmProblem p = linear(100);
  p.transB = false; // layout nn
  others.push_back(p);
  p = linear(100);
  p.transA = true; // layout tt
  others.push_back(p);
  p = linear(100);
  p.ab = p.c = DType::F16;
  others.push_back(p);
  p = linear(100);
  p.c = DType::F32;
  others.push_back(p);
  p = linear(100);
  p.alignA = 4;
  others.push_back(p);
  p = linear(100);
  p.staticM = true;
  others.push_back(p);
  for (const GemmProblem &q : others) {
    EXPECT_EQ(db.lookup(h200(), q).kind, TuningDB::Match::None)
        << toJson(q).dump();
    GemmProblem exact = q;
    exact.m = 112;
    EXPECT_EQ(db.lookup(h200(), exact).record, nullptr) << toJson(q).dump();
  }
  EXPECT_EQ(db.lookup(h200(), linear(100)).kind, TuningDB::Match::Bucket);
}

//===----------------------------------------------------------------------===//
// Stale keys
//===----------------------------------------------------------------------===//

TEST_F(TuningDBTest, RecordsOfAnotherKeyAreIgnoredAndCounted) {
  std::vector<DeviceKey> others(7, h200());
  others[0].kgenVersion = "0.0.9";
  others[1].compilerVersion = "12.3";
  others[2].device = "NVIDIA H100 80GB HBM3";
  others[3].computeUnits = 114;
  others[4].arch = "sm_80";
  others[5].compiler = "hiprtc";
  others[6].target = Target::SM80;

  TuningDB db;
  for (const DeviceKey &k : others)
    db.record(k, rec(linear(100), 1.0));
  EXPECT_EQ(db.size(), others.size());
  std::string path = dir_ + "/tuning.json";
  db.save(path);
  // Kept in the file (other GPUs may share it), never returned.
  TuningDB loaded = TuningDB::load(path);
  for (const TuningDB *d : {&db, &loaded}) {
    EXPECT_EQ(d->lookup(h200(), linear(100)).record, nullptr);
    EXPECT_EQ(d->lookup(h200(), linear(96)).record, nullptr); // no bucket
    EXPECT_EQ(d->staleCount(h200()), others.size());
    EXPECT_TRUE(d->records(h200()).empty());
    for (const DeviceKey &k : others) {
      EXPECT_EQ(d->staleCount(k), others.size() - 1);
      EXPECT_EQ(d->lookup(k, linear(100)).kind, TuningDB::Match::Exact);
    }
  }
  db.record(h200(), rec(linear(100), 2.0));
  EXPECT_EQ(db.lookup(h200(), linear(100)).record->timeUs, 2.0);
  EXPECT_EQ(db.staleCount(h200()), others.size());
}

//===----------------------------------------------------------------------===//
// Record and merge
//===----------------------------------------------------------------------===//

TEST_F(TuningDBTest, RecordKeepsTheFasterOne) {
  TuningDB db;
  EXPECT_TRUE(db.record(h200(), rec(linear(64), 5.0, 64)));
  EXPECT_FALSE(
      db.record(h200(), rec(linear(64), 6.0, 128, "2026-01-01T00:00:00Z")));
  EXPECT_EQ(db.lookup(h200(), linear(64)).record->config.blockM, 64);
  EXPECT_TRUE(db.record(h200(), rec(linear(64), 4.0, 128)));
  EXPECT_EQ(db.lookup(h200(), linear(64)).record->config.blockM, 128);
  // Equal time: the later measurement.
  EXPECT_TRUE(
      db.record(h200(), rec(linear(64), 4.0, 32, "2025-06-01T00:00:00Z")));
  EXPECT_EQ(db.lookup(h200(), linear(64)).record->config.blockM, 32);
  EXPECT_EQ(db.size(), 1u);
}

TEST_F(TuningDBTest, RecordFillsTunedAtAndRefusesBadRecords) {
  TuningDB db;
  db.record(h200(), rec(linear(64), 5.0, 64, ""));
  std::string at = db.lookup(h200(), linear(64)).record->tunedAt;
  EXPECT_EQ(at.size(), 20u) << at; // 2025-01-31T12:00:00Z
  EXPECT_EQ(at.back(), 'Z');

  EXPECT_THROW(db.record(h200(), rec(linear(64), 0.0)), Error);
  EXPECT_THROW(db.record(h200(), rec(linear(64), -1.0)), Error);
  TuningRecord r = rec(linear(64), 1.0);
  r.gbs = -1;
  EXPECT_THROW(db.record(h200(), r), Error);
  EXPECT_THROW(db.record(h200(), rec(linear(0), 1.0)), Error);
  DeviceKey k = h200();
  k.computeUnits = 0;
  EXPECT_THROW(db.record(k, rec(linear(64), 1.0)), Error);
  k = h200();
  k.compilerVersion = "";
  EXPECT_THROW(db.record(k, rec(linear(64), 1.0)), Error);
  EXPECT_EQ(db.size(), 1u);
}

TEST_F(TuningDBTest, MergeOfTwoRunsIsTheUnionWithTheFasterRecords) {
  DeviceKey mi300 = {.device = "AMD Instinct MI300X",
                     .arch = "gfx942:sramecc+:xnack-",
                     .target = Target::GFX942,
                     .computeUnits = 304,
                     .kgenVersion = "0.1.0",
                     .compiler = "hiprtc",
                     .compilerVersion = "6.2"};
  TuningDB a, b;
  a.record(h200(), rec(linear(16), 3.0, 16));
  a.record(h200(), rec(linear(32), 4.0, 32)); // slower than b's
  a.record(h200(), rec(linear(64), 5.0, 64)); // faster than b's
  a.noteMiss(h200(), linear(128));
  a.noteMiss(h200(), linear(100));
  b.record(h200(), rec(linear(32), 3.5, 128));
  b.record(h200(), rec(linear(64), 6.0, 128));
  b.record(h200(), rec(linear(128), 7.0, 128)); // a's miss, tuned by b
  b.record(mi300, rec(linear(16), 9.0, 16));
  b.noteMiss(mi300, linear(100));

  TuningDB ab = a, ba = b;
  ab.merge(b);
  ba.merge(a);
  EXPECT_EQ(ab, ba); // order does not matter
  EXPECT_EQ(ab.toJson().dump(), ba.toJson().dump());

  EXPECT_EQ(ab.size(), 5u);
  EXPECT_EQ(ab.lookup(h200(), linear(16)).record->config.blockM, 16);
  EXPECT_EQ(ab.lookup(h200(), linear(32)).record->config.blockM, 128);
  EXPECT_EQ(ab.lookup(h200(), linear(32)).record->timeUs, 3.5);
  EXPECT_EQ(ab.lookup(h200(), linear(64)).record->config.blockM, 64);
  EXPECT_EQ(ab.lookup(h200(), linear(128)).kind, TuningDB::Match::Exact);
  EXPECT_EQ(ab.lookup(mi300, linear(16)).record->timeUs, 9.0);
  EXPECT_EQ(ab.misses(h200()), (std::vector<GemmProblem>{linear(100)}));
  EXPECT_EQ(ab.misses(mi300), (std::vector<GemmProblem>{linear(100)}));

  // Merging again changes nothing.
  TuningDB again = ab;
  again.merge(b);
  again.merge(a);
  again.merge(again);
  EXPECT_EQ(again, ab);
}

TEST_F(TuningDBTest, MergeAndSaveKeepsWhatAnotherRunWrote) {
  std::string path = dir_ + "/shared/tuning.json";
  TuningDB first, second;
  first.record(h200(), rec(linear(16), 3.0));
  second.record(h200(), rec(linear(32), 4.0));
  second.noteMiss(h200(), linear(48));
  first.mergeAndSave(path);
  second.mergeAndSave(path);
  TuningDB onDisk = TuningDB::load(path);
  EXPECT_EQ(onDisk, second);
  EXPECT_EQ(onDisk.size(), 2u);
  EXPECT_EQ(onDisk.misses(h200()).size(), 1u);
}

//===----------------------------------------------------------------------===//
// Misses
//===----------------------------------------------------------------------===//

TEST_F(TuningDBTest, MissesAreNotedOnceAndRoundTrip) {
  TuningDB db;
  db.record(h200(), rec(linear(64), 5.0));
  EXPECT_TRUE(db.noteMiss(h200(), linear(100)));
  EXPECT_FALSE(db.noteMiss(h200(), linear(100))); // already noted
  EXPECT_FALSE(db.noteMiss(h200(), linear(64)));  // has a record
  EXPECT_TRUE(db.noteMiss(h200(), linear(7, 4096, 4096)));
  DeviceKey other = h200();
  other.compilerVersion = "12.8";
  EXPECT_TRUE(db.noteMiss(other, linear(100)));
  EXPECT_EQ(db.misses(h200()).size(), 2u);
  EXPECT_EQ(db.misses(other), (std::vector<GemmProblem>{linear(100)}));
  EXPECT_THROW(db.noteMiss(h200(), linear(-1)), Error);

  std::string path = dir_ + "/tuning.json";
  db.save(path);
  TuningDB loaded = TuningDB::load(path);
  EXPECT_EQ(loaded, db);
  EXPECT_EQ(loaded.misses(h200()), db.misses(h200()));

  // Tuning a missed problem clears the miss.
  loaded.record(h200(), rec(linear(100), 5.0));
  EXPECT_EQ(loaded.misses(h200()),
            (std::vector<GemmProblem>{linear(7, 4096, 4096)}));
}

TEST_F(TuningDBTest, MissesAreCapped) {
  TuningDB db;
  for (int64_t m = 1; m <= int64_t(TuningDB::kMaxMisses); ++m)
    EXPECT_TRUE(db.noteMiss(h200(), linear(m)));
  EXPECT_FALSE(db.noteMiss(h200(), linear(int64_t(TuningDB::kMaxMisses) + 1)));
  EXPECT_EQ(db.misses(h200()).size(), TuningDB::kMaxMisses);
}

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

TEST_F(TuningDBTest, MissingFileIsAnEmptyDB) {
  TuningDB db = TuningDB::load(dir_ + "/nothing/here.json");
  EXPECT_EQ(db.size(), 0u);
  EXPECT_EQ(db, TuningDB());
  EXPECT_FALSE(fs::exists(dir_ + "/nothing"));
}

TEST_F(TuningDBTest, SaveLoadRoundTrip) {
  TuningDB db;
  TuningRecord r = rec(linear(100), 1.0 / 3.0);
  r.config = {.blockM = 64,
              .blockN = 256,
              .blockK = 64,
              .warpsM = 1,
              .warpsN = 4,
              .stages = 4,
              .smem = SmemLayout::Swizzled,
              .smemPad = 0};
  r.heuristicUs = 0.1 + 0.2; // not exactly representable: must round-trip
  r.gbs = 4812.123456789;
  db.record(h200(), r);
  GemmProblem f16 = linear(1, 4096, 11008);
  f16.ab = DType::F16;
  f16.c = DType::F32;
  f16.alignA = 2;
  f16.staticM = true;
  db.record(h200(), rec(f16, 12.5));
  db.noteMiss(h200(), linear(3));
  // Epilogue and batch fields are part of the key and round-trip.
  GemmProblem fused = linear(100);
  fused.bias = BiasKind::AlongN;
  fused.act = Activation::SiLU;
  fused.residual = true;
  fused.batch = 3;
  db.record(h200(), rec(fused, 7.0));

  std::string path = dir_ + "/a/b/tuning.json";
  db.save(path);
  TuningDB loaded = TuningDB::load(path);
  EXPECT_EQ(loaded, db);
  EXPECT_EQ(loaded.lookup(h200(), linear(100)).record->heuristicUs, 0.1 + 0.2);
  EXPECT_EQ(loaded.lookup(h200(), fused).record->timeUs, 7.0);
  EXPECT_EQ(loaded.toJson().at("schema"), "kgen-tuning-db/1");

  // Saving the loaded DB gives the same bytes.
  std::string first = readFile(path);
  loaded.save(path);
  EXPECT_EQ(readFile(path), first);

  // Private directories and file, no temp files left behind.
  struct stat st;
  ASSERT_EQ(::stat((dir_ + "/a").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  size_t files = 0;
  for (const auto &e : fs::directory_iterator(dir_ + "/a/b")) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1u);
}

TEST_F(TuningDBTest, SaveReportsAnUnwritablePath) {
  writeFile(dir_ + "/file", "x");
  TuningDB db;
  try {
    db.save(dir_ + "/file/tuning.json");
    FAIL() << "expected kgen::Error";
  } catch (const Error &e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(dir_ + "/file/tuning.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("KGEN_TUNING_DB"), std::string::npos) << msg;
  }
  EXPECT_EQ(readFile(dir_ + "/file"), "x");
}

/// Each case: file text and a fragment the message must contain.
struct Malformed {
  const char *name;
  std::string text;
  std::string expect;
};

std::string validDb() {
  TuningDB db;
  db.record(h200(), rec(linear(100), 5.0));
  db.noteMiss(h200(), linear(200));
  return db.toJson().dump(2);
}

/// validDb() with the first occurrence of `from` replaced by `to`.
std::string edit(const std::string &from, const std::string &to) {
  std::string s = validDb();
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

std::string firstDevice() {
  return nlohmann::json::parse(validDb()).at("devices").at(0).dump();
}

TEST_F(TuningDBTest, MalformedFilesThrowAndStayUntouched) {
  const Malformed cases[] = {
      {"empty", "", "not valid JSON"},
      {"truncated", validDb().substr(0, 80), "not valid JSON"},
      {"garbage", "{ schema: kgen }", "not valid JSON"},
      {"array", "[]", "top level: must be a JSON object"},
      {"noSchema", R"({"devices": []})", "missing field 'schema'"},
      {"otherSchema", R"({"schema": "kgen-tuning-db/2", "devices": []})",
       "schema: is \"kgen-tuning-db/2\", this kgen reads \"kgen-tuning-db/1\""},
      {"schemaNumber", R"({"schema": 1, "devices": []})", "schema: is 1"},
      {"devicesObject", R"({"schema": "kgen-tuning-db/1", "devices": {}})",
       "devices: must be an array"},
      {"unknownTop",
       R"({"schema": "kgen-tuning-db/1", "devices": [], "extra": 1})",
       "unknown field 'extra'"},
      {"timeString", edit("\"time_us\": 5.0", "\"time_us\": \"5\""),
       "devices[0].records[0].time_us: must be a number, got \"5\""},
      {"timeZero", edit("\"time_us\": 5.0", "\"time_us\": 0"),
       "devices[0].records[0]: 'time_us' = 0 must be > 0"},
      {"cuString", edit("\"compute_units\": 132", "\"compute_units\": \"132\""),
       "devices[0].device.compute_units: must be a positive integer"},
      {"badTarget", edit("\"sm_90a\"", "\"sm_91\""),
       "devices[0].device.target: \"sm_91\" is not a kgen target"},
      {"emptyCompiler", edit("\"nvrtc\"", "\"\""),
       "devices[0].device: 'compiler' is empty"},
      {"problemM", edit("\"m\": 100", "\"m\": \"100\""),
       "devices[0].records[0].problem: invalid gemm JSON: 'm' must be an "
       "integer"},
      {"problemZero", edit("\"m\": 100", "\"m\": 0"),
       "devices[0].records[0]: 'problem': gemm: m = 0 must be >= 1"},
      {"configBad", edit("\"stages\": 3", "\"stages\": [3]"),
       "devices[0].records[0].config: invalid gemm JSON: 'stages'"},
      {"missingKernel", edit("\"kernel\"", "\"kernal\""),
       "devices[0].records[0]: unknown field 'kernal'"},
      {"missBad", edit("\"m\": 200", "\"m\": -2"),
       "devices[0].misses[0]: gemm: m = -2 must be >= 1"},
      {"duplicateRecord",
       edit("\"records\": [",
            "\"records\": [" + toJson(rec(linear(100), 1.0)).dump() + ","),
       "devices[0].records[1]: the same problem as an earlier record"},
      {"duplicateDevice",
       R"({"schema": "kgen-tuning-db/1", "devices": [)" + firstDevice() + "," +
           firstDevice() + "]}",
       "devices[1].device: the same device key as an earlier entry"},
  };
  for (const Malformed &c : cases) {
    SCOPED_TRACE(c.name);
    std::string path = dir_ + "/" + c.name + ".json";
    writeFile(path, c.text);
    struct stat before;
    ASSERT_EQ(::stat(path.c_str(), &before), 0);
    try {
      TuningDB::load(path);
      ADD_FAILURE() << "expected kgen::Error for " << c.text;
    } catch (const Error &e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("tuning DB " + path), std::string::npos) << msg;
      EXPECT_NE(msg.find(c.expect), std::string::npos) << msg;
      EXPECT_NE(msg.find("move it away"), std::string::npos) << msg;
    }
    // Neither load nor a merging save may touch a bad file.
    TuningDB mine;
    mine.record(h200(), rec(linear(1), 1.0));
    EXPECT_THROW(mine.mergeAndSave(path), Error);
    EXPECT_EQ(readFile(path), c.text);
    struct stat after;
    ASSERT_EQ(::stat(path.c_str(), &after), 0);
    EXPECT_EQ(after.st_ino, before.st_ino);
    EXPECT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
    EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  }
  // The unedited text loads, so each case failed for its edit.
  writeFile(dir_ + "/valid.json", validDb());
  EXPECT_EQ(TuningDB::load(dir_ + "/valid.json").size(), 1u);
}

TEST_F(TuningDBTest, UnreadablePathIsAnError) {
  fs::create_directories(dir_ + "/adir");
  EXPECT_THROW(TuningDB::load(dir_ + "/adir"), Error);
}

//===----------------------------------------------------------------------===//
// CSV and the default path
//===----------------------------------------------------------------------===//

TEST_F(TuningDBTest, CsvExportOfOneDevice) {
  TuningDB db;
  TuningRecord a = rec(linear(128, 4096, 4096), 30.5);
  a.kernel = "kgen_gemm_bf16_nt_mdyn_n4096_k4096_b128x128x32_w2x2_s3_pad8_v888";
  a.tflops = 140.8177;
  a.gbs = 618.625;
  TuningRecord b = rec(linear(16), 8.1234);
  b.kernel = "kgen_gemm_bf16_nt_mdyn_n2048_k2048_b16x64x128_w1x4_s4_pad8_v888";
  b.tflops = 16.525;
  b.gbs = 1040.0;
  TuningRecord c = rec(linear(1), 7.0);
  c.kernel = "name, with \"quotes\"";
  c.tflops = 1.0;
  c.gbs = 1199.99999;
  db.record(h200(), a);
  db.record(h200(), b);
  db.record(h200(), c);
  DeviceKey other = h200();
  other.computeUnits = 66;
  db.record(other, rec(linear(1), 1.0)); // another device: not exported

  std::ostringstream os;
  db.exportCsv(os, h200());
  EXPECT_EQ(os.str(),
            "M,N,K,kernel,time_us,tflops,gb_s\n"
            "1,2048,2048,\"name, with \"\"quotes\"\"\",7.000,1.00,1200.00\n"
            "16,2048,2048,kgen_gemm_bf16_nt_mdyn_n2048_k2048_b16x64x128_w1x4_"
            "s4_pad8_v888,8.123,16.52,1040.00\n"
            "128,4096,4096,kgen_gemm_bf16_nt_mdyn_n4096_k4096_b128x128x32_w2x2_"
            "s3_pad8_v888,30.500,140.82,618.62\n");

  std::ostringstream none;
  TuningDB().exportCsv(none, h200());
  EXPECT_EQ(none.str(), "M,N,K,kernel,time_us,tflops,gb_s\n");
}

TEST_F(TuningDBTest, DefaultPath) {
  const char *saved = std::getenv("KGEN_TUNING_DB");
  std::string keep = saved ? saved : "";
  ::unsetenv("KGEN_TUNING_DB");
  CacheOptions o;
  o.dir = dir_ + "/cache";
  EXPECT_EQ(defaultTuningDbPath(o), dir_ + "/cache/tuning.json");
  ::setenv("KGEN_TUNING_DB", (dir_ + "/x/../db.json").c_str(), 1);
  EXPECT_EQ(defaultTuningDbPath(o), dir_ + "/db.json");
  if (saved)
    ::setenv("KGEN_TUNING_DB", keep.c_str(), 1);
  else
    ::unsetenv("KGEN_TUNING_DB");
}

} // namespace
