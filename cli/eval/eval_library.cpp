#include "cli/eval/eval_library.hpp"

#include <algorithm>

#include "cli/eval/eval_verifier.hpp"
#include "common/error.hpp"
#include "storage/artifact_format.hpp"

namespace kvg::cli {

namespace {

bool ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }
bool ascii_punct(char c) { return (c >= 0x21 && c <= 0x2f) || (c >= 0x3a && c <= 0x40) || (c >= 0x5b && c <= 0x60) ||
                                  (c >= 0x7b && c <= 0x7e); }

// PostgreSQL's English stop words most likely in a question (the full list
// is longer; routing here is an approximation of the database's, exact on
// the generators' questions).
const std::set<std::string>& stop_words() {
  static const std::set<std::string> words = {
      "a", "about", "after", "all", "an", "and", "are", "as", "at", "be", "been", "before", "but", "by", "can",
      "did", "do", "does", "for", "from", "had", "has", "have", "he", "her", "him", "his", "how", "i", "if", "in",
      "into", "is", "it", "its", "me", "my", "no", "not", "of", "on", "or", "our", "she", "so", "than", "that",
      "the", "their", "them", "then", "there", "they", "this", "to", "was", "we", "were", "what", "when", "where",
      "which", "who", "whom", "why", "will", "with", "you", "your"};
  return words;
}

}  // namespace

std::string normalize_question(std::string_view question) {
  std::string out;
  bool space = false;
  for (const char c : question) {
    if (ascii_space(c)) {
      space = true;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    out += (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c;
  }
  size_t begin = 0, end = out.size();
  while (begin < end && (out[begin] == ' ' || ascii_punct(out[begin]))) ++begin;
  while (end > begin && (out[end - 1] == ' ' || ascii_punct(out[end - 1]))) --end;
  return out.substr(begin, end - begin);
}

std::set<std::string> routing_words(std::string_view text) {
  std::set<std::string> words;
  const std::string all = answer_words(text);
  size_t at = 0;
  while (at < all.size()) {
    size_t end = all.find(' ', at);
    if (end == std::string::npos) end = all.size();
    std::string word = all.substr(at, end - at);
    if (!stop_words().count(word)) words.insert(std::move(word));
    at = end + 1;
  }
  return words;
}

const char* EvalRoute::mode_name() const {
  switch (mode) {
    case Mode::Recurring: return "recurring";
    case Mode::Transfer: return "transfer";
    case Mode::Cold: break;
  }
  return "cold";
}

EvalLibrary::EvalLibrary(std::shared_ptr<const Model> model, EngineOptions options, KnowledgeTemplate tmpl,
                         double min_similarity, int max_entries)
    : model_(std::move(model)), options_(std::move(options)), tmpl_(std::move(tmpl)),
      min_similarity_(min_similarity), max_entries_(max_entries) {}

StoredPrefix EvalLibrary::graft_longest(Session& session, std::span<const int32_t> prompt) {
  const LinkLookup lookup = [this](const std::optional<Digest>& parent, std::span<const Digest> hashes) {
    std::vector<StoredLink> found;
    for (const Digest& h : hashes)
      if (const auto it = links_.find({parent, h}); it != links_.end())
        found.insert(found.end(), it->second.begin(), it->second.end());
    std::sort(found.begin(), found.end(), [](const StoredLink& a, const StoredLink& b) { return a.id < b.id; });
    return found;
  };
  StoredPrefix chain = longest_stored_prefix(prompt, {}, lookup);
  if (chain.leaf) chain.end = graft(session, *chain.leaf, artifacts_.opener(), prompt).n_tokens;
  return chain;
}

std::optional<Digest> EvalLibrary::store_links(const Session& session, std::optional<Digest> parent, int64_t from,
                                               std::span<const int64_t> ends) {
  for (const int64_t end : ends) {
    if (end <= from) continue;
    const Digest id = artifacts_.capture_from(session, from, end, parent);
    std::vector<uint32_t> own(session.tokens().begin() + from, session.tokens().begin() + end);
    std::vector<StoredLink>& at = links_[{parent, hash_token_ids(own)}];
    if (std::none_of(at.begin(), at.end(), [&](const StoredLink& l) { return l.id == id; }))
      at.push_back(StoredLink{id, end - from, hash_token_ids(own)});
    parent = id;
    from = end;
  }
  return parent;
}

Deposited EvalLibrary::learn(const std::string& question, const std::string& solution, const std::string& answer,
                             const std::string& verifier) {
  // A deposit passes when the solution contains the answer (contains), or
  // the answer is / matches the verifier's text (exact:, regex:).
  const bool passes = verifier == "contains" ? verify_answer(verifier, solution, answer)
                                             : verify_answer(verifier, answer, answer);
  if (!passes) return {};
  const std::string key = normalize_question(question);
  if (key.empty()) throw Error(ErrorCode::InvalidArgument, "the question \"" + question + "\" is empty once normalized");
  if (by_key_.count(key)) return {true, 0};
  const SegmentedPrompt prompt =
      tokenize_segments(*model_, knowledge_segments(tmpl_, {solution}, question), {}, tmpl_.markers);
  Session session(model_, options_);
  const StoredPrefix grafted = graft_longest(session, prompt.tokens);
  const std::span<const int32_t> rest = std::span<const int32_t>(prompt.tokens).subspan(size_t(grafted.end));
  if (!rest.empty()) session.prefill(rest, 0, LogitsFor::None, nullptr);
  auto entry = std::make_unique<EvalEntry>();
  entry->question = question;
  entry->solution = solution;
  entry->answer = answer;
  entry->verifier = verifier;
  entry->words = routing_words(question + "\n" + solution);
  const std::optional<Digest> leaf = store_links(session, grafted.leaf, grafted.end, prompt.ends);
  if (!leaf) throw Error(ErrorCode::Internal, "a deposit stored no artifact");
  entry->leaf = *leaf;
  by_key_[key] = entry.get();
  entries_.push_back(std::move(entry));
  return {true, int64_t(rest.size())};
}

EvalRoute EvalLibrary::route(const std::string& question) const {
  EvalRoute route;
  route.question = question;
  if (const auto it = by_key_.find(normalize_question(question)); it != by_key_.end()) {
    route.mode = EvalRoute::Mode::Recurring;
    route.question = it->second->question;
    route.entries.push_back(it->second);
    return route;
  }
  const std::set<std::string> words = routing_words(question);
  if (words.empty() || max_entries_ < 1) return route;
  std::vector<std::pair<double, const EvalEntry*>> related;
  for (const auto& e : entries_) {
    size_t shared = 0;
    for (const std::string& w : words) shared += e->words.count(w);
    const double similarity = double(shared) / double(words.size());
    if (similarity >= min_similarity_) related.emplace_back(similarity, e.get());
  }
  // Most similar first, ties by learning order (kvg.related_knowledge: ORDER BY similarity DESC, id).
  std::stable_sort(related.begin(), related.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  if (related.size() > size_t(max_entries_)) related.resize(size_t(max_entries_));
  // The most similar closest to the question: last in the prompt.
  for (auto it = related.rbegin(); it != related.rend(); ++it) route.entries.push_back(it->second);
  if (!route.entries.empty()) route.mode = EvalRoute::Mode::Transfer;
  return route;
}

}  // namespace kvg::cli
