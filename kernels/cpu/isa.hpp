// Which instruction set the CPU kernels use. Every choice computes the same
// bits (the recipe fixes the reduction order); only the speed differs.
#pragma once

#include <string>
#include <string_view>

namespace kvg {

enum class Isa { Scalar, Avx2, Avx512 };

const char* isa_name(Isa isa);
// The best ISA this CPU supports.
Isa detect_isa();
// Parses "scalar" | "avx2" | "avx512" | "auto"; throws kvg::Error for others or
// for an ISA the CPU lacks.
Isa parse_isa(std::string_view name);
// detect_isa(), unless the environment variable KVG_ISA forces one.
Isa default_isa();

}  // namespace kvg
