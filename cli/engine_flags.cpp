#include "cli/engine_flags.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <string>
#include <thread>

#include "common/error.hpp"
#include "engine/graft_check.hpp"
#include "engine/prompt.hpp"

namespace kvg::cli {

static_assert(std::endian::native == std::endian::little, "logits are written as native little-endian floats");

int default_threads() {
  // hardware_concurrency() is 0 where the count is unknown: one thread then.
  return int(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, unsigned(kMaxThreads)));
}

Flag offload_refusal() {
  // llama.cpp splits a model's layers between GPU and CPU; a kvg session runs
  // every layer where --device says, so no count of layers means anything
  // here, and what a user wants from -ngl 99 is --device cuda.
  return {"n-gpu-layers", "N", "", "-ngl", {"--gpu-layers", "-ngld", "--n-gpu-layers-draft"},
          "is llama.cpp's layer offload; kvg runs the whole model on one device: use --device cuda (or cpu)"};
}

Flags engine_flags(Flags more) {
  Flags flags = {
      {"model", "M", "the GGUF model file", "-m"},
      {"threads", "N", "worker threads, 1.." + std::to_string(kMaxThreads) + " (default: this machine's cores, " +
                           std::to_string(default_threads()) + "; the bits do not change)", "-t"},
      {"isa", "I", "scalar|avx2|avx512|auto: the CPU kernels (default: the best; the bits do not change)"},
      {"max-context", "N", "positions the KV cache holds (default: the model's context length)", "-c", {"--ctx-size"}},
      {"max-kv-memory", "BYTES", "refuse a context whose KV cache needs more bytes (default: unbounded)"},
      {"device", "D", "cpu|cuda|auto: where the forward pass runs (default cpu; the bits do not change)"},
      {"recipe", "R", "the arithmetic, e.g. f32-portable-v1 (default) or q8-portable-v1 (docs/recipe.md)"},
      offload_refusal(),
  };
  flags.insert(flags.end(), more.begin(), more.end());
  return flags;
}

static std::vector<Recipe> recipe_flag(const Args& args) {
  std::vector<Recipe> recipes;
  const std::string list = args.opt("recipe").value_or(kDefaultRecipe.name());
  for (size_t begin = 0; begin <= list.size();) {
    const size_t comma = std::min(list.find(',', begin), list.size());
    recipes.push_back(parse_recipe(std::string_view(list).substr(begin, comma - begin)));
    begin = comma + 1;
  }
  return recipes;
}

EngineOptions engine_options(const Args& args, std::vector<Recipe>* recipes) {
  EngineOptions options;
  const std::vector<Recipe> named = recipe_flag(args);
  if (named.size() > 1 && !recipes)
    throw Error(ErrorCode::InvalidArgument, "--recipe takes one recipe here, not a list");
  options.recipe = named.front();
  if (recipes) *recipes = named;
  const int64_t threads = args.get_int("threads", default_threads());
  if (threads < 1 || threads > kMaxThreads)
    throw Error(ErrorCode::InvalidArgument, "--threads must be in 1.." + std::to_string(kMaxThreads));
  options.threads = int(threads);
  if (auto isa = args.opt("isa")) options.isa = parse_isa(*isa);
  options.max_context = args.get_int("max-context", 0);
  options.max_kv_bytes = args.get_int("max-kv-memory", 0);
  if (options.max_kv_bytes < 0) throw Error(ErrorCode::InvalidArgument, "--max-kv-memory must be >= 0");
  options.kv_limit_name = "--max-kv-memory";
  options.device = device_flag(args);
  return options;
}

Device device_flag(const Args& args) {
  const std::string name = args.opt("device").value_or("cpu");
  const auto device = parse_device(name);
  if (!device) throw Error(ErrorCode::InvalidArgument, "--device must be cpu, cuda or auto, not '" + name + "'");
  return *device;
}

std::shared_ptr<const Model> load_model(const Args& args) { return Model::load(args.get("model")); }

std::vector<int32_t> prompt_tokens(const Args& args, const Model& model) {
  if (args.has("tokens") == args.has("text")) throw Error(ErrorCode::InvalidArgument, "give exactly one of --tokens and --text");
  if (args.has("tokens")) return parse_token_list(args.get("tokens"));
  return fresh_prompt(model, args.get("text"));
}

std::string write_logits(const std::string& path, const std::vector<float>& logits) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw Error(ErrorCode::Io, "cannot open " + path + " for writing");
  const size_t written = std::fwrite(logits.data(), 4, logits.size(), f);
  const bool closed = std::fclose(f) == 0;
  if (written != logits.size() || !closed) throw Error(ErrorCode::Io, "cannot write " + path);
  return logits_sha256(logits);
}

}  // namespace kvg::cli
