// The command table: every `kvg` subcommand's name, summary and flags. The
// flags are both what the parser accepts and what --help prints, so the two
// cannot drift apart.
#include "cli/commands.hpp"

#include <algorithm>
#include <iterator>
#include <string>

#include "cli/chat_flags.hpp"
#include "cli/engine_flags.hpp"

namespace kvg::cli {

namespace {

const Flag kText{"text", "T", "the prompt as text (encoded with the model's tokenizer)", "-p"};
const Flag kTokens{"tokens", "IDS", "the prompt as token ids, \"1,2,3\""};
const Flag kChunk{"chunk", "K", "prefill in chunks of K tokens (default: all at once; the bits do not change)"};
const Flag kArtifact{"artifact", "A", "graft this artifact first: a file, or a hash in --store"};
const Flag kStore{"store", "DIR", "a content-addressed artifact store directory"};

// A flag's help, then the other tools' spellings it takes: "... (also --ctx-size)".
std::string help_line(const Flag& f) {
  std::string also;
  for (const std::string& s : f.also) also += (also.empty() ? " (also " : ", ") + s;
  return also.empty() ? f.help : f.help + also + ")";
}

Flags with(Flags a, const Flags& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Flags sampling_flags() {
  return {{"n", "N", "new tokens at most, 1..1048576 (default 64)", "-n"},
          {"seed", "S", "sampling seed, any 64-bit integer (default 0)"},
          {"temperature", "X", "sampling temperature, 0..100 (default 0: greedy)"},
          {"top-k", "K", "sample from the K most likely tokens (default 0: all)"},
          {"top-p", "P", "nucleus sampling threshold, above 0 and at most 1 (default 1)"},
          {"json", "", "print one JSON object: tokens, text, timings"},
          {"no-perf", "", "do not print the timings to stderr at the end (as llama.cpp's --no-perf)"}};
}

// The longer flag lists, one function per command, so that the table below
// stays one row per command in `kvg help` order.

Flags info_flags() {
  return {{"model", "M", "the GGUF model file", "-m"},
          {"json", "", "one JSON object instead of a table"},
          {"device", "D", "cpu|cuda|auto: report where this --device would really run (default cpu)"},
          {"recipe", "R", "report this recipe (default f32-portable-v1; docs/recipe.md)"},
          offload_refusal()};
}

Flags tokenize_flags() {
  return {{"model", "M", "the GGUF model or vocabulary file", "-m"},
          {"text", "T", "the text to encode", "-p"},
          {"file", "F", "encode this file's bytes instead of --text"},
          {"bos", "", "prepend the beginning-of-sequence token"},
          {"special", "", "match control tokens (\"<|endoftext|>\", \"</s>\") written in the text"},
          {"bench", "", "print the token count and tokens/s instead of the ids"}};
}

Flags logits_flags() {
  return engine_flags({{"tokens", "IDS", "the whole prompt as token ids, \"1,2,3\""},
                       {"out", "FILE", "where the logits go (positions x vocabulary, little-endian fp32)"},
                       kChunk, kArtifact, kStore});
}

Flags generate_flags() {
  return engine_flags(with(with({kText, kTokens}, sampling_flags()),
                           {{"chat", "", "--text is a user's message, laid out in the model's chat format; stops at "
                                         "its end of turn (see kvg help chat)"},
                            {"system", "S", "with --chat: a system message before --text"},
                            {"format", "F", "with --chat: auto|plain|chatml|llama3|gemma|phi3|mistral (default auto)"},
                            kChunk, kArtifact, kStore,
                            {"compose-positional", "A,B,...",
                             "place these blocks (files or hashes in --store) one after another without recomputing "
                             "them: cheap, NOT exact (docs/composition.md)"}}));
}

Flags capture_flags() {
  return engine_flags({kText, kTokens,
                       {"out", "FILE", "write the artifact to this file"},
                       {"store", "DIR", "or put it into this store"},
                       {"parent", "HASH", "continue this artifact's chain (looked up in --store)"},
                       kChunk});
}

Flags graft_check_flags() {
  return engine_flags({{"artifact", "A", "the artifact: a file, or a hash in --store"}, kStore, kTokens, kText,
                       {"samples", "N", "also compare N sampled continuations (default 0)"},
                       {"sample-tokens", "N", "tokens per sampled continuation (default 16)"}});
}

Flags reproduce_flags() {
  return engine_flags({{"row", "FILE", "the row: one entry of kvg_manifest(), as JSON"},
                       {"text", "T", "generate rows: the prompt text (checked against input_sha256)"},
                       {"question", "Q", "answer rows: the question (checked against input_sha256)"},
                       {"template", "T", "answer rows: kvg.knowledge_template as it was (checked against template_sha256; default: its default, laid out as the model's own template where it carries one)"},
                       {"context", "S", "answer rows: the solution of the entry the answer used (recurring, transfer)"},
                       {"context2", "S", "answer rows: a second entry's solution (transfer)"},
                       {"store", "DIR", "the artifacts a generate row continued (its chain's tokens)"}});
}

Flags eval_flags() {
  return engine_flags({{"questions", "FILE", "JSONL: {\"question\", \"answer\", \"verifier\", \"solution\"?} a line"},
                       {"generator", "NAME", "built-in questions instead: digit-rule"},
                       {"seed", "S", "with --generator: the seed (default 1)"},
                       {"count", "N", "with --generator: how many questions (default 500)"},
                       {"learn", "N", "the first N questions are the learning part, the rest held out (default half)"},
                       {"template", "T", "the knowledge template (default: the model's kvg.knowledge_template, else its chat format, else kvg.knowledge_template's default)"},
                       {"max-tokens", "N", "tokens decoded per answer at most (default 96)"},
                       {"min-similarity", "X", "transfer: share of the question's words an entry must hold (default 0.5)"},
                       {"transfer-entries", "K", "transfer: at most K entries as context (default 1)"},
                       {"check", "N", "replay N grafted answers with graft_check (default 8; exit 1 on a difference)"},
                       {"json", "", "one JSON object instead of the table"},
                       {"dump", "FILE", "write the questions as JSONL (- for stdout) and stop"},
                       {"training-split", "", "with --generator and --dump: the questions reserved for training"}});
}

Flags template_flags() {
  return {{"model", "M", "the GGUF model file", "-m"},
          {"set", "T", "write a copy carrying this template ({solution} before {question}; \\n, \\t, \\\\ are escapes)"},
          {"out", "F.gguf", "with --set: the copy (every other key and tensor as the input has them)"}};
}

Flags bench_flags() {
  return engine_flags({{"prompt-tokens", "N", "prompt length (default 128)", "-p"},
                       {"gen-tokens", "N", "decoded tokens (default 64)", "-n"},
                       {"repetitions", "N", "runs of each recipe, 1..1000, reported as mean ± standard deviation (default 5)", "-r"},
                       {"sequences", "N", "sequences run together in batched passes, 1..256 (default 1; CPU): tokens/s are their sum", "-b"},
                       {"skip-memory", "", "skip the 1 GiB memory-read measurement"},
                       {"json", "", "one JSON object (every recipe, every run) instead of the table"}});
}

Flags bench_graft_flags() {
  return engine_flags({{"lengths", "N,N,...", "prefix lengths (default 64, 128, ... up to the context)"},
                       {"store", "DIR", "where the temporary store goes (default /tmp)"},
                       {"repeat", "R", "best of R runs (default 3 up to 512 tokens, 1 above)", "-r"},
                       {"json", "", "one JSON object (rows, store I/O) instead of the tables"}});
}

Flags bench_mapped_flags() {
  return engine_flags({{"lengths", "N,N,...", "context lengths (default 1024,4096,8000)"},
                       {"decode", "N", "tokens decoded after each context (default 16)"},
                       {"store", "DIR", "where the temporary store goes (default /tmp)"}});
}

Flags bench_compose_flags() {
  return engine_flags({{"blocks", "K,K,...", "block counts to compare (default 2,4,8)"},
                       {"questions", "N", "compositions per block count (default 100)"},
                       {"answer-tokens", "N", "greedy answer tokens compared (default 8)"},
                       {"seed", "S", "stories and compositions (default 1)"}});
}

Flags bench_store_flags() {
  return {{"db", "CONNINFO", "libpq connection string of a server with kvg installed (default: the PG* environment)"},
          {"sizes", "MiB,...", "artifact sizes in MiB (default 1,16,256,1000)"},
          {"repeat", "R", "best of R runs per size (default 3, 1 above 256 MiB)", "-r"},
          {"dir", "DIR", "where the plain files are written (default /tmp; best on the server's disk)"},
          {"model", "M", "also graft a long prefix vs recompute it on this model (the server must read the path)", "-m"},
          {"graft-tokens", "N", "the prefix's length at most (default 2000)"},
          {"threads", "N", "kvg.threads for the graft part (default 2)", "-t"}};
}

Flags synth_flags() {
  return {{"out", "F.gguf", "the model file to write"},
          {"n-embd", "N", "embedding width (default 64)"},
          {"n-layer", "N", "layers (default 2)"},
          {"n-head", "N", "attention heads (default 4)"},
          {"n-head-kv", "N", "key/value heads (default: --n-head)"},
          {"n-ff", "N", "feed-forward width (default 4 x --n-embd)"},
          {"vocab", "N", "vocabulary size, at least 259 (default 512)"},
          {"n-ctx", "N", "context length (default 2048)"},
          {"type", "T", "f32|f16|q8_0|q4_1|q5_0|q5_1|q2_k|q3_k|q4_k|q5_k|q6_k|q4_k_m (llama-quantize's mix): the matrices' format (default f32)"},
          {"seed", "S", "weight seed (default 0)"},
          {"rope-base", "X", "rotary base (default 10000)"},
          {"arch", "A", "llama|qwen2|qwen3|phi3|gemma|gemma2|gemma3|starcoder2 (default llama)"},
          {"llama3-rope", "", "llama: add rope_freqs.weight (Llama 3.1+ rope scaling)"},
          {"rope-scale", "X", "linear rope scaling by X (> 1; gemma3: global layers only)"},
          {"sliding-window", "N", "phi3/gemma2/gemma3: attention window (default 40)"},
          {"attn-softcap", "X", "gemma2: attention logit soft-cap (default 50)"},
          {"final-softcap", "X", "gemma2: final logit soft-cap (default 30)"},
          {"chat-template", "chatml", "an instruct-style vocabulary: <|im_start|>, <|im_end|> and a ChatML template"}};
}

Flags synth_artifact_flags() {
  return {{"bytes", "N", "the artifact's size, within 1%"},
          {"out", "FILE", "the artifact file to write"},
          {"seed", "S", "payload seed (default 0)"}};
}

// Every command, in the order `kvg help` lists them: name, summary, runner, flags.
std::vector<Command> build_table() {
  return {
      {"info", "describe a model and where an engine command would run", cmd_info, info_flags()},
      {"tokenize", "print a text's token ids (any GGUF with a vocabulary, whatever its architecture)", cmd_tokenize,
       tokenize_flags()},
      {"logits", "write the fp32 logits of every position to a file; print their SHA-256", cmd_logits, logits_flags()},
      {"generate", "generate text (greedy, or sampled with a seed)", cmd_generate, generate_flags()},
      {"chat", "answer a conversation as the model's assistant, laid out in its chat format (docs/chat.md)", cmd_chat,
       engine_flags(with(chat_flags(), sampling_flags()))},
      {"capture", "prefill a prefix and store its KV as an artifact; print its SHA-256", cmd_capture, capture_flags()},
      {"verify", "check an artifact file's format and hash; print its header", cmd_verify, {}, "FILE"},
      {"graft-check", "graft an artifact and recompute the same prompt: exit 0 when the logits bytes are equal",
       cmd_graft_check, graft_check_flags()},
      {"reproduce", "recompute an audit row's output (one kvg_manifest() entry) and check its output_sha256",
       cmd_reproduce, reproduce_flags()},
      {"eval", "cold vs recurring vs transfer: accuracy, tokens, ms and FLOPs (an estimate) of the flywheel on "
               "questions (docs/flywheel.md \"Measuring it: kvg eval\")",
       cmd_eval, eval_flags()},
      {"template", "show the knowledge template a model carries (kvg.knowledge_template), or write a copy of the "
                   "model carrying one (--set T --out F)",
       cmd_template, template_flags()},
      {"bench", "prefill and decode throughput per recipe (--recipe A,B: one row each), mean ± standard deviation of -r runs, and decode's share of memory bandwidth", cmd_bench,
       bench_flags()},
      {"bench-graft", "graft a stored prefix vs recompute it, by prefix length; store vs plain file I/O",
       cmd_bench_graft, bench_graft_flags()},
      {"bench-mapped",
       "a long context's KV mapped from artifact files vs grafted into the resident cache: open, decode, memory",
       cmd_bench_mapped, bench_mapped_flags()},
      {"bench-compose",
       "k stored blocks as an exact chain vs placed positionally (not exact): agreement and cost for each k",
       cmd_bench_compose, bench_compose_flags()},
      {"bench-store", "large objects vs plain files by artifact size, and graft from a large object vs recompute",
       cmd_bench_store, bench_store_flags()},
      {"synth", "write a synthetic GGUF model (any supported architecture) with seeded random weights", cmd_synth,
       synth_flags()},
      {"synth-artifact", "write a valid artifact of about N bytes of random KV (a storage benchmark helper)",
       cmd_synth_artifact, synth_artifact_flags()},
  };
}

}  // namespace

const std::vector<Command>& commands() {
  static const std::vector<Command> table = build_table();
  return table;
}

const Command* find_command(std::string_view name) {
  for (const Command& c : commands())
    if (name == c.name) return &c;
  return nullptr;
}

void print_command_list(std::FILE* out) {
  std::fprintf(out, "usage: kvg <command> [flags]      kvg help <command>, kvg <command> --help: its flags\n"
                   "       kvg --version                 the release, commit, recipes and the CPU's kernels\n\n");
  for (const Command& c : commands()) std::fprintf(out, "  %-15s %s\n", c.name, c.summary);
}

void print_command_help(std::FILE* out, const Command& command) {
  std::fprintf(out, "usage: kvg %s%s%s%s\n\n%s\n", command.name, command.flags.empty() ? "" : " [flags]",
               command.positional ? " " : "", command.positional ? command.positional : "", command.summary);
  if (command.flags.empty()) return;
  std::fprintf(out, "\nflags:\n");
  size_t width = 0;
  auto spelling = [](const Flag& f) {
    std::string s = f.alias.empty() ? "--" + f.name : f.alias + ", --" + f.name;
    return f.value.empty() ? s : s + " " + f.value;
  };
  Flags taken;  // a refused flag is not listed: the parser says why when one is given
  std::copy_if(command.flags.begin(), command.flags.end(), std::back_inserter(taken),
               [](const Flag& f) { return f.refused.empty(); });
  for (const Flag& f : taken) width = std::max(width, spelling(f).size());
  for (const Flag& f : taken) std::fprintf(out, "  %-*s  %s\n", int(width), spelling(f).c_str(), help_line(f).c_str());
}

}  // namespace kvg::cli
