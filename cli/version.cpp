#include "cli/version.hpp"

#include "build_commit.hpp"  // generated: cli/build_commit.cmake
#include "engine/device.hpp"
#include "engine/recipe.hpp"
#include "kernels/cpu/isa.hpp"

namespace kvg::cli {

const char* version() { return KVG_VERSION; }
const char* build_commit() { return KVG_BUILD_COMMIT; }

void print_version(std::FILE* out) {
  std::fprintf(out, "kvg %s\n", version());
  std::fprintf(out, "commit   %s\n", build_commit());
  std::fprintf(out, "recipes  %s\n", known_recipe_names().c_str());
  const Isa best = detect_isa(), chosen = default_isa();
  if (chosen == best) std::fprintf(out, "isa      %s (the best this CPU runs)\n", isa_name(best));
  else std::fprintf(out, "isa      %s (KVG_ISA; this CPU runs up to %s)\n", isa_name(chosen), isa_name(best));
  std::fprintf(out, "cuda     %s\n", device_compiled(Device::Cuda) ? "built (--device cuda)" : "not built");
}

}  // namespace kvg::cli
