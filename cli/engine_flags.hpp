// Flags shared by every subcommand that runs the engine.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cli/args.hpp"
#include "engine/model.hpp"
#include "engine/session.hpp"

namespace kvg::cli {

// --threads: at most this many; by default one per core this machine has
// (std::thread::hardware_concurrency, within 1..kMaxThreads). The bits of
// every result are the same at any count.
inline constexpr int kMaxThreads = 256;
int default_threads();

// --model, --threads, --isa, --max-context (-c, llama.cpp's --ctx-size),
// --device, --recipe: the flags of every command that runs the model,
// followed by `more`. llama.cpp's -ngl is among them, refused with the reason.
Flags engine_flags(Flags more);
// -ngl, --n-gpu-layers and their like, refused: "use --device".
Flag offload_refusal();

// The options the flags name. --recipe is one name, or — where the command
// runs once per recipe and passes `recipes` — a comma-separated list, which
// lands there (options.recipe is then its first).
EngineOptions engine_options(const Args& args, std::vector<Recipe>* recipes = nullptr);
// --device (default cpu).
Device device_flag(const Args& args);
std::shared_ptr<const Model> load_model(const Args& args);
// The prompt from --tokens or --text (encoded, with BOS when the model adds one).
std::vector<int32_t> prompt_tokens(const Args& args, const Model& model);
// Writes fp32 logits as little-endian bytes; returns their SHA-256 (hex).
std::string write_logits(const std::string& path, const std::vector<float>& logits);

}  // namespace kvg::cli
