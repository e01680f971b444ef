// `kvg reproduce`: recomputes the output of one audit row and checks it
// against the row's output_sha256 (docs/audit-chain.md, "Reproducing a row").
//
// The row is one entry of kvg_manifest() (a flat JSON object). What the row
// holds only as hashes the auditor supplies, and each is checked against its
// hash before anything runs: the prompt text (input_sha256) of a generate
// row, or the question (input_sha256), the knowledge template
// (template_sha256) and the library entries' solutions of an answer row.
// The laid-out prompt's tokens must hash to prompt_tokens_sha256; a prompt
// that followed an explicit artifact takes that chain's tokens from --store.
// The output is then decoded again, with the row's temperature, top_p, seed
// and max_tokens, by recomputing the whole prompt: grafting is exact, so the
// bytes are the ones the graft gave.
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/args.hpp"
#include "cli/artifact_flags.hpp"
#include "cli/commands.hpp"
#include "cli/engine_flags.hpp"
#include "common/error.hpp"
#include "common/json_reader.hpp"
#include "engine/answer_line.hpp"
#include "engine/generate.hpp"
#include "engine/knowledge_prompt.hpp"
#include "engine/prompt.hpp"
#include "storage/artifact_header.hpp"
#include "storage/sha256.hpp"

namespace kvg::cli {

namespace {

// A manifest entry: member name -> its value as text (nullopt for null;
// numbers and booleans as written).
using Row = std::map<std::string, std::optional<std::string>>;

Row read_row(std::string_view text) {
  const std::string what = "--row (give one entry of kvg_manifest(), a flat JSON object)";
  const nlohmann::json doc = read_json(text, what);
  if (!doc.is_object()) throw Error(ErrorCode::InvalidArgument, what + ": not an object");
  Row row;
  for (const auto& [name, value] : doc.items()) {
    if (value.is_structured())
      throw Error(ErrorCode::InvalidArgument, what + ": \"" + name + "\" is a nested value");
    if (value.is_null()) row[name] = std::nullopt;
    else row[name] = value.is_string() ? value.get<std::string>() : value.dump();
  }
  return row;
}

std::string field(const Row& row, const char* name) {
  const auto it = row.find(name);
  if (it == row.end() || !it->second)
    throw Error(ErrorCode::InvalidArgument, std::string("the row has no ") + name + ": not a reproducible row");
  return *it->second;
}

std::optional<std::string> optional_field(const Row& row, const char* name) {
  const auto it = row.find(name);
  return it == row.end() ? std::nullopt : it->second;
}

std::string hex_sha256(std::string_view bytes) { return to_hex(sha256(bytes)); }

// prompt_tokens_sha256: the ids as u32 little-endian, as artifacts hash theirs.
std::string tokens_sha256(const std::vector<int32_t>& tokens) {
  return to_hex(hash_token_ids(std::vector<uint32_t>(tokens.begin(), tokens.end())));
}

void require_hash(const std::string& given, const std::string& expected, const char* what, const char* column) {
  if (hex_sha256(given) != expected)
    throw Error(ErrorCode::InvalidArgument, std::string("the ") + what + " given does not hash to the row's " + column);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::Io, "cannot read " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The whole prompt of a generate row: the text alone, or after the chain it
// continued (its tokens from --store).
std::vector<int32_t> generate_prompt(const Args& args, const Model& model, const Row& row, const std::string& text) {
  const std::string expected = field(row, "prompt_tokens_sha256");
  std::vector<int32_t> fresh = fresh_prompt(model, text);
  if (tokens_sha256(fresh) == expected) return fresh;
  if (const auto leaf = optional_field(row, "artifact_sha256"); leaf && args.has("store")) {
    const std::vector<int32_t> chain = chain_tokens(resolve_artifact_named(args, *leaf, "the row's artifact_sha256"));
    std::vector<int32_t> after = prompt_after_chain(model, chain, text);
    if (tokens_sha256(after) == expected) return after;
  }
  throw Error(ErrorCode::TokenMismatch,
              "the prompt's tokens do not hash to the row's prompt_tokens_sha256 (alone, or after the row's artifact "
              "chain when --store holds it)");
}

}  // namespace

int cmd_reproduce(const Args& args) {
  const Row row = read_row(read_file(args.get("row")));
  const std::string operation = field(row, "operation");
  auto model = load_model(args);
  if (model->fingerprint_hex() != field(row, "model_fingerprint"))
    throw Error(ErrorCode::ModelMismatch, "--model is not the row's model (model_fingerprint)");
  const EngineOptions engine = engine_options(args);
  if (engine.recipe.name() != field(row, "recipe"))
    throw Error(ErrorCode::RecipeMismatch, "the row was computed under recipe " + field(row, "recipe") +
                                               ": pass --recipe " + field(row, "recipe"));

  std::vector<int32_t> prompt;
  std::optional<AnswerLine> line;
  if (operation == "generate") {
    const std::string text = args.get("text");
    require_hash(text, field(row, "input_sha256"), "--text", "input_sha256");
    prompt = generate_prompt(args, *model, row, text);
  } else if (operation == "answer") {
    const std::string question = args.get("question");
    require_hash(question, field(row, "input_sha256"), "--question", "input_sha256");
    // No --template: kvg.knowledge_template's default, which lays the prompt
    // out as the model's own template says when its file carries one
    // (knowledge_template_for); the row's template_sha256 is the setting's.
    const std::string setting = args.opt("template").value_or(kDefaultKnowledgeTemplate);
    require_hash(setting, field(row, "template_sha256"), args.has("template") ? "--template" : "--template (absent: the default knowledge template)",
                 "template_sha256");
    std::vector<std::string> contexts;
    for (const char* flag : {"context", "context2"})
      if (args.has(flag)) contexts.push_back(args.get(flag));
    const KnowledgeTemplate tmpl = knowledge_template_for(*model, setting);
    prompt = tokenize_segments(*model, knowledge_segments(tmpl, contexts, question), {}, tmpl.markers).tokens;
    if (tokens_sha256(prompt) != field(row, "prompt_tokens_sha256"))
      throw Error(ErrorCode::TokenMismatch,
                  "the laid-out prompt does not hash to the row's prompt_tokens_sha256: give the solutions of the "
                  "entries the answer used (--context, --context2), in order");
    line.emplace(model->tokenizer(), prompt.back());
  } else {
    throw Error(ErrorCode::Unsupported, "kvg reproduce recomputes generate and answer rows, not " + operation);
  }

  GenerateOptions options;
  options.max_new_tokens = std::stoll(field(row, "max_tokens"));
  options.sampling.temperature = std::stof(field(row, "temperature"));
  options.sampling.top_p = std::stof(field(row, "top_p"));
  options.sampling.seed = std::stoull(field(row, "seed"));
  if (line) options.on_token = [&line](int32_t token) { return line->feed(token); };
  Session session(model, engine);
  const GenerateResult result = generate(session, prompt, options);
  const std::string output = line ? line->answer() : model->tokenizer().decode(result.tokens);
  const std::string got = hex_sha256(output);
  const bool same = got == field(row, "output_sha256");
  std::printf("%s row %s (seq %s): %zu prompt tokens, %zu decoded, output sha256 %s: %s\n", operation.c_str(),
              field(row, "id").c_str(), field(row, "seq").c_str(), prompt.size(), result.tokens.size(), got.c_str(),
              same ? "REPRODUCED (the row's output_sha256)" : "DIFFERS from the row's output_sha256");
  return same ? 0 : 1;
}

}  // namespace kvg::cli
