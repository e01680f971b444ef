#include "kernels/cpu/isa.hpp"

#include <cstdlib>

#include "common/error.hpp"

namespace kvg {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}

Isa detect_isa() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma"))
    return Isa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    return Isa::Avx2;
#endif
  return Isa::Scalar;
}

Isa parse_isa(std::string_view name) {
  Isa wanted;
  if (name == "auto") return detect_isa();
  if (name == "scalar") wanted = Isa::Scalar;
  else if (name == "avx2") wanted = Isa::Avx2;
  else if (name == "avx512") wanted = Isa::Avx512;
  else throw Error(ErrorCode::InvalidArgument, "unknown ISA '" + std::string(name) + "' (scalar, avx2, avx512, auto)");
  if (int(wanted) > int(detect_isa()))
    throw Error(ErrorCode::Unsupported, std::string("this CPU does not support ISA ") + isa_name(wanted));
  return wanted;
}

Isa default_isa() {
  const char* forced = std::getenv("KVG_ISA");
  return forced && *forced ? parse_isa(forced) : detect_isa();
}

}  // namespace kvg
