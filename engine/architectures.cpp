#include "engine/architectures.hpp"

#include "common/error.hpp"

namespace kvg {

const ArchitectureTraits& architecture_traits(const std::string& architecture) {
  for (const auto& t : kArchitectures)
    if (architecture == t.name) return t;
  std::string known;
  for (const auto& t : kArchitectures) known += std::string(known.empty() ? "" : ", ") + t.name;
  throw Error(ErrorCode::Unsupported, "model: architecture '" + architecture + "' is not supported (supported: " +
                                          known + ")");
}

}  // namespace kvg
