//===- Error.h - The exception type of the runtime and CLI ------*- C++ -*-===//

#ifndef KGEN_ERROR_H
#define KGEN_ERROR_H

#include <stdexcept>
#include <string>

namespace kgen {

/// Every error kgen's runtime, API and CLI report: a message that names the
/// problem, the limit and the fix. Codegen functions used by the MLIR layer
/// never throw; they return messages instead.
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

} // namespace kgen

#endif
