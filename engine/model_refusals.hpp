// What a GGUF may carry that would change the computation but that the
// engine does not implement: refused at load, by name, rather than loaded
// and silently computed with other math. The list is in the README
// ("What a model file may not carry").
#pragma once

#include <string>

namespace kvg::gguf { class File; }

namespace kvg {

// Throws Error(Unsupported) naming the first key or tensor that the engine
// would ignore although it changes the result. `architecture` is the
// general.architecture the engine accepted; `qkv_bias` says whether that
// architecture's blocks carry attn_{q,k,v}.bias.
void refuse_unimplemented(const gguf::File& file, const std::string& architecture, bool qkv_bias, int n_layer);

}  // namespace kvg
