// A loaded model: configuration, weight views into the memory-mapped GGUF
// file (shared page cache across processes), tokenizer and fingerprint.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "engine/layer_plan.hpp"
#include "engine/model_config.hpp"
#include "engine/tokenizer.hpp"
#include "kernels/cpu/weights.hpp"

namespace kvg::gguf { class File; }

namespace kvg {

// kvg's own GGUF metadata key: the knowledge template the model reads
// (Model::knowledge_template; `kvg template` sets it on a copy of a model).
inline constexpr std::string_view kKnowledgeTemplateKey = "kvg.knowledge_template";

struct LayerWeights {
  std::vector<float> attn_norm;  // n_embd
  std::vector<float> attn_norm_b, ffn_norm_b;  // LayerNorm biases; empty unless config().layer_norm
  std::vector<float> bo, b_up, b_down;         // output/FFN biases; empty unless config().layer_norm
  WeightMatrix wq, wk, wv, wo;
  std::vector<float> bq, bk, bv;  // empty unless config().qkv_bias
  std::vector<float> q_norm, k_norm;  // head_dim each; empty unless config().qk_norm
  std::vector<float> attn_post_norm;  // n_embd; empty unless config().post_norms
  std::vector<float> ffn_norm;   // n_embd
  WeightMatrix w_gate, w_up, w_down;
  std::vector<float> ffn_post_norm;   // n_embd; empty unless config().post_norms
};

class Model {
 public:
  // Loads and validates a GGUF model. Throws kvg::Error naming what is wrong.
  // `known_fingerprint`: the SHA-256 of this very file, computed by an
  // earlier load (the extension remembers it per file identity:
  // extension/src/model/model_fingerprints.hpp); the bytes are then not read
  // again to compute it.
  static std::shared_ptr<const Model> load(const std::string& path,
                                           const std::optional<std::array<uint8_t, 32>>& known_fingerprint = {});
  // What a process that never computes needs of a model (a backend whose
  // calls run in the engine worker): the same load and every check, then the
  // weights let go and the file unmapped. Its configuration, tokenizer,
  // fingerprint and counts stay; a Session refuses it (has_weights()).
  static std::shared_ptr<const Model> load_without_weights(
      const std::string& path, const std::optional<std::array<uint8_t, 32>>& known_fingerprint = {});
  bool has_weights() const { return file_ != nullptr; }

  const ModelConfig& config() const { return config_; }
  // What every layer computes, for the executors (engine/layer_plan.hpp).
  const ForwardPlan& plan() const { return plan_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const std::string& path() const { return path_; }
  // SHA-256 of the GGUF file's bytes: it binds weights, hyper-parameters and
  // tokenizer, and anyone can recompute it with `sha256sum`.
  const std::array<uint8_t, 32>& fingerprint() const { return fingerprint_; }
  std::string fingerprint_hex() const;
  // The knowledge template the model was trained to read (GGUF key
  // kvg.knowledge_template, e.g. "{solution}\n{question}"), checked at load
  // to parse as one (KnowledgeTemplate::parse); nullopt when the file has
  // none. It does not change the math: knowledge_template_for uses it in
  // place of the default layout (engine/knowledge_prompt.hpp).
  const std::optional<std::string>& knowledge_template() const { return knowledge_template_; }
  uint64_t parameter_count() const { return parameter_count_; }
  uint64_t weight_bytes() const { return weight_bytes_; }

  const WeightMatrix& token_embedding() const { return token_embd_; }
  const std::vector<float>& output_norm() const { return output_norm_; }
  const std::vector<float>& output_norm_bias() const { return output_norm_b_; }  // empty unless layer_norm
  const WeightMatrix& output() const { return output_; }
  const std::vector<LayerWeights>& layers() const { return layers_; }
  // Throws an Io error naming the file if it was truncated under the
  // mapping since load (engine/gguf/mapping_guard.hpp): the weights read since
  // are partly zeros. The forward pass checks after each layer and at its end.
  // A model without weights maps nothing and is always intact.
  void check_weights_intact() const;
  bool weights_intact() const;

  // State another part of the engine keeps for as long as this model lives:
  // the CUDA forward pass keeps its device copy of the weights here
  // (engine/cuda_forward.cpp), so a backend uploads them once per loaded model
  // however many sessions it builds, and frees them when the Model goes (a new
  // kvg.model, or the file changed). The first call runs `make`; later calls
  // return what it made. A failed `make` leaves the slot empty.
  std::shared_ptr<void> resident_state(const std::function<std::shared_ptr<void>()>& make) const;

 private:
  Model() = default;
  static std::shared_ptr<Model> read(const std::string& path,
                                     const std::optional<std::array<uint8_t, 32>>& known_fingerprint);
  std::shared_ptr<const gguf::File> file_;  // null once the weights are let go
  std::string path_;
  ModelConfig config_;
  ForwardPlan plan_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::array<uint8_t, 32> fingerprint_{};
  std::optional<std::string> knowledge_template_;
  uint64_t parameter_count_ = 0;
  uint64_t weight_bytes_ = 0;
  WeightMatrix token_embd_;
  std::vector<float> output_norm_, output_norm_b_;
  WeightMatrix output_;
  std::vector<LayerWeights> layers_;
  mutable std::mutex resident_mutex_;
  mutable std::shared_ptr<void> resident_;
};

}  // namespace kvg
