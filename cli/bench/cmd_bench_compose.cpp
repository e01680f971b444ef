// kvg bench-compose: a context made of k stored blocks, two ways (issue #14).
//  exact chain — block 1 grafted, the blocks after it computed after it (a
//    first composition), or the stored composition grafted whole (reused);
//  positional — every block captured on its own and placed without
//    recomputation (engine/positional_compose.hpp): cheap, NOT exact.
// For each k, over --questions compositions of k distinct template stories
// with a sentence to complete about one of them, it reports how far the
// positional logits are from the exact ones over the question's positions
// (KL(exact || positional), argmax agreement), whether the greedy answers
// are the same tokens, how often each is right, and what each costs. A
// second table gives the exact chain's first composition against a reused
// one for k up to the model's window.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "cli/args.hpp"
#include "cli/bench/story_templates.hpp"
#include "cli/clock.hpp"
#include "cli/commands.hpp"
#include "cli/engine_flags.hpp"
#include "common/error.hpp"
#include "engine/graft_check.hpp"
#include "engine/memory_artifacts.hpp"
#include "engine/positional_compose.hpp"
#include "engine/prompt.hpp"
#include "engine/sampler.hpp"
#include "storage/byte_stream.hpp"

namespace kvg::cli {

namespace {

std::vector<int64_t> parse_counts(const std::string& text) {
  std::vector<int64_t> out;
  for (size_t pos = 0; pos <= text.size();) {
    const size_t end = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, end - pos);
    char* stop = nullptr;
    const long long n = std::strtoll(item.c_str(), &stop, 10);
    if (item.empty() || *stop != '\0' || n < 2 || n > int64_t(story_name_count()))
      throw Error(ErrorCode::InvalidArgument, "--blocks takes counts from 2 to " +
                                                  std::to_string(story_name_count()) + ", got '" + item + "'");
    out.push_back(n);
    pos = end + 1;
  }
  return out;
}

// Greedy continuation after `last` (the logits of the session's last token).
std::vector<int32_t> greedy(Session& s, std::vector<float> last, int n) {
  std::vector<int32_t> out;
  const size_t n_vocab = size_t(s.model().config().n_vocab);
  for (int i = 0; i < n && s.n_past() < s.max_context(); ++i) {
    const int32_t t = argmax(std::span<const float>(last.data() + last.size() - n_vocab, n_vocab));
    out.push_back(t);
    const int32_t one[1] = {t};
    s.forward(one, LogitsFor::Last, &last);
  }
  return out;
}

bool has_word(const std::string& text, const std::string& word) {
  std::string lower;
  for (char c : text) lower += char(std::tolower(static_cast<unsigned char>(c)));
  for (size_t at = lower.find(word); at != std::string::npos; at = lower.find(word, at + 1)) {
    const bool start = at == 0 || !std::isalpha(static_cast<unsigned char>(lower[at - 1]));
    const size_t e = at + word.size();
    const bool end = e >= lower.size() || !std::isalpha(static_cast<unsigned char>(lower[e]));
    if (start && end) return true;
  }
  return false;
}

struct Row {
  int64_t k = 0, questions = 0, context_tokens = 0, positions = 0, argmax_agree = 0, answers_agree = 0;
  int64_t right_exact = 0, right_positional = 0, reuse_mismatches = 0;
  double kl_sum = 0, kl_max = 0, first_s = 0, reused_s = 0, positional_s = 0;
};

struct ComposeOptions {
  std::vector<int64_t> counts;  // --blocks
  int64_t questions = 0;
  int answer_tokens = 0;
  uint64_t seed = 0;
};

ComposeOptions compose_options(const Args& args) {
  ComposeOptions o;
  o.counts = parse_counts(args.opt("blocks").value_or("2,4,8"));
  o.questions = args.get_int("questions", 100);
  o.answer_tokens = int(args.get_int("answer-tokens", 8));
  o.seed = uint64_t(args.get_int("seed", 1));
  if (o.questions < 1 || o.questions > 100000) throw Error(ErrorCode::InvalidArgument, "--questions must be in 1..100000");
  if (o.answer_tokens < 1 || o.answer_tokens > 256)
    throw Error(ErrorCode::InvalidArgument, "--answer-tokens must be in 1..256");
  return o;
}

// Every template story captured once, on its own: the library's blocks.
struct BlockLibrary {
  std::vector<TemplateStory> stories;
  MemoryArtifacts store;  // in memory: the cost of a store is bench-graft's subject
  std::vector<Digest> leaf;
  std::vector<std::vector<int32_t>> block_tokens;
};

// Fills `lib` in place: the store's opener points into it, so it never moves.
void capture_library(BlockLibrary& lib, const std::shared_ptr<const Model>& model, const EngineOptions& engine,
                     uint64_t seed) {
  lib.stories = template_stories(story_name_count(), seed);
  for (const auto& story : lib.stories) {
    Session s(model, engine);
    lib.block_tokens.push_back(fresh_prompt(*model, story.text));
    s.prefill(lib.block_tokens.back(), 0, LogitsFor::None, nullptr);
    lib.leaf.push_back(lib.store.capture_from(s, 0, s.n_past(), std::nullopt));
  }
}

// Attaches stored KV to `s` with `attach`, then prefills `tokens` with every
// position's logits, which it returns; the time of both is added to *seconds.
// Sessions are created before, outside the timed region.
template <class Attach>
std::vector<float> timed_prefill(Session& s, const Attach& attach, std::span<const int32_t> tokens, double* seconds) {
  std::vector<float> logits;
  const double t = now_seconds();
  attach();
  s.prefill(tokens, 0, LogitsFor::All, &logits);
  *seconds += now_seconds() - t;
  return logits;
}

// KL(exact || positional) and argmax agreement at each question position.
void add_agreement(Row& row, const std::vector<float>& exact_q, const std::vector<float>& positional_q,
                   size_t positions, size_t n_vocab) {
  for (size_t p = 0; p < positions; ++p) {
    const std::span<const float> e(exact_q.data() + p * n_vocab, n_vocab);
    const std::span<const float> g(positional_q.data() + p * n_vocab, n_vocab);
    const double kl = kl_divergence(e, g);
    row.kl_sum += kl;
    row.kl_max = std::max(row.kl_max, kl);
    row.argmax_agree += argmax(e) == argmax(g);
    ++row.positions;
  }
}

// The comparison for one block count k, over o.questions random compositions.
class ComposeBench {
 public:
  ComposeBench(const std::shared_ptr<const Model>& model, const EngineOptions& engine, BlockLibrary& lib,
               const ComposeOptions& o)
      : model_(model), engine_(engine), lib_(lib), o_(o), n_vocab_(size_t(model->config().n_vocab)) {}

  Row measure(int64_t k, std::mt19937_64& rng) {
    Row row;
    row.k = k;
    for (int64_t q = 0; q < o_.questions; ++q) measure_question(row, k, rng);
    return row;
  }

 private:
  // k distinct stories in random order and one of them asked about.
  void measure_question(Row& row, int64_t k, std::mt19937_64& rng) {
    std::vector<size_t> order(lib_.stories.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    order.resize(size_t(k));
    const TemplateStory& asked = lib_.stories[order[size_t(rng() % size_t(k))]];
    std::vector<int32_t> composed;
    std::vector<Digest> leaves;
    for (size_t i : order) {
      composed.insert(composed.end(), lib_.block_tokens[i].begin(), lib_.block_tokens[i].end());
      leaves.push_back(lib_.leaf[i]);
    }
    const std::vector<int32_t> prompt = prompt_after_chain(*model_, composed, "\n" + asked.question);
    const std::span<const int32_t> question(prompt.data() + composed.size(), prompt.size() - composed.size());
    const int64_t n1 = int64_t(lib_.block_tokens[order[0]].size());
    if (int64_t(prompt.size()) + o_.answer_tokens > model_->config().n_ctx)
      throw Error(ErrorCode::OutOfRange, std::to_string(k) + " blocks and a question take " +
                                             std::to_string(prompt.size()) + " tokens, beyond the window");

    // Exact, first composition: block 1 grafted, the rest computed after it.
    Session exact(model_, engine_);
    const std::vector<float> exact_logits =
        timed_prefill(exact, [&] { graft(exact, leaves[0], lib_.store.opener()); },
                      std::span<const int32_t>(prompt).subspan(size_t(n1)), &row.first_s);
    const std::vector<float> exact_q(exact_logits.end() - std::ptrdiff_t(question.size() * n_vocab_),
                                     exact_logits.end());
    const Digest chain = lib_.store.capture_from(exact, n1, int64_t(composed.size()), leaves[0]);
    const auto exact_answer = greedy(exact, exact_q, o_.answer_tokens);

    // Exact, reused: the stored composition grafted whole.
    Session reused(model_, engine_);
    const std::vector<float> reused_q =
        timed_prefill(reused, [&] { graft(reused, chain, lib_.store.opener()); }, question, &row.reused_s);
    row.reuse_mismatches += reused_q != exact_q;

    // Positional: every block placed without recomputation.
    Session positional(model_, engine_);
    const std::vector<float> positional_q = timed_prefill(
        positional, [&] { graft_positional(positional, leaves, lib_.store.opener()); }, question, &row.positional_s);
    const auto positional_answer = greedy(positional, positional_q, o_.answer_tokens);

    add_agreement(row, exact_q, positional_q, question.size(), n_vocab_);
    ++row.questions;
    row.context_tokens += int64_t(composed.size());
    row.answers_agree += exact_answer == positional_answer;
    row.right_exact += has_word(model_->tokenizer().decode(exact_answer), asked.answer);
    row.right_positional += has_word(model_->tokenizer().decode(positional_answer), asked.answer);
  }

  const std::shared_ptr<const Model>& model_;
  const EngineOptions& engine_;
  BlockLibrary& lib_;
  const ComposeOptions& o_;
  const size_t n_vocab_;
};

// The first table: one row per k. Throws after printing a row whose reused
// compositions were not bit-identical to the first.
void print_agreement_table(const Model& model, const ComposeOptions& o, const std::vector<Row>& rows) {
  std::printf("composition of k stored blocks: exact chain vs positional (%s, %lld questions per k, "
              "%d answer tokens, seed %llu)\n",
              model.config().name.c_str(), (long long)o.questions, o.answer_tokens, (unsigned long long)o.seed);
  std::printf("%3s %7s %9s %9s %8s %8s %9s %9s %10s %10s %10s %7s\n", "k", "tokens", "KL mean", "KL max",
              "argmax", "answers", "right ex", "right pos", "first ms", "reused ms", "posit. ms", "saving");
  for (const Row& r : rows) {
    const double n = double(r.questions);
    std::printf("%3lld %7.1f %9.4f %9.4f %7.1f%% %7.1f%% %8.1f%% %8.1f%% %10.3f %10.3f %10.3f %6.1fx\n",
                (long long)r.k, double(r.context_tokens) / n, r.kl_sum / double(r.positions), r.kl_max,
                100.0 * double(r.argmax_agree) / double(r.positions), 100.0 * double(r.answers_agree) / n,
                100.0 * double(r.right_exact) / n, 100.0 * double(r.right_positional) / n, 1e3 * r.first_s / n,
                1e3 * r.reused_s / n, 1e3 * r.positional_s / n, r.first_s / r.positional_s);
    if (r.reuse_mismatches)
      throw Error(ErrorCode::Internal, std::to_string(r.reuse_mismatches) +
                                           " reused compositions gave other logits than the first: not exact");
  }
  std::printf("(KL(exact || positional) and argmax agreement over the question's positions; answers: the greedy\n"
              " answer tokens identical; right: the answer holds the story's word; ms per composition, question\n"
              " prefill included; saving = first / positional. Every reused composition matched the first bit for bit.)\n\n");
}

// The exact chain, first vs reused, for k up to the window: k = 1, 2, 4,
// ... and the most blocks the window holds (stories repeat past the last).
void print_chain_reuse_table(const std::shared_ptr<const Model>& model, const EngineOptions& engine,
                             BlockLibrary& lib) {
  std::printf("exact chain: first composition vs reused, by k up to the window of %d (best of 3 up to k = 8)\n",
              model->config().n_ctx);
  std::printf("%3s %7s %11s %11s %7s\n", "k", "tokens", "first ms", "reused ms", "ratio");
  std::vector<int32_t> composed;
  std::vector<size_t> ends;  // composed.size() after each block
  while (true) {
    const auto& next = lib.block_tokens[ends.size() % lib.block_tokens.size()];
    if (int64_t(composed.size() + next.size()) > model->config().n_ctx) break;
    composed.insert(composed.end(), next.begin(), next.end());
    ends.push_back(composed.size());
  }
  const int64_t n1 = int64_t(ends.front());
  for (size_t k = 1; k <= ends.size(); k = (k * 2 > ends.size() && k < ends.size()) ? ends.size() : k * 2) {
    const std::span<const int32_t> context(composed.data(), ends[k - 1]);
    double first = 1e30, reused = 1e30;
    std::optional<Digest> chain;
    for (int rep = 0; rep < (k <= 8 ? 3 : 1); ++rep) {
      Session s(model, engine);
      double t = now_seconds();
      graft(s, lib.leaf[0], lib.store.opener());
      if (k > 1) s.prefill(context.subspan(size_t(n1)), 0, LogitsFor::None, nullptr);
      first = std::min(first, now_seconds() - t);
      if (!chain) chain = k > 1 ? lib.store.capture_from(s, n1, int64_t(context.size()), lib.leaf[0]) : lib.leaf[0];
      Session r(model, engine);
      t = now_seconds();
      graft(r, *chain, lib.store.opener());
      reused = std::min(reused, now_seconds() - t);
    }
    std::printf("%3zu %7zu %11.3f %11.3f %6.1fx\n", k, context.size(), 1e3 * first, 1e3 * reused, first / reused);
  }
}

}  // namespace

int cmd_bench_compose(const Args& args) {
  const auto model = load_model(args);
  const EngineOptions engine = engine_options(args);
  const ComposeOptions o = compose_options(args);
  BlockLibrary lib;
  capture_library(lib, model, engine, o.seed);
  ComposeBench bench(model, engine, lib, o);
  std::mt19937_64 rng(o.seed);
  std::vector<Row> rows;
  for (const int64_t k : o.counts) rows.push_back(bench.measure(k, rng));
  print_agreement_table(*model, o, rows);
  print_chain_reuse_table(model, engine, lib);
  return 0;
}

}  // namespace kvg::cli
