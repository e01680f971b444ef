// What a GGUF may carry that would change the computation but that the
// engine does not implement: refused at load, by name, rather than loaded
// and silently computed with other math. The list is in the README
// ("What a model file may not carry").
#pragma once

#include <string>

namespace kvg::gguf { class File; }

namespace kvg {

struct ArchitectureTraits;

// Throws Error(Unsupported) naming the first key or tensor that the engine
// would ignore although it changes the result. `traits` is the accepted
// general.architecture's row of engine/architectures.hpp: it says which
// optional keys and block tensors that family implements.
void refuse_unimplemented(const gguf::File& file, const ArchitectureTraits& traits, int n_layer);

}  // namespace kvg
