// `kvg --version`: what a bug report needs to say which kvg ran where.
#pragma once

#include <cstdio>

namespace kvg::cli {

const char* version();       // the release, e.g. "1.0.0" (kvg.control's default_version)
const char* build_commit();  // the commit built, "-dirty" when edited; "unknown" without git

// The release, the commit, the recipes computed, the CPU kernels this CPU
// runs (and KVG_ISA's choice, when it forces one), whether CUDA was built.
void print_version(std::FILE* out);

}  // namespace kvg::cli
