//===- CompileTargets.h - The compile tests' targets, threads -*- C++ -*-===//
//
// What the *CompileTest.cpp files share: the targets this machine has a
// compiler for (nvrtc: sm_80 and sm_90a; hiprtc: gfx90a), one thread per
// target running a test's compiles, and the report of what each target
// compiled and what failed.
//
//===----------------------------------------------------------------------===//

#pragma once

#include "kgen/kgen.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace kgen::compiletest {

/// One target's compiles: how many kernels built, and each failure's
/// message (a compile error, or a kernel with an empty binary).
struct TargetCompiles {
  size_t count = 0;
  std::vector<std::string> failures;

  /// Runs `compile` (which returns the kernels it built) and counts its
  /// kernels, or records why it failed.
  template <class Compile> void add(Compile &&compile) {
    try {
      for (const std::shared_ptr<Kernel> &k : compile()) {
        ++count;
        if (k->binary.empty())
          failures.push_back(k->source.name + ": empty binary");
      }
    } catch (const Error &e) {
      failures.push_back(e.what());
    }
  }
};

/// The targets whose compiler loads here; each missing compiler is noted
/// with why it did not load.
inline std::vector<Target> compilerTargets() {
  std::vector<Target> targets;
  for (Vendor v : {Vendor::NVIDIA, Vendor::AMD}) {
    std::string why;
    if (!openCompiler(v, &why)) {
      std::printf("note: %s compiler unavailable: %s\n",
                  v == Vendor::AMD ? "AMD" : "NVIDIA", why.c_str());
      continue;
    }
    if (v == Vendor::NVIDIA) {
      targets.push_back(Target::SM80);
      targets.push_back(Target::SM90A);
    } else {
      targets.push_back(Target::GFX90A);
    }
  }
  return targets;
}

/// Runs `compile(i, result)` for every target ts[i], one thread each: the
/// machine has few cores and each compile is single-threaded inside the
/// compiler.
template <class Compile>
std::vector<TargetCompiles> compileOnEachTarget(const std::vector<Target> &ts,
                                                Compile compile) {
  std::vector<TargetCompiles> results(ts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ts.size(); ++i)
    threads.emplace_back([&, i] { compile(i, results[i]); });
  for (std::thread &th : threads)
    th.join();
  return results;
}

/// compileOnEachTarget for jobs of a problem and a config (`.problem`,
/// `.config`) that `jobsFor(target)` lists, each built with rt.compile.
template <class JobsFor>
std::vector<TargetCompiles>
compileJobsOnEachTarget(Runtime &rt, const std::vector<Target> &ts,
                        JobsFor jobsFor) {
  return compileOnEachTarget(ts, [&](size_t i, TargetCompiles &r) {
    for (const auto &j : jobsFor(ts[i]))
      r.add(
          [&] { return std::vector{rt.compile(j.problem, j.config, ts[i])}; });
  });
}

/// Prints what target `t` compiled ("sm_90a: 57 attention kernels
/// compiled, 0 failed") and fails the test on each failure.
inline void report(Target t, const TargetCompiles &r, const char *what) {
  std::printf("%s: %zu %s compiled, %zu failed\n",
              std::string(toString(t)).c_str(), r.count, what,
              r.failures.size());
  for (const std::string &f : r.failures)
    ADD_FAILURE() << toString(t) << ": " << f;
}

} // namespace kgen::compiletest
