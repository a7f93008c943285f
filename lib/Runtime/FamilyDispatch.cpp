//===- FamilyDispatch.cpp - Tuned configs for attention and mLSTM ---------===//
//
// What Runtime::select and ::chooseConfig do for GEMM, for the other two
// families: a bundle's config for the call's problem (exact, then the
// sequence-length bucket), else the tuning DB's record (likewise), else by
// policy the heuristic with the miss noted (offline), the heuristic alone
// (off), or a tune now whose winner is saved (online). Runs
// once per resolved problem: the callers remember the choice, so the hot
// path never gets here.
//
//===----------------------------------------------------------------------===//

#include "kgen/Codegen/AttentionJson.h"
#include "kgen/Runtime/Tuner.h"
#include "kgen/kgen.h"

#include <bit>
#include <cstdio>

namespace kgen {

namespace {

/// The family-specific steps of one choice.
struct FamilySteps {
  const char *what; ///< "attention" / "mlstm", for messages
  std::function<TuningDB::FamilyMatch(const TuningDB &, const DeviceKey &)>
      lookup;
  std::function<bool(TuningDB &, const DeviceKey &)> noteMiss;
  /// The record's config when it fits this call's problem.
  std::function<bool(const nlohmann::json &)> fits;
  std::function<TuneResult()> tune;
};

} // namespace

/// The record's config, or none: the caller takes the heuristic.
static std::optional<nlohmann::json>
tunedConfig(Runtime &rt, std::mutex &mu, std::optional<TuningDB> &db,
            const DeviceKey &key, const std::string &path, TunePolicy policy,
            void *stream, const FamilySteps &f) {
  {
    std::lock_guard<std::mutex> lock(mu);
    TuningDB::FamilyMatch m = f.lookup(*db, key);
    if (m.record && f.fits(m.record->config))
      return m.record->config;
    if (policy != TunePolicy::Online) {
      if (policy == TunePolicy::Offline && f.noteMiss(*db, key) &&
          !path.empty()) {
        // Persisted for `kgen tune --misses`; merged under the file's lock,
        // as GEMM's misses are.
        try {
          TuningDB miss;
          f.noteMiss(miss, key);
          miss.mergeAndSave(path);
        } catch (const Error &e) {
          std::fprintf(stderr, "kgen: tuning DB miss not saved: %s\n",
                       e.what());
        }
      }
      return std::nullopt;
    }
  }
  if (stream && rt.backend()->isCapturing(stream))
    throw Error(std::string(f.what) +
                ": KGEN_TUNE=online would tune this problem now, and the "
                "stream is being captured into a graph; run the call once "
                "before capture");
  // Online: measure now (the tuner builds through the runtime, so the lock
  // is not held), keep and persist the winner.
  TuneResult result = f.tune();
  if (!result.familyRecord)
    throw Error(std::string("tuning the ") + f.what + " problem " +
                result.familyProblem.dump() +
                ": no candidate passed the numeric check; see kgen tune");
  std::lock_guard<std::mutex> lock(mu);
  db->record(key, *result.familyRecord);
  if (!path.empty()) {
    try {
      TuningDB one;
      one.record(key, *result.familyRecord);
      one.mergeAndSave(path);
    } catch (const Error &e) {
      std::fprintf(stderr, "kgen: tuning result not saved: %s\n", e.what());
    }
  }
  return result.familyRecord->config;
}

namespace {

int64_t pow2Up(int64_t v) {
  return v <= 1 ? v : int64_t(std::bit_ceil(uint64_t(v)));
}

/// The problem a miss is noted as: sequence lengths rounded up to a power of
/// two, the coarsest bucket a lookup tries. A decode loop meets a new seqlen_k
/// every step; noting each would write the DB file every step, while the
/// bucket's record, once tuned, serves all of them.
AttentionProblem missProblem(AttentionProblem p) {
  p.seqlenQ = pow2Up(p.seqlenQ);
  p.seqlenK = pow2Up(p.seqlenK);
  return p;
}
MlstmProblem missProblem(MlstmProblem p) {
  p.s = pow2Up(p.s);
  return p;
}

/// The config a bundle (KGEN_BUNDLE) was built with for `p` or the nearest
/// bucket of it: a host program with a bundle runs what was bundled, with
/// no DB and no compiler.
template <class P, class Buckets, class Parse>
std::optional<nlohmann::json> bundledConfig(const BundleSet &bundles, Target t,
                                            const P &p, Buckets buckets,
                                            Parse parse) {
  if (bundles.empty())
    return std::nullopt;
  std::vector<P> tries{p};
  for (const P &b : buckets(p))
    tries.push_back(b);
  for (const P &q : tries)
    if (const BundleEntry *e = bundles.findFamily(t, tuningProblemJson(q)))
      if (!checkConfig(p, parse(e->familyConfig), t))
        return e->familyConfig;
  return std::nullopt;
}

} // namespace

AttentionConfig Runtime::chooseAttentionConfig(const AttentionProblem &p,
                                               void *stream) {
  if (auto c = bundledConfig(bundles_, target_, p, attentionBuckets,
                             attentionConfigFromJson))
    return attentionConfigFromJson(*c);
  if (!backend_) // no GPU, no measurements: the heuristic
    return defaultConfig(p, target_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    openTuningDb();
  }
  FamilySteps f;
  f.what = "attention";
  f.lookup = [&](const TuningDB &db, const DeviceKey &k) {
    return db.lookup(k, p);
  };
  f.noteMiss = [&](TuningDB &db, const DeviceKey &k) {
    return db.noteMiss(k, missProblem(p));
  };
  f.fits = [&](const nlohmann::json &c) {
    return !checkConfig(p, attentionConfigFromJson(c), target_);
  };
  f.tune = [&] { return Tuner(*this).tune(p); };
  if (auto c = tunedConfig(*this, mu_, tuning_, tuningKey_, tuningPath_,
                           opts_.tune, stream, f))
    return attentionConfigFromJson(*c);
  return defaultConfig(p, target_);
}

MlstmConfig Runtime::chooseMlstmConfig(const MlstmProblem &p, void *stream) {
  if (auto c = bundledConfig(bundles_, target_, p, mlstmBuckets,
                             mlstmConfigFromJson))
    return mlstmConfigFromJson(*c);
  if (!backend_)
    return defaultConfig(p, target_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    openTuningDb();
  }
  FamilySteps f;
  f.what = "mlstm";
  f.lookup = [&](const TuningDB &db, const DeviceKey &k) {
    return db.lookup(k, p);
  };
  f.noteMiss = [&](TuningDB &db, const DeviceKey &k) {
    return db.noteMiss(k, missProblem(p));
  };
  f.fits = [&](const nlohmann::json &c) {
    return !checkConfig(p, mlstmConfigFromJson(c), target_);
  };
  f.tune = [&] { return Tuner(*this).tune(p); };
  if (auto c = tunedConfig(*this, mu_, tuning_, tuningKey_, tuningPath_,
                           opts_.tune, stream, f))
    return mlstmConfigFromJson(*c);
  return defaultConfig(p, target_);
}

} // namespace kgen
