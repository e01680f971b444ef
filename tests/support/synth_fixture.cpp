#include "tests/support/synth_fixture.hpp"

#include "tests/support/data_paths.hpp"

namespace kvg::test {

SynthOptions tiny_synth_options() {
  SynthOptions o;
  o.n_embd = 32;
  o.n_layer = 1;
  o.n_head = 2;
  o.n_head_kv = 2;
  o.n_ff = 64;
  o.n_vocab = 300;
  o.n_ctx = 64;
  return o;
}

SynthOptions small_synth_options() {
  SynthOptions o;
  o.n_embd = 64;
  o.n_layer = 2;
  o.n_head = 4;
  o.n_head_kv = 2;
  o.n_ff = 96;
  o.n_vocab = 300;
  o.n_ctx = 128;
  return o;
}

std::shared_ptr<const Model> load_synth(const SynthOptions& options, const std::string& name) {
  const std::string path = temp_dir(name) + "/model.gguf";
  write_synth_model(options, path);
  return Model::load(path);
}

}  // namespace kvg::test
