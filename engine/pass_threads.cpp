#include "engine/pass_threads.hpp"

#include "engine/session.hpp"

namespace kvg {

uint64_t pass_macs(const Model& model, std::span<const ForwardRequest> parts) {
  const ModelConfig& c = model.config();
  const uint64_t per_position = 2 * uint64_t(c.n_layer) * uint64_t(c.n_head) * uint64_t(c.head_dim);
  uint64_t macs = 0;
  for (const ForwardRequest& part : parts) {
    const uint64_t p0 = uint64_t(part.session->n_past()), rows = part.tokens.size();
    // Row j attends over positions 0..p0 + j: (p0 + 1) + ... + (p0 + rows).
    const uint64_t attended = rows * p0 + rows * (rows + 1) / 2;
    macs += rows * model.parameter_count() + attended * per_position;
  }
  return macs;
}

bool pass_pays_for_threads(uint64_t weight_bytes, uint64_t macs) {
  return weight_bytes >= kThreadedPassWeightBytes || macs >= kThreadedPassMacs;
}

}  // namespace kvg
