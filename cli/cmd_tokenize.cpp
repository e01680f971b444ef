#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/engine_flags.hpp"
#include "common/error.hpp"
#include "engine/gguf/gguf_file.hpp"
#include "engine/tokenizer.hpp"

namespace kvg::cli {

namespace {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::Io, "cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

// Only the tokenizer is loaded: a vocabulary-only GGUF of any architecture
// (even one the engine cannot run) tokenizes.
int cmd_tokenize(const Args& args) {
  const auto file = gguf::File::open(args.get("model"));
  const Tokenizer tok = Tokenizer::from_gguf(*file);
  if (args.has("text") == args.has("file")) throw Error(ErrorCode::InvalidArgument, "give exactly one of --text and --file");
  const std::string text = args.has("file") ? read_text_file(args.get("file")) : args.get("text");
  const bool special = args.has("special");
  const auto start = std::chrono::steady_clock::now();
  std::vector<int32_t> ids = tok.encode(text, special);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (args.has("bench")) {
    std::printf("%zu bytes -> %zu tokens in %.3f s: %.0f tokens/s, %.2f MB/s\n", text.size(), ids.size(), seconds,
                double(ids.size()) / seconds, double(text.size()) / seconds / 1e6);
    return 0;
  }
  if (args.has("bos")) ids.insert(ids.begin(), tok.bos());
  std::printf("%s\n", join_tokens(ids).c_str());
  return 0;
}

}  // namespace kvg::cli
