// The "digit-rule" family: a hidden rule per family, f(d) = (a*d + b) mod 10
// with a in {1,3,7,9} and b in 0..9 (40 rules). A question names a family and
// four distinct digits ("K27 4192?"); the answer is f of each digit ("A8536").
// The worked solution restates the question, states the rule and every step
// ("K27 4192:a7b3|4*7=28+3=31>1|...|A1...", 75 characters), so it is long and
// the model that reads must decode it all when it solves a question cold,
// while a verified solution of the same question in context lets it answer
// in 6 tokens, and one of a related question (same family, other digits)
// tells it the rule.
//
// What a model can know cold: every rule goes by two family names. Training
// sets use only the first name (K10..K49) of 32 rules, so a model can learn
// those families' rules. Evaluation sets are half questions of those 32 rules
// ("seen" kinds: under either name, so cold succeeds where the name is one the
// model learned and fails where it is not) and half of the 8 rules training
// never uses ("unseen": cold can only guess the rule).
#include "cli/eval/eval_generator.hpp"

#include <array>
#include <unordered_set>

#include "common/error.hpp"

namespace kvg::cli {

namespace {

constexpr std::string_view kDigitRule = "digit-rule";
constexpr std::array<int, 4> kMultipliers = {1, 3, 7, 9};
constexpr int kRules = 40;  // rule r: a = kMultipliers[r / 10], b = r % 10
// Rules no training set draws from: two per multiplier, different offsets.
constexpr std::array<int, 8> kUnseenRules = {3, 8, 14, 19, 22, 27, 31, 36};
// A question is reserved for training when its hash is 0 mod this.
constexpr uint64_t kTrainingShare = 4;

// splitmix64: the same numbers on every platform and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n), without modulo bias.
  uint64_t below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    for (;;)
      if (const uint64_t x = next(); x < limit) return x % n;
  }

 private:
  uint64_t state_;
};

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : s) h = (h ^ uint8_t(c)) * 0x100000001b3ull;
  return h;
}

bool unseen(int rule) {
  for (const int r : kUnseenRules)
    if (r == rule) return true;
  return false;
}

// The family's name hides its rule: a fixed bijection per alias, the first
// onto K10..K49 (the only names training sets use), the second onto K50..K89
// (names no training set holds; tools/train-reader/train.py gives them only
// to renamed rows, each with another rule, so no name there recalls a rule).
std::string family_name(int rule, int alias) {
  return alias == 0 ? "K" + std::to_string(10 + (rule * 17 + 5) % kRules)
                    : "K" + std::to_string(50 + (rule * 13 + 7) % kRules);
}

std::string two_digits(int v) { return std::string(1, char('0' + v / 10)) + char('0' + v % 10); }

EvalItem digit_rule_item(int rule, int alias, const std::array<int, 4>& digits) {
  const int a = kMultipliers[size_t(rule / 10)], b = rule % 10;
  EvalItem item;
  item.family = family_name(rule, alias);
  item.kind = unseen(rule) ? "unseen" : "seen";
  item.question = item.family + " ";
  for (const int d : digits) item.question += char('0' + d);
  // The solution restates its question, so a model can tell whether the
  // solution in its context is of the question asked or of a related one.
  item.solution = item.question + ":a" + std::to_string(a) + "b" + std::to_string(b);
  item.question += "?";
  item.answer = "A";
  for (const int d : digits) {
    const int product = a * d, sum = product + b;
    item.solution += "|" + std::to_string(d) + "*" + std::to_string(a) + "=" + two_digits(product) + "+" +
                     std::to_string(b) + "=" + two_digits(sum) + ">" + char('0' + sum % 10);
    item.answer += char('0' + sum % 10);
  }
  item.solution += "|" + item.answer;
  item.verifier = "contains";
  return item;
}

std::vector<EvalItem> digit_rule(uint64_t seed, int64_t count, GeneratorSplit split) {
  // An evaluation set uses each digit tuple once (5040 of them, a quarter
  // of the questions reserved for training); a training set each question
  // once (32 families x 5040 tuples, a quarter of them). Both bounds leave
  // the draw below plenty of room, so it always finishes quickly.
  const int64_t kMaxCount = split == GeneratorSplit::Evaluation ? 2000 : 20000;
  if (count < 1 || count > kMaxCount)
    throw Error(ErrorCode::InvalidArgument, "--count must be 1.." + std::to_string(kMaxCount) + " for " +
                                                std::string(kDigitRule) + " (got " + std::to_string(count) + ")");
  std::vector<int> seen_rules, unseen_rules(kUnseenRules.begin(), kUnseenRules.end());
  for (int r = 0; r < kRules; ++r)
    if (!unseen(r)) seen_rules.push_back(r);
  Rng rng(seed ^ 0x6469676974ull);  // "digit": another family on the same seed draws other numbers
  std::vector<EvalItem> items;
  // Evaluation: digits only, so no two questions of a set share their digits
  // and routing by shared words finds only the question's own family.
  std::unordered_set<std::string> taken;
  while (int64_t(items.size()) < count) {
    // Evaluation sets are half seen, half unseen families; training sets
    // draw from the seen ones only.
    const bool pick_unseen = split == GeneratorSplit::Evaluation && rng.below(2) == 1;
    const std::vector<int>& rules = pick_unseen ? unseen_rules : seen_rules;
    const int rule = rules[rng.below(rules.size())];
    // Evaluation sets name a family by either alias; training sets by the first.
    const int alias = split == GeneratorSplit::Evaluation ? int(rng.below(2)) : 0;
    std::array<int, 10> pool = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    std::array<int, 4> digits{};
    for (int i = 0; i < 4; ++i) {
      const size_t j = size_t(i) + rng.below(uint64_t(10 - i));
      std::swap(pool[size_t(i)], pool[j]);
      digits[size_t(i)] = pool[size_t(i)];
    }
    EvalItem item = digit_rule_item(rule, alias, digits);
    // The split hashes the question under the rule's first name, so a
    // question reserved for training is reserved under both names.
    const std::string canonical = alias == 0 ? item.question : digit_rule_item(rule, 0, digits).question;
    const bool training = fnv1a(canonical) % kTrainingShare == 0;
    if (training != (split == GeneratorSplit::Training)) continue;
    const bool by_digits = split == GeneratorSplit::Evaluation;
    if (!taken.insert(by_digits ? item.question.substr(item.family.size() + 1, 4) : item.question).second) continue;
    items.push_back(std::move(item));
  }
  return items;
}

}  // namespace

std::string generator_names() { return std::string(kDigitRule); }

std::vector<EvalItem> generate_items(std::string_view name, uint64_t seed, int64_t count, GeneratorSplit split) {
  if (name == kDigitRule) return digit_rule(seed, count, split);
  throw Error(ErrorCode::InvalidArgument,
              "unknown --generator '" + std::string(name) + "' (known: " + generator_names() + ")");
}

}  // namespace kvg::cli
