//===- Compiler.cpp - nvrtc and hiprtc, opened with dlopen ----------------===//
//
// Neither nvrtc.h nor hiprtc.h is needed to build: the handful of entry
// points kgen calls are declared here with the C ABI both libraries have
// kept stable (results are ints, programs are opaque pointers). That lets
// one build run on a CUDA machine, a ROCm machine, or neither.
//
//===----------------------------------------------------------------------===//

#include "kgen/Runtime/Compiler.h"
#include "Posix.h"
#include "kgen/Codegen/Templates.h"
#include "kgen/Error.h"
#include "kgen/Runtime/Cache.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace kgen;
using namespace kgen::posix;

namespace {

//===----------------------------------------------------------------------===//
// Loading libraries
//===----------------------------------------------------------------------===//

/// dlopens the first candidate that loads and exports `requiredSymbol`.
/// Libraries are never dlclosed: the GPU runtimes register exit handlers
/// and thread-local state that crash when their code is unmapped early.
void *openFirst(const std::vector<std::string> &candidates,
                const char *requiredSymbol, std::string *chosen,
                std::string *tried) {
  for (const std::string &c : candidates) {
    dlerror();
    void *h = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char *e = dlerror();
      *tried += "\n  " + c + ": " + (e ? e : "not found");
      continue;
    }
    if (!::dlsym(h, requiredSymbol)) {
      *tried += "\n  " + c + ": loaded, but has no " + requiredSymbol;
      continue;
    }
    *chosen = c;
    return h;
  }
  return nullptr;
}

/// Resolves `name` in `lib` into the function pointer `fn`; false when absent.
template <typename Fn> bool bind(void *lib, const char *name, Fn &fn) {
  fn = reinterpret_cast<Fn>(::dlsym(lib, name));
  return fn != nullptr;
}

//===----------------------------------------------------------------------===//
// Failure reports
//===----------------------------------------------------------------------===//

/// Saves a source that failed to compile, so the error can point at it:
/// <cache root>/failed/<name>-<target>.hip, else a fresh file in the temp
/// directory. Returns the path, or "" (with the reason in `why`).
std::string saveFailedSource(const KernelSource &src, const std::string &header,
                             std::string *why) {
  std::string text = header + src.source;
  std::string base = src.name.empty() ? "kernel" : src.name;
  // The name comes from kgen's emitter, but it becomes a file name: keep it
  // to characters that cannot leave the directory.
  for (char &c : base)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'))
      c = '_';
  base += "-" + std::string(toString(src.target));

  std::string root = CacheOptions::fromEnv().resolvedDir();
  if (!root.empty()) {
    std::string dir = root + "/failed";
    ::mkdir(root.c_str(), 0700);
    ::mkdir(dir.c_str(), 0700);
    struct stat st;
    if (::lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
        st.st_uid == ::geteuid()) {
      // Written aside and renamed, so two threads failing on one kernel
      // leave one whole file.
      std::string path = dir + "/" + base + ".hip";
      std::string tmpPath = path + ".XXXXXX";
      int fd = ::mkstemp(tmpPath.data());
      if (fd >= 0) {
        bool ok = writeAll(fd, text.data(), text.size());
        ::close(fd);
        if (ok && ::rename(tmpPath.c_str(), path.c_str()) == 0)
          return path;
        ::unlink(tmpPath.c_str());
      }
      *why = "cannot write " + path + ": " + std::strerror(errno);
    }
  }
  // A shared temp directory: a fresh, unpredictable name (mkstemps), never
  // a fixed one another user could have planted a link at.
  const char *tmp = envOrNull("TMPDIR");
  std::string path =
      std::string(tmp ? tmp : "/tmp") + "/kgen-failed-" + base + "-XXXXXX.hip";
  int fd = ::mkstemps(path.data(), 4);
  if (fd < 0) {
    *why += (why->empty() ? "" : "; ") + std::string("cannot create ") + path +
            ": " + std::strerror(errno);
    return "";
  }
  bool ok = writeAll(fd, text.data(), text.size());
  ::close(fd);
  if (!ok) {
    *why += (why->empty() ? "" : "; ") + std::string("cannot write ") + path;
    return "";
  }
  return path;
}

std::string joined(const std::vector<std::string> &v) {
  std::string s;
  for (const std::string &x : v)
    s += (s.empty() ? "" : " ") + x;
  return s;
}

bool contains(const std::string &hay, const char *needle) {
  std::string h = hay;
  for (char &c : h)
    c = char(std::tolower(static_cast<unsigned char>(c)));
  return h.find(needle) != std::string::npos;
}

/// Throws the error of a failed compile: what failed, the log, where the
/// source is, and what to do about it.
[[noreturn]] void throwCompileError(const std::string &compiler,
                                    const std::string &version,
                                    const KernelSource &src,
                                    const std::vector<std::string> &options,
                                    const std::string &result,
                                    const std::string &log) {
  std::string target(toString(src.target));
  std::string header = "// kgen: " + compiler + " " + version +
                       " failed on this file for " + target +
                       "\n// options: " + joined(options) +
                       "\n// included kgen/... headers are kgen's templates; "
                       "`kgen emit --inline` prints them pasted in\n";
  std::string why;
  std::string saved = saveFailedSource(src, header, &why);

  std::string hint;
  if (contains(log, "unsupported gpu architecture") ||
      contains(log, "invalid value for --gpu-architecture") ||
      contains(log, "unknown target") || contains(log, "offload-arch"))
    hint = "this " + compiler + " (" + version + ") does not support " +
           target + ": install a newer " +
           (compiler == "nvrtc" ? "CUDA toolkit (sm_90a needs CUDA 12.0+) or "
                                  "set KGEN_NVRTC to a newer libnvrtc.so"
                                : "ROCm (gfx942 needs ROCm 5.7+) or set "
                                  "KGEN_HIPRTC to a newer libhiprtc.so");
  else
    hint = "the generated source is invalid for this problem and config, "
           "which is a kgen bug: try another config (`kgen compile "
           "--candidates` builds them all) and report it with the saved "
           "source and this log";

  std::string msg = compiler + " " + version + " failed to compile kernel '" +
                    src.name + "' for " + target + " (" + result +
                    ")\noptions: " + joined(options) + "\ncompiler log:\n" +
                    (log.empty() ? std::string("  (empty)") : log);
  if (!msg.empty() && msg.back() != '\n')
    msg += '\n';
  msg += saved.empty() ? "source: could not be saved (" + why + ")\n"
                       : "source saved to: " + saved + "\n";
  msg += "fix: " + hint;
  throw Error(msg);
}

/// The embedded templates as NUL-terminated strings, built once: nvrtc and
/// hiprtc take C strings.
struct HeaderSet {
  std::vector<std::string> names, texts;
  std::vector<const char *> namePtrs, textPtrs;

  explicit HeaderSet(bool nvidia) {
    for (const TemplateHeader &h : templateHeaders()) {
      names.emplace_back(h.includeName);
      texts.emplace_back(h.text);
    }
    // nvrtc has no HIP: the prelude that maps HIP's kernel language onto
    // CUDA's answers `#include <hip/hip_runtime.h>`.
    std::string_view shim = templateText("kgen/common/hip_runtime_nvidia.h");
    if (nvidia && !shim.empty()) {
      names.emplace_back("hip/hip_runtime.h");
      texts.emplace_back(shim);
    }
    for (size_t i = 0; i < names.size(); ++i) {
      namePtrs.push_back(names[i].c_str());
      textPtrs.push_back(texts[i].c_str());
    }
  }
};

void checkVendor(const std::string &compiler, Vendor want,
                 const KernelSource &src) {
  if (targetInfo(src.target).vendor != want)
    throw Error(
        compiler + " cannot compile kernel '" + src.name + "' for " +
        std::string(toString(src.target)) + ": it compiles " +
        (want == Vendor::NVIDIA ? "sm_80 and sm_90a" : "gfx90a and gfx942") +
        " only; open the compiler of the target's vendor");
}

//===----------------------------------------------------------------------===//
// nvrtc and hiprtc: one C API shape, one compiler class
//===----------------------------------------------------------------------===//

/// The run-time compilers' C API. hiprtc mirrors nvrtc call for call; only
/// the prefix and the name of the binary getters differ.
struct RtcApi {
  using Program = void *;
  const char *prefix; ///< "nvrtc" or "hiprtc"
  const char *binary; ///< "CUBIN" or "Code"
  const char *(*getErrorString)(int);
  int (*createProgram)(Program *, const char *, const char *, int,
                       const char *const *, const char *const *);
  int (*destroyProgram)(Program *);
  int (*compileProgram)(Program, int, const char *const *);
  int (*getProgramLogSize)(Program, size_t *);
  int (*getProgramLog)(Program, char *);
  int (*getBinarySize)(Program, size_t *);
  int (*getBinary)(Program, char *);

  /// Binds every entry point of `lib`; returns the first missing name, or
  /// an empty string.
  std::string bindAll(void *lib) {
    std::string missing, b = binary;
    auto need = [&](const std::string &suffix, auto &fn) {
      std::string name = prefix + suffix;
      if (missing.empty() && !bind(lib, name.c_str(), fn))
        missing = name;
    };
    need("GetErrorString", getErrorString);
    need("CreateProgram", createProgram);
    need("DestroyProgram", destroyProgram);
    need("CompileProgram", compileProgram);
    need("GetProgramLogSize", getProgramLogSize);
    need("GetProgramLog", getProgramLog);
    need("Get" + b + "Size", getBinarySize);
    need("Get" + b, getBinary);
    return missing;
  }
};

/// hiprtc of ROCm 5.x drives comgr and LLVM through process-wide state that
/// was not safe to enter from several threads at once; its compiles are
/// serialized. nvrtc compiles run in parallel.
std::mutex &hiprtcMutex() {
  static std::mutex m;
  return m;
}

class RtcCompiler : public Compiler {
public:
  RtcCompiler(Vendor vendor, const RtcApi &api, std::string version)
      : vendor_(vendor), api_(api), version_(std::move(version)),
        headers_(vendor == Vendor::NVIDIA) {}

  Vendor vendor() const override { return vendor_; }
  std::string name() const override { return api_.prefix; }
  std::string version() const override { return version_; }

  std::vector<std::string> options(Target t) const override {
    return compilerOptions(vendor_, t);
  }

  std::string library() const override {
    // The file the loader mapped for the library's entry point.
    Dl_info info{};
    if (::dladdr(reinterpret_cast<void *>(api_.createProgram), &info) &&
        info.dli_fname)
      return info.dli_fname;
    return "";
  }

  using Compiler::compile;
  std::string compile(const KernelSource &src,
                      const std::vector<std::string> &extra,
                      std::string *compilerLog) override {
    const std::string name = api_.prefix;
    checkVendor(name.c_str(), vendor_, src);
    if (vendor_ == Vendor::AMD)
      refuseCrashingTargets(src);
    std::vector<std::string> opts = options(src.target);
    opts.insert(opts.end(), extra.begin(), extra.end());
    std::vector<const char *> optPtrs;
    for (const std::string &o : opts)
      optPtrs.push_back(o.c_str());

    std::unique_lock<std::mutex> serial(hiprtcMutex(), std::defer_lock);
    if (vendor_ == Vendor::AMD)
      serial.lock();
    RtcApi::Program prog = nullptr;
    std::string file = src.name + ".hip";
    int rc = api_.createProgram(
        &prog, src.source.c_str(), file.c_str(), int(headers_.textPtrs.size()),
        headers_.textPtrs.data(), headers_.namePtrs.data());
    if (rc != 0)
      throw Error(name + "CreateProgram failed for kernel '" + src.name +
                  "': " + api_.getErrorString(rc));
    struct Destroy {
      const RtcApi &api;
      RtcApi::Program &p;
      ~Destroy() { api.destroyProgram(&p); }
    } destroy{api_, prog};

    rc = api_.compileProgram(prog, int(optPtrs.size()), optPtrs.data());
    if (rc != 0)
      throwCompileError(name, version_, src, opts, api_.getErrorString(rc),
                        log(prog));
    size_t size = 0;
    if ((rc = api_.getBinarySize(prog, &size)) != 0 || size == 0)
      throw Error(name + "Get" + api_.binary + "Size failed for kernel '" +
                  src.name + "': " + api_.getErrorString(rc));
    std::string binary(size, '\0');
    if ((rc = api_.getBinary(prog, binary.data())) != 0)
      throw Error(name + "Get" + api_.binary + " failed for kernel '" +
                  src.name + "': " + api_.getErrorString(rc));
    if (compilerLog)
      *compilerLog = log(prog);
    return binary;
  }

private:
  /// ROCm 5.2's hiprtc (Debian 12's) aborts the whole process inside
  /// hiprtcCompileProgram for gfx940/gfx942 instead of returning an error.
  void refuseCrashingTargets(const KernelSource &src) const {
    int major = 0, minor = 0;
    std::sscanf(version_.c_str(), "%d.%d", &major, &minor);
    if (src.target == Target::GFX942 &&
        (major < 5 || (major == 5 && minor < 5)))
      throw Error("hiprtc " + version_ + " cannot compile kernel '" + src.name +
                  "' for gfx942 (ROCm before 5.5 crashes on it); install "
                  "ROCm 5.7+ or set KGEN_HIPRTC to a newer libhiprtc.so");
  }

  std::string log(RtcApi::Program prog) {
    size_t n = 0;
    if (api_.getProgramLogSize(prog, &n) != 0 || n == 0)
      return "";
    std::string s(n, '\0');
    if (api_.getProgramLog(prog, s.data()) != 0)
      return "";
    while (!s.empty() && s.back() == '\0')
      s.pop_back();
    return s;
  }

  Vendor vendor_;
  RtcApi api_;
  std::string version_;
  HeaderSet headers_;
};

std::unique_ptr<Compiler> openNvrtc(std::string *whyNot) {
  std::vector<std::string> candidates;
  if (const char *over = envOrNull("KGEN_NVRTC")) {
    candidates.push_back(over);
  } else {
    const char *names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
    for (const char *n : names)
      candidates.push_back(n);
    std::vector<std::string> dirs;
    if (const char *home = envOrNull("CUDA_HOME"))
      dirs.push_back(std::string(home) + "/lib64");
    dirs.push_back("/usr/local/cuda/lib64");
    for (const std::string &d : dirs)
      for (const char *n : names)
        candidates.push_back(d + "/" + n);
  }
  std::string chosen, tried;
  void *lib = openFirst(candidates, "nvrtcCreateProgram", &chosen, &tried);
  if (!lib) {
    if (whyNot)
      *whyNot = "nvrtc not found (install the CUDA toolkit's nvrtc, or set "
                "KGEN_NVRTC or CUDA_HOME); tried:" +
                tried;
    return nullptr;
  }
  RtcApi api{"nvrtc", "CUBIN"};
  int (*version)(int *, int *) = nullptr;
  std::string missing = api.bindAll(lib);
  if (missing.empty() && !bind(lib, "nvrtcVersion", version))
    missing = "nvrtcVersion";
  if (!missing.empty()) {
    if (whyNot) // nvrtcGetCUBIN arrived in CUDA 11.1
      *whyNot = chosen + " has no " + missing + " (kgen needs CUDA 11.1+)";
    return nullptr;
  }
  int major = 0, minor = 0;
  if (version(&major, &minor) != 0) {
    if (whyNot)
      *whyNot = "nvrtcVersion failed in " + chosen;
    return nullptr;
  }
  return std::make_unique<RtcCompiler>(
      Vendor::NVIDIA, api, std::to_string(major) + "." + std::to_string(minor));
}

/// The version part of the cache key: HIP's full version (with the build
/// number) when the library reports it, else hiprtc's major.minor.
std::string hiprtcVersionOf(void *lib) {
  int (*hipVersion)(int *) = nullptr;
  int v = 0;
  if (bind(lib, "hipRuntimeGetVersion", hipVersion) && hipVersion(&v) == 0 &&
      v > 0)
    // HIP_VERSION = major * 10000000 + minor * 100000 + patch.
    return std::to_string(v / 10000000) + "." +
           std::to_string(v / 100000 % 100) + "." + std::to_string(v % 100000);
  int (*rtcVersion)(int *, int *) = nullptr;
  int major = 0, minor = 0;
  if (bind(lib, "hiprtcVersion", rtcVersion) && rtcVersion(&major, &minor) == 0)
    return std::to_string(major) + "." + std::to_string(minor);
  return "unknown";
}

std::unique_ptr<Compiler> openHiprtc(std::string *whyNot) {
  std::vector<std::string> candidates;
  if (const char *over = envOrNull("KGEN_HIPRTC")) {
    candidates.push_back(over);
  } else {
    // ROCm 6 ships hiprtc as its own library; ROCm 5.x (and Debian's 5.2
    // packages) have it inside libamdhip64.
    const char *names[] = {"libhiprtc.so",     "libhiprtc.so.6",
                           "libhiprtc.so.5",   "libamdhip64.so",
                           "libamdhip64.so.6", "libamdhip64.so.5"};
    std::vector<std::string> dirs = {""};
    if (const char *rocm = envOrNull("ROCM_PATH"))
      dirs.push_back(std::string(rocm) + "/lib/");
    dirs.push_back("/opt/rocm/lib/");
    for (const std::string &d : dirs)
      for (const char *n : names)
        candidates.push_back(d + n);
  }
  std::string chosen, tried;
  void *lib = openFirst(candidates, "hiprtcCreateProgram", &chosen, &tried);
  if (!lib) {
    if (whyNot)
      *whyNot = "hiprtc not found (install ROCm's hiprtc, e.g. Debian's "
                "libamdhip64-dev, or set KGEN_HIPRTC or ROCM_PATH); tried:" +
                tried;
    return nullptr;
  }
  RtcApi api{"hiprtc", "Code"};
  std::string missing = api.bindAll(lib);
  if (!missing.empty()) {
    if (whyNot)
      *whyNot = chosen + " has no " + missing;
    return nullptr;
  }
  return std::make_unique<RtcCompiler>(Vendor::AMD, api, hiprtcVersionOf(lib));
}

/// The variables that decide which compiler library is loaded.
std::string libraryEnvironment(Vendor v) {
  std::string out;
  const char *names[] = {v == Vendor::NVIDIA ? "KGEN_NVRTC" : "KGEN_HIPRTC",
                         v == Vendor::NVIDIA ? "CUDA_HOME" : "ROCM_PATH",
                         "LD_LIBRARY_PATH"};
  for (const char *n : names) {
    const char *val = std::getenv(n);
    out += std::string(n) + "=" + (val ? val : "") + ";";
  }
  return out;
}

/// What identifies a library file: its target and stat fields.
std::optional<nlohmann::json> fileIdentity(const std::string &path) {
  char real[PATH_MAX];
  struct stat st;
  if (path.empty() || !::realpath(path.c_str(), real) || ::stat(real, &st) != 0)
    return std::nullopt;
  return nlohmann::json{{"path", path},
                        {"real", real},
                        {"size", int64_t(st.st_size)},
                        {"mtime_ns", int64_t(st.st_mtim.tv_sec) * 1000000000 +
                                         st.st_mtim.tv_nsec},
                        {"inode", uint64_t(st.st_ino)}};
}

const char *vendorKey(Vendor v) {
  return v == Vendor::NVIDIA ? "nvidia" : "amd";
}

} // namespace

std::vector<std::string> kgen::compilerOptions(Vendor v, Target t) {
  // No fast-math on either: kernels keep IEEE division and sqrt. -lineinfo
  // costs nothing at run time and makes profiler and sanitizer reports
  // point at source lines.
  if (v == Vendor::NVIDIA)
    return {"--gpu-architecture=" + std::string(toString(t)), "-std=c++17",
            "-default-device", "-lineinfo"};
  return {"--offload-arch=" + std::string(toString(t)), "-O3", "-std=c++17"};
}

std::optional<CompilerIdentity>
kgen::recallCompilerIdentity(const std::string &memoPath, Vendor v) {
  try {
    std::ifstream in(memoPath);
    if (!in)
      return std::nullopt;
    nlohmann::json memo = nlohmann::json::parse(in);
    const nlohmann::json &e = memo.at(vendorKey(v));
    if (e.at("env").get<std::string>() != libraryEnvironment(v) ||
        e.at("kgen").get<std::string>() != kVersion)
      return std::nullopt;
    std::optional<nlohmann::json> now =
        fileIdentity(e.at("file").at("path").get<std::string>());
    if (!now || *now != e.at("file"))
      return std::nullopt;
    return CompilerIdentity{e.at("name").get<std::string>(),
                            e.at("version").get<std::string>()};
  } catch (const std::exception &) {
    return std::nullopt; // absent, malformed or partial: open the compiler
  }
}

void kgen::rememberCompilerIdentity(const std::string &memoPath,
                                    const Compiler &c) {
  std::optional<nlohmann::json> file = fileIdentity(c.library());
  if (!file)
    return;
  nlohmann::json memo = nlohmann::json::object();
  try {
    std::ifstream in(memoPath);
    if (in)
      memo = nlohmann::json::parse(in);
    if (!memo.is_object())
      memo = nlohmann::json::object();
  } catch (const std::exception &) {
    memo = nlohmann::json::object();
  }
  memo[vendorKey(c.vendor())] = {{"name", c.name()},
                                 {"version", c.version()},
                                 {"file", *file},
                                 {"env", libraryEnvironment(c.vendor())},
                                 {"kgen", std::string(kVersion)}};
  // Temp file and rename: readers see the old memo or the new one.
  std::string tmp = memoPath + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out)
      return;
    out << memo.dump(1) << "\n";
    if (!out.good()) {
      ::unlink(tmp.c_str());
      return;
    }
  }
  if (::rename(tmp.c_str(), memoPath.c_str()) != 0)
    ::unlink(tmp.c_str());
}

std::unique_ptr<Compiler> kgen::openCompiler(Vendor v, std::string *whyNot) {
  return v == Vendor::NVIDIA ? openNvrtc(whyNot) : openHiprtc(whyNot);
}
