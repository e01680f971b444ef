#include "cli/engine_flags.hpp"

#include <bit>
#include <cstdio>

#include "common/error.hpp"
#include "engine/graft_check.hpp"
#include "engine/prompt.hpp"

namespace kvg::cli {

static_assert(std::endian::native == std::endian::little, "logits are written as native little-endian floats");

EngineOptions engine_options(const Args& args) {
  EngineOptions options;
  options.threads = int(args.get_int("threads", 1));
  if (options.threads < 1 || options.threads > 256) throw Error(ErrorCode::InvalidArgument, "--threads must be in 1..256");
  if (auto isa = args.opt("isa")) options.isa = parse_isa(*isa);
  options.max_context = args.get_int("max-context", 0);
  const std::string device = args.opt("device").value_or("cpu");
  if (device == "cpu") options.device = Device::Cpu;
  else if (device == "cuda") options.device = Device::Cuda;
  else if (device == "auto") options.device = Device::Auto;
  else throw Error(ErrorCode::InvalidArgument, "--device must be cpu, cuda or auto, not '" + device + "'");
  return options;
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
