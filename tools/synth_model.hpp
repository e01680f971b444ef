// Synthetic llama-architecture GGUF models with seeded random weights: any
// shape, any size, no download. They exercise the loader, the forward pass
// and exactness at realistic sizes; their output is noise, not language.
//
// Every weight is a pure function of (seed, tensor index, element index), so
// another implementation can recompute any element without the file:
//   key   = mix64(seed + G * (tensor_index + 1))
//   r     = mix64(key + G * (element + 1))          G = 0x9e3779b97f4a7c15
//   u     = (2 * (r >> 40) - 2^24) * 2^-24           in [-1, 1), exact in f32
//   norm weights:   1 + u * 2^-4        (rounded once to f32)
//   matrix weights: u * (1 / sqrt(ne[0])) (f32 sqrt and division, rounded once)
//   rope_freqs.weight (llama with llama3_rope): not random, Llama 3.1's
//     frequency factors for factor 8, low/high frequency factors 1 and 4 and
//     an original context of 8192 (synth_weight computes them)
// mix64 is the splitmix64 finaliser; element indexes run in GGUF order (ne[0]
// fastest); tensor indexes follow synth_tensors().
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/gguf/gguf_file.hpp"
#include "engine/progress.hpp"
#include "tools/gguf_writer.hpp"

namespace kvg {

struct SynthOptions {
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int n_ff = 0;
  int n_vocab = 0;  // at least 259: <unk>, <s>, </s> and the 256 byte tokens
  int n_ctx = 2048;
  std::string type = "f32";  // f32, f16, q8_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, or the
                             // q4_k_m mix (Q4_K, Q6_K where llama-quantize puts it); norms are always f32
  uint64_t seed = 0;
  float rope_base = 10000;
  // llama | qwen2 (q/k/v biases) | qwen3 (q/k norms) | phi3 (fused qkv and
  // gate/up, sliding window) | gemma (GELU, scaled embeddings, tied head) |
  // gemma2 (post-norms, soft-capping, alternate sliding layers) | gemma3
  // (q/k norms, post-norms, 5 sliding layers of 6 with their own rope base) |
  // starcoder2 (LayerNorm, biases everywhere, ungated GELU FFN)
  std::string architecture = "llama";
  bool llama3_rope = false;    // llama: a rope_freqs.weight tensor (Llama 3.1+ rope scaling)
  float rope_scale = 0;        // > 1: rope.scaling.type = linear with this factor
  int sliding_window = 0;      // phi3/gemma2/gemma3; 0: 40 positions (a synthetic model's context is short)
  float attn_softcap = 0;      // gemma2; 0: 50 (the real models' value)
  float final_softcap = 0;     // gemma2; 0: 30
  // "chatml": an instruct-style vocabulary: the last two ids become the
  // control tokens <|im_start|> and <|im_end|> (the end-of-turn token), and
  // tokenizer.chat_template is a ChatML template (docs/chat.md). "": none.
  std::string chat_template;
};

// The ChatML template `chat_template = "chatml"` writes.
extern const char* const kSynthChatmlTemplate;

// Writes the model to `path`, streaming tensor by tensor (memory use does not
// grow with the model); `report` gets the tensor bytes written so far. Throws
// kvg::Error: InvalidArgument for an unusable shape or type, Io when the file
// cannot be written.
void write_synth_model(const SynthOptions& options, const std::string& path, const ProgressReport& report = {});

// The metadata write_synth_model writes (architecture, hyper-parameters,
// tokenizer), for writers that encode the same tensors in other formats.
void add_synth_metadata(gguf::Writer& writer, const SynthOptions& options, const std::string& name);

// The tensors write_synth_model writes, in file order (index = tensor index).
struct SynthTensor {
  std::string name;
  std::vector<uint64_t> ne;  // GGUF order: [in, out]
  gguf::TensorType type;
  bool norm;                 // RMS-norm weight (≈ 1) rather than a matrix
  bool rope_freqs = false;   // Llama 3.1 rope frequency factors (not random)
};
std::vector<SynthTensor> synth_tensors(const SynthOptions& options);  // validates options

// One weight before encoding (see the formula above).
float synth_weight(uint64_t seed, uint64_t tensor_index, const SynthTensor& tensor, uint64_t element);

// The vocabulary pieces, scores and token types the generator writes.
struct SynthVocab {
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<int32_t> types;
};
// With `chatml`, the last two pieces are <|im_start|> and <|im_end|> (control).
SynthVocab synth_vocab(int n_vocab, bool chatml = false);

// Q8_0 encoding of n values (n a multiple of 32) into n / 32 blocks of 34
// bytes: per block d = max|x| / 127 rounded to f16, q = round(x / d) clamped
// to [-127, 127] using that rounded d (q = 0 when d is 0).
void encode_q8_0(const float* x, size_t n, uint8_t* out);

}  // namespace kvg
