//===- FamilyTuningDBTest.cpp - Attention and mLSTM records in the DB -----===//
//
// The attention and mLSTM records of the tuning DB: bucket lookup (attention
// by seqlen_q / seqlen_k, mLSTM by S with B exact), stale keys, merging two
// runs, misses, malformed files (clear error, file untouched), a GEMM-only
// file keeping its shape, and the CSV columns.
//
//===----------------------------------------------------------------------===//

#include "kgen/Codegen/AttentionJson.h"
#include "kgen/Error.h"
#include "kgen/Runtime/TuningDB.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <sys/stat.h>

using namespace kgen;
using nlohmann::json;
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

AttentionProblem attn(int64_t sq, int64_t sk) {
  AttentionProblem p;
  p.batch = 2;
  p.headsQ = 32;
  p.headsKv = 8;
  p.seqlenQ = sq;
  p.seqlenK = sk;
  p.causal = true;
  return p;
}

MlstmProblem mlstm(int64_t s, int64_t b = 1) {
  MlstmProblem p;
  p.b = b;
  p.nh = 8;
  p.s = s;
  p.dqk = 256;
  p.dv = 512;
  return p;
}

FamilyRecord rec(const AttentionProblem &p, double us, int blockM = 64,
                 std::string tunedAt = "2025-01-01T00:00:00Z") {
  FamilyRecord r;
  r.family = TuneFamily::Attention;
  r.problem = tuningProblemJson(p);
  AttentionConfig c;
  c.blockM = blockM;
  r.config = toJson(c);
  r.kernel =
      "kgen_attn_" + std::to_string(p.seqlenK) + "_b" + std::to_string(blockM);
  r.timeUs = us;
  r.tflops = 1.0;
  r.gbs = 2.0;
  r.runnerUpUs = us * 1.1;
  r.tunedAt = std::move(tunedAt);
  return r;
}

FamilyRecord rec(const MlstmProblem &p, double us,
                 MlstmVariant v = MlstmVariant::Fused,
                 std::string tunedAt = "2025-01-01T00:00:00Z") {
  FamilyRecord r;
  r.family = TuneFamily::Mlstm;
  r.problem = tuningProblemJson(p);
  MlstmConfig c;
  c.variant = v;
  r.config = toJson(c);
  r.kernel = "kgen_mlstm_" + std::to_string(p.s);
  r.timeUs = us;
  r.tunedAt = std::move(tunedAt);
  return r;
}

class FamilyTuningDBTest : public ::testing::Test {
protected:
  void SetUp() override {
    const char *base = std::getenv("KGEN_CACHE_DIR");
    std::string parent = base && *base ? base : fs::temp_directory_path();
    fs::create_directories(parent);
    std::string tmpl = parent + "/familydbtest-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string dir_;
};

} // namespace

//===----------------------------------------------------------------------===//
// Lookup
//===----------------------------------------------------------------------===//

TEST_F(FamilyTuningDBTest, AttentionExactThenSeqlenBuckets) {
  TuningDB db;
  db.record(h200(), rec(attn(1, 4096), 5.0, 64));
  db.record(h200(), rec(attn(1, 4000), 6.0, 128));
  TuningDB::FamilyMatch m = db.lookup(h200(), attn(1, 4000));
  ASSERT_NE(m.record, nullptr);
  EXPECT_EQ(m.kind, TuningDB::Match::Exact);
  EXPECT_EQ(m.record->timeUs, 6.0);

  // Sk 3990 rounds up to 4000 (a multiple of 16): the first bucket.
  m = db.lookup(h200(), attn(1, 3990));
  ASSERT_NE(m.record, nullptr);
  EXPECT_EQ(m.kind, TuningDB::Match::Bucket);
  EXPECT_EQ(attentionProblemFromJson(m.bucketProblem).seqlenK, 4000);

  // 4001: 4016, 4032, 4096 (64 and 128), then 4096 (pow2): the 4096 one.
  m = db.lookup(h200(), attn(1, 4001));
  ASSERT_NE(m.record, nullptr);
  EXPECT_EQ(m.kind, TuningDB::Match::Bucket);
  EXPECT_EQ(m.record->kernel, rec(attn(1, 4096), 5.0, 64).kernel);

  // Buckets round up: a record below the call's length never serves it.
  EXPECT_EQ(db.lookup(h200(), attn(1, 4097)).kind, TuningDB::Match::None);
}

TEST_F(FamilyTuningDBTest, AttentionBucketsVaryKeysFirst) {
  std::vector<AttentionProblem> b = attentionBuckets(attn(100, 300));
  // Sq exact with every Sk bucket, then Sq = 112 with Sk exact, ...
  ASSERT_GE(b.size(), 5u);
  EXPECT_EQ(b[0].seqlenQ, 100);
  EXPECT_EQ(b[0].seqlenK, 304);
  EXPECT_EQ(b[3].seqlenQ, 100);
  EXPECT_EQ(b[3].seqlenK, 512);
  EXPECT_EQ(b[4].seqlenQ, 112);
  EXPECT_EQ(b[4].seqlenK, 300);
  // (1 + 2) x (1 + 4) pairs, less the exact one.
  EXPECT_EQ(b.size(), 14u);
  for (const AttentionProblem &q : b) {
    AttentionProblem same = q;
    same.seqlenQ = 100;
    same.seqlenK = 300;
    EXPECT_EQ(same, attn(100, 300)); // nothing else moves
  }
}

TEST_F(FamilyTuningDBTest, AttentionOnlySequenceLengthsAreBucketed) {
  TuningDB db;
  db.record(h200(), rec(attn(128, 128), 5.0));
  std::vector<AttentionProblem> others(6, attn(100, 100));
  others[0].batch = 3;
  others[1].headsKv = 32;
  others[2].headDimQk = others[2].headDimV = 64;
  others[3].causal = false;
  others[4].dtype = DType::F16;
  others[5].lse = true;
  for (const AttentionProblem &q : others)
    EXPECT_EQ(db.lookup(h200(), q).kind, TuningDB::Match::None)
        << toJson(q).dump();
  EXPECT_EQ(db.lookup(h200(), attn(100, 100)).kind, TuningDB::Match::Bucket);
}

TEST_F(FamilyTuningDBTest, MlstmBucketsSAndKeepsBExact) {
  TuningDB db;
  db.record(h200(), rec(mlstm(4096, 1), 50.0, MlstmVariant::TwoPhase));
  db.record(h200(), rec(mlstm(512, 1), 9.0, MlstmVariant::Fused));
  TuningDB::FamilyMatch m = db.lookup(h200(), mlstm(500, 1));
  ASSERT_NE(m.record, nullptr);
  EXPECT_EQ(m.kind, TuningDB::Match::Bucket);
  EXPECT_EQ(mlstmProblemFromJson(m.bucketProblem).s, 512);
  EXPECT_EQ(mlstmConfigFromJson(m.record->config).variant, MlstmVariant::Fused);
  m = db.lookup(h200(), mlstm(3000, 1));
  ASSERT_NE(m.record, nullptr);
  EXPECT_EQ(mlstmConfigFromJson(m.record->config).variant,
            MlstmVariant::TwoPhase);
  EXPECT_EQ(db.lookup(h200(), mlstm(512, 1)).kind, TuningDB::Match::Exact);
  // Another batch (or head count) never borrows a record.
  EXPECT_EQ(db.lookup(h200(), mlstm(512, 2)).kind, TuningDB::Match::None);
  MlstmProblem heads = mlstm(512, 1);
  heads.nh = 4;
  EXPECT_EQ(db.lookup(h200(), heads).kind, TuningDB::Match::None);
  EXPECT_EQ(mlstmBuckets(mlstm(128)).size(), 0u);
}

TEST_F(FamilyTuningDBTest, FamiliesDoNotShareRecords) {
  TuningDB db;
  db.record(h200(), rec(attn(128, 128), 5.0));
  EXPECT_EQ(db.lookup(h200(), mlstm(128)).kind, TuningDB::Match::None);
  EXPECT_EQ(db.records(h200()).size(), 0u); // GEMM's
  EXPECT_EQ(db.familyRecords(h200(), TuneFamily::Attention).size(), 1u);
  EXPECT_EQ(db.familyRecords(h200(), TuneFamily::Mlstm).size(), 0u);
  // A record whose problem is of the other family is refused.
  FamilyRecord wrong = rec(attn(128, 128), 5.0);
  wrong.family = TuneFamily::Mlstm;
  EXPECT_THROW(db.record(h200(), wrong), Error);
}

//===----------------------------------------------------------------------===//
// Stale keys, record rule, merge, misses
//===----------------------------------------------------------------------===//

TEST_F(FamilyTuningDBTest, RecordsOfAnotherKeyAreIgnoredAndCounted) {
  std::vector<DeviceKey> others(4, h200());
  others[0].kgenVersion = "0.0.9";
  others[1].compilerVersion = "12.3";
  others[2].device = "NVIDIA H100 80GB HBM3";
  others[3].computeUnits = 114;
  TuningDB db;
  for (const DeviceKey &k : others) {
    db.record(k, rec(attn(1, 4096), 1.0));
    db.record(k, rec(mlstm(4096), 1.0));
  }
  std::string path = dir_ + "/tuning.json";
  db.save(path);
  TuningDB loaded = TuningDB::load(path);
  EXPECT_EQ(loaded.size(), 2 * others.size());
  EXPECT_EQ(loaded.staleCount(h200()), 2 * others.size());
  EXPECT_EQ(loaded.lookup(h200(), attn(1, 4096)).record, nullptr);
  EXPECT_EQ(loaded.lookup(h200(), mlstm(4096)).record, nullptr);
  EXPECT_NE(loaded.lookup(others[0], mlstm(4096)).record, nullptr);
}

TEST_F(FamilyTuningDBTest, RecordKeepsTheFasterOneAndCanonicalizes) {
  TuningDB db;
  EXPECT_TRUE(db.record(h200(), rec(mlstm(64), 5.0)));
  EXPECT_FALSE(db.record(h200(), rec(mlstm(64), 6.0)));
  EXPECT_TRUE(db.record(h200(), rec(mlstm(64), 4.0, MlstmVariant::TwoPhase)));
  // A problem written with defaults left out is the same problem.
  FamilyRecord sparse = rec(mlstm(64), 3.0);
  sparse.problem = json{
      {"family", "mlstm"}, {"s", 64}, {"nh", 8}, {"dqk", 256}, {"dv", 512}};
  EXPECT_TRUE(db.record(h200(), sparse));
  ASSERT_EQ(db.familyRecords(h200(), TuneFamily::Mlstm).size(), 1u);
  EXPECT_EQ(db.lookup(h200(), mlstm(64)).record->timeUs, 3.0);
  EXPECT_TRUE(db.lookup(h200(), mlstm(64)).record->tunedAt.size());

  FamilyRecord bad = rec(mlstm(64), 0.0);
  EXPECT_THROW(db.record(h200(), bad), Error);
  bad = rec(mlstm(64), 1.0);
  bad.config = json{{"variant", "sideways"}};
  EXPECT_THROW(db.record(h200(), bad), Error);
  bad = rec(attn(1, 1), 1.0);
  bad.problem["heads"] = json::array({3, 2}); // 3 % 2 != 0
  EXPECT_THROW(db.record(h200(), bad), Error);
}

TEST_F(FamilyTuningDBTest, MergeOfTwoRunsIsOrderIndependent) {
  TuningDB a, b;
  a.record(h200(), rec(attn(1, 4096), 5.0, 64));
  a.record(h200(), rec(mlstm(1024), 8.0));
  b.record(h200(), rec(attn(1, 4096), 4.0, 128)); // faster: wins
  b.record(h200(), rec(mlstm(1024), 9.0));        // slower: loses
  b.record(h200(), rec(mlstm(2048), 20.0));
  a.noteMiss(h200(), attn(1, 8192));
  TuningDB ab = a, ba = b;
  ab.merge(b);
  ba.merge(a);
  EXPECT_EQ(ab.toJson(), ba.toJson());
  EXPECT_EQ(ab.size(), 3u);
  EXPECT_EQ(ab.lookup(h200(), attn(1, 4096)).record->timeUs, 4.0);
  EXPECT_EQ(ab.lookup(h200(), mlstm(1024)).record->timeUs, 8.0);
  EXPECT_EQ(ab.familyMisses(h200(), TuneFamily::Attention).size(), 1u);

  // Through files, under the lock.
  std::string path = dir_ + "/merged.json";
  a.save(path);
  b.mergeAndSave(path);
  EXPECT_EQ(TuningDB::load(path).toJson(), ab.toJson());
}

TEST_F(FamilyTuningDBTest, MissesAreNotedOnceAndClearedByARecord) {
  TuningDB db;
  EXPECT_TRUE(db.noteMiss(h200(), attn(1, 100)));
  EXPECT_FALSE(db.noteMiss(h200(), attn(1, 100)));
  EXPECT_TRUE(db.noteMiss(h200(), mlstm(100)));
  EXPECT_EQ(db.familyMisses(h200(), TuneFamily::Attention),
            std::vector<json>{tuningProblemJson(attn(1, 100))});
  EXPECT_EQ(db.familyMisses(h200(), TuneFamily::Mlstm),
            std::vector<json>{tuningProblemJson(mlstm(100))});
  std::string path = dir_ + "/misses.json";
  db.save(path);
  EXPECT_EQ(TuningDB::load(path), db);
  db.record(h200(), rec(mlstm(100), 1.0));
  EXPECT_TRUE(db.familyMisses(h200(), TuneFamily::Mlstm).empty());
  EXPECT_FALSE(db.noteMiss(h200(), mlstm(100))); // has a record
  AttentionProblem bad = attn(1, 1);
  bad.headsQ = 0;
  EXPECT_THROW(db.noteMiss(h200(), bad), Error);
}

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

TEST_F(FamilyTuningDBTest, GemmOnlyFilesKeepTheirShape) {
  TuningDB db;
  db.noteMiss(h200(), GemmProblem{.m = 7, .n = 64, .k = 64});
  json j = db.toJson();
  EXPECT_FALSE(j["devices"][0].contains("family_records"));
  EXPECT_FALSE(j["devices"][0].contains("family_misses"));
  db.record(h200(), rec(attn(1, 64), 1.0));
  j = db.toJson();
  EXPECT_EQ(j["devices"][0]["family_records"].size(), 1u);
  EXPECT_EQ(j["devices"][0]["family_records"][0]["family"], "attention");
  EXPECT_EQ(TuningDB::fromJson(j), db);
}

TEST_F(FamilyTuningDBTest, MalformedFamilyRecordsThrowAndStayUntouched) {
  TuningDB good;
  good.record(h200(), rec(attn(1, 64), 5.0));
  good.record(h200(), rec(mlstm(64), 5.0));
  good.noteMiss(h200(), mlstm(32));
  const std::string valid = good.toJson().dump(2);
  auto edit = [&](const std::string &from, const std::string &to) {
    std::string t = valid;
    size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? t : t.replace(at, from.size(), to);
  };
  struct Case {
    const char *name;
    std::string text, expect;
  };
  const Case cases[] = {
      {"badFamily",
       edit("\"family\": \"attention\",\n", "\"family\": \"conv\",\n"),
       "devices[0].family_records[0].family: \"conv\" is not a tuned family"},
      {"timeZero", edit("\"time_us\": 5.0", "\"time_us\": 0"),
       "devices[0].family_records[0]: 'time_us' = 0 must be > 0"},
      {"problemField", edit("\"causal\": true", "\"causal\": 1"),
       "devices[0].family_records[0]: 'problem'"},
      {"unknownField", edit("\"kernel\"", "\"kernal\""),
       "devices[0].family_records[0]: unknown field 'kernal'"},
      {"missNoFamily",
       edit("\"family\": \"mlstm\",\n          \"final\"", "\"final\""),
       "devices[0].family_misses[0]: must be an attention or mlstm problem"},
      {"recordsObject", edit("\"family_records\": [", "\"family_records\": {"),
       "not valid JSON"},
  };
  for (const Case &c : cases) {
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
      EXPECT_NE(msg.find(c.expect), std::string::npos) << msg;
      EXPECT_NE(msg.find("move it away"), std::string::npos) << msg;
    }
    TuningDB mine;
    mine.record(h200(), rec(mlstm(1), 1.0));
    EXPECT_THROW(mine.mergeAndSave(path), Error);
    EXPECT_EQ(readFile(path), c.text);
    struct stat after;
    ASSERT_EQ(::stat(path.c_str(), &after), 0);
    EXPECT_EQ(after.st_ino, before.st_ino);
    EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  }
  writeFile(dir_ + "/valid.json", valid);
  EXPECT_EQ(TuningDB::load(dir_ + "/valid.json"), good);
}

TEST_F(FamilyTuningDBTest, CsvColumnsPerFamily) {
  TuningDB db;
  db.record(h200(), rec(attn(1, 4096), 12.5));
  db.record(h200(), rec(mlstm(2048, 4), 100.25));
  std::ostringstream a, m;
  db.exportCsv(a, h200(), TuneFamily::Attention);
  db.exportCsv(m, h200(), TuneFamily::Mlstm);
  EXPECT_EQ(a.str(), "batch,heads_q,heads_kv,seqlen_q,seqlen_k,head_dim_qk,"
                     "head_dim_v,kernel,time_us,tflops,gb_s\n"
                     "2,32,8,1,4096,128,128,kgen_attn_4096_b64,12.500,1.00,"
                     "2.00\n");
  EXPECT_EQ(m.str(), "B,NH,S,DQK,DV,kernel,time_us,tflops,gb_s\n"
                     "4,8,2048,256,512,kgen_mlstm_2048,100.250,0.00,0.00\n");
  // The GEMM table is unchanged by them.
  std::ostringstream g;
  db.exportCsv(g, h200());
  EXPECT_EQ(g.str(), "M,N,K,kernel,time_us,tflops,gb_s\n");
}
