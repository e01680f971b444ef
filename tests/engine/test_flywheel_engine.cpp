// The engine side of the knowledge flywheel: templates split into segments,
// segments tokenized so that a solution's tokens never depend on the question
// after it, the longest stored chain found from link hashes alone, and the
// answer cut at the end of its first line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/answer_line.hpp"
#include "engine/knowledge_prompt.hpp"
#include "engine/model.hpp"
#include "engine/prefix_search.hpp"
#include "engine/prompt.hpp"
#include "storage/artifact_format.hpp"
#include "tests/support/data_paths.hpp"
#include "tests/support/synth_fixture.hpp"
#include "tools/gguf_writer.hpp"
#include "tools/synth_model.hpp"

namespace kvg {
namespace {

// ---------------------------------------------------------------------------
// KnowledgeTemplate::parse and knowledge_segments

void expect_template_refused(const std::string& text) {
  try {
    KnowledgeTemplate::parse(text);
    ADD_FAILURE() << "template accepted: \"" << text << "\"";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << "template \"" << text << "\": " << e.what();
  }
}

TEST(KnowledgeTemplate, SplitsTheDefaultTemplate) {
  const auto t = KnowledgeTemplate::parse("{solution}\nQuestion: {question}\nAnswer:");
  EXPECT_EQ(t.head, "");
  EXPECT_EQ(t.middle, "\nQuestion: ");
  EXPECT_EQ(t.tail, "\nAnswer:");
}

TEST(KnowledgeTemplate, SplitsMultiLineHeadMiddleAndTail) {
  const auto t = KnowledgeTemplate::parse("Notes:\n\n{solution}\n\nQ: {question}\nThink.\nA:");
  EXPECT_EQ(t.head, "Notes:\n\n");
  EXPECT_EQ(t.middle, "\n\nQ: ");
  EXPECT_EQ(t.tail, "\nThink.\nA:");
}

TEST(KnowledgeTemplate, PlaceholdersAloneGiveEmptyParts) {
  const auto t = KnowledgeTemplate::parse("{solution}{question}");
  EXPECT_EQ(t.head, "");
  EXPECT_EQ(t.middle, "");
  EXPECT_EQ(t.tail, "");

  const auto u = KnowledgeTemplate::parse("Context {solution} -> {question}");
  EXPECT_EQ(u.head, "Context ");
  EXPECT_EQ(u.middle, " -> ");
  EXPECT_EQ(u.tail, "");
}

TEST(KnowledgeTemplate, RefusesMissingPlaceholders) {
  expect_template_refused("");
  expect_template_refused("Question: {question}\nAnswer:");
  expect_template_refused("{solution}\nAnswer:");
  expect_template_refused("{Solution} {question}");  // case matters
  expect_template_refused("{solution {question}");
}

TEST(KnowledgeTemplate, RefusesQuestionBeforeSolution) {
  expect_template_refused("{question}{solution}");
  expect_template_refused("Q: {question}\nContext: {solution}\nA:");
}

TEST(KnowledgeTemplate, RefusesRepeatedPlaceholders) {
  expect_template_refused("{solution}{solution}{question}");
  expect_template_refused("{solution} {question} {question}");
  expect_template_refused("{solution}\n{question}\n{solution}");
  expect_template_refused("{solution}{question}{solution}{question}");
}

TEST(KnowledgeSegments, ColdQuestionIsOneSegment) {
  const auto t = KnowledgeTemplate::parse("Facts: {solution}\nQuestion: {question}\nAnswer:");
  EXPECT_EQ(knowledge_segments(t, {}, "Why?"), (std::vector<std::string>{"Facts: \nQuestion: Why?\nAnswer:"}));
}

TEST(KnowledgeSegments, OneContextIsHeadSolutionThenTheRest) {
  const auto t = KnowledgeTemplate::parse("Facts: {solution}\nQuestion: {question}\nAnswer:");
  EXPECT_EQ(knowledge_segments(t, {"The sky is blue."}, "Why?"),
            (std::vector<std::string>{"Facts: The sky is blue.", "\nQuestion: Why?\nAnswer:"}));
}

TEST(KnowledgeSegments, TwoContextsAreSeparatedAtTheStartOfTheSecond) {
  const auto t = KnowledgeTemplate::parse("Facts: {solution}\nQuestion: {question}\nAnswer:");
  EXPECT_EQ(kContextSeparator, "\n");
  EXPECT_EQ(knowledge_segments(t, {"A is 1.", "B is 2."}, "What is A?"),
            (std::vector<std::string>{"Facts: A is 1.", "\nB is 2.", "\nQuestion: What is A?\nAnswer:"}));
  // The head appears once, before the first solution only.
  EXPECT_EQ(knowledge_segments(t, {"x", "y", "z"}, "q"),
            (std::vector<std::string>{"Facts: x", "\ny", "\nz", "\nQuestion: q\nAnswer:"}));
}

// ---------------------------------------------------------------------------
// The model's own template: the GGUF key kvg.knowledge_template

// A tiny synthetic model (f32) carrying `key_value` as kvg.knowledge_template
// (none when nullopt), written with the generator's metadata and weights.
std::string synth_with_template(const std::string& name, const std::optional<std::string>& key_value,
                                bool chatml = false) {
  SynthOptions o = test::tiny_synth_options();
  if (chatml) o.chat_template = "chatml";
  gguf::Writer w;
  add_synth_metadata(w, o, "template test");
  if (key_value) w.add_string(kKnowledgeTemplateKey, *key_value);
  const std::vector<SynthTensor> tensors = synth_tensors(o);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const SynthTensor& t = tensors[i];
    uint64_t n = 1;
    for (const uint64_t d : t.ne) n *= d;
    std::vector<uint8_t> bytes(n * sizeof(float));
    for (uint64_t e = 0; e < n; ++e) {
      const float x = synth_weight(o.seed, i, t, e);
      std::memcpy(bytes.data() + e * sizeof(float), &x, sizeof x);
    }
    w.add_tensor(t.name, t.ne, gguf::TensorType::F32, std::move(bytes));
  }
  const std::string path = test::temp_dir("knowledge_key_" + name) + "/model.gguf";
  w.write(path);
  return path;
}

TEST(ModelKnowledgeTemplate, AbsentKeyIsNullopt) {
  const auto model = Model::load(synth_with_template("absent", std::nullopt));
  EXPECT_FALSE(model->knowledge_template().has_value());
  EXPECT_EQ(knowledge_template_source(*model, kDefaultKnowledgeTemplate), KnowledgeTemplateSource::Default);
  const KnowledgeTemplate t = knowledge_template_for(*model, kDefaultKnowledgeTemplate);
  EXPECT_EQ(t.middle, "\nQuestion: ");
  EXPECT_EQ(t.tail, "\nAnswer:");
}

TEST(ModelKnowledgeTemplate, TheDefaultGivesTheModelsTemplate) {
  const auto model = Model::load(synth_with_template("reader", "{solution}\n{question}"));
  ASSERT_TRUE(model->knowledge_template().has_value());
  EXPECT_EQ(*model->knowledge_template(), "{solution}\n{question}");
  EXPECT_EQ(knowledge_template_source(*model, kDefaultKnowledgeTemplate), KnowledgeTemplateSource::Model);
  const KnowledgeTemplate t = knowledge_template_for(*model, kDefaultKnowledgeTemplate);
  EXPECT_EQ(t.head, "");
  EXPECT_EQ(t.middle, "\n");
  EXPECT_EQ(t.tail, "");
  EXPECT_TRUE(t.markers.empty());
  EXPECT_EQ(knowledge_segments(t, {"S"}, "Q"), (std::vector<std::string>{"S", "\nQ"}));
}

TEST(ModelKnowledgeTemplate, AnExplicitTemplateWins) {
  const auto model = Model::load(synth_with_template("explicit", "{solution}\n{question}"));
  EXPECT_EQ(knowledge_template_source(*model, "Facts: {solution} Q: {question} A:"), KnowledgeTemplateSource::Setting);
  const KnowledgeTemplate t = knowledge_template_for(*model, "Facts: {solution} Q: {question} A:");
  EXPECT_EQ(t.head, "Facts: ");
  EXPECT_EQ(t.middle, " Q: ");
  EXPECT_EQ(t.tail, " A:");
}

TEST(ModelKnowledgeTemplate, TheModelsTemplateComesBeforeTheChatFormat) {
  const auto chat = Model::load(synth_with_template("chat_only", std::nullopt, true));
  EXPECT_EQ(knowledge_template_source(*chat, kDefaultKnowledgeTemplate), KnowledgeTemplateSource::ChatFormat);
  EXPECT_FALSE(knowledge_template_for(*chat, kDefaultKnowledgeTemplate).markers.empty());
  const auto both = Model::load(synth_with_template("chat_and_key", "<{solution}|{question}>", true));
  EXPECT_EQ(knowledge_template_source(*both, kDefaultKnowledgeTemplate), KnowledgeTemplateSource::Model);
  const KnowledgeTemplate t = knowledge_template_for(*both, kDefaultKnowledgeTemplate);
  EXPECT_EQ(t.head, "<");
  EXPECT_EQ(t.middle, "|");
  EXPECT_EQ(t.tail, ">");
  EXPECT_TRUE(t.markers.empty());
  EXPECT_TRUE(t.stop_tokens.empty());
}

TEST(ModelKnowledgeTemplate, AMalformedKeyIsRefusedAtLoadByName) {
  for (const std::string bad : {"{question} then {solution}", "no placeholders", "{solution}{solution}{question}"}) {
    const std::string path = synth_with_template("malformed", bad);
    try {
      Model::load(path);
      ADD_FAILURE() << "loaded a model whose kvg.knowledge_template is \"" << bad << "\"";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Corrupt) << e.what();
      EXPECT_NE(std::string(e.what()).find("kvg.knowledge_template"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("not a knowledge template"), std::string::npos) << e.what();
    }
  }
}

TEST(ModelKnowledgeTemplate, AKeyThatIsNotAStringIsRefusedAtLoadByName) {
  SynthOptions o = test::tiny_synth_options();
  gguf::Writer w;
  add_synth_metadata(w, o, "template test");
  w.add_u32(kKnowledgeTemplateKey, 7);
  const std::vector<SynthTensor> tensors = synth_tensors(o);
  for (size_t i = 0; i < tensors.size(); ++i) {
    uint64_t n = 1;
    for (const uint64_t d : tensors[i].ne) n *= d;
    w.add_tensor(tensors[i].name, tensors[i].ne, gguf::TensorType::F32, std::vector<uint8_t>(n * sizeof(float)));
  }
  const std::string path = test::temp_dir("knowledge_key_u32") + "/model.gguf";
  w.write(path);
  try {
    Model::load(path);
    ADD_FAILURE() << "loaded a model whose kvg.knowledge_template is a number";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kvg.knowledge_template"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not a string"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------
// tokenize_segments on stories260K

class StoriesModel : public ::testing::Test {
 protected:
  void SetUp() override {
    KVG_REQUIRE_TEST_DATA(test::kStories260K);
    model_ = Model::load(test::data_path(test::kStories260K));
  }
  const Tokenizer& tok() const { return model_->tokenizer(); }
  std::shared_ptr<const Model> model_;
};

bool starts_with(const std::vector<int32_t>& v, const std::vector<int32_t>& prefix) {
  return v.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), v.begin());
}

void expect_well_formed(const SegmentedPrompt& p, int32_t bos) {
  ASSERT_FALSE(p.tokens.empty());
  ASSERT_FALSE(p.ends.empty());
  EXPECT_EQ(p.tokens.front(), bos);
  for (size_t i = 1; i < p.ends.size(); ++i) EXPECT_LT(p.ends[i - 1], p.ends[i]) << "ends[" << i << "]";
  EXPECT_GT(p.ends.front(), 0);
  EXPECT_EQ(p.ends.back(), int64_t(p.tokens.size()));
}

TEST_F(StoriesModel, SegmentsAreFreshThenContinuations) {
  ASSERT_TRUE(tok().add_bos());
  const auto t = KnowledgeTemplate::parse("Facts: {solution}\nQuestion: {question}\nAnswer:");
  const auto segments = knowledge_segments(t, {"Tim had a red ball.", "Sue had a cat."}, "What did Tim have?");
  ASSERT_EQ(segments.size(), 3u);
  const SegmentedPrompt p = tokenize_segments(*model_, segments);
  expect_well_formed(p, tok().bos());
  ASSERT_EQ(p.ends.size(), 3u);

  // Segment by segment: BOS + encode for the first, encode_continuation after.
  std::vector<int32_t> expected = fresh_prompt(*model_, segments[0]);
  EXPECT_EQ(p.ends[0], int64_t(expected.size()));
  for (size_t i = 1; i < segments.size(); ++i) {
    const auto more = tok().encode_continuation(segments[i]);
    expected.insert(expected.end(), more.begin(), more.end());
    EXPECT_EQ(p.ends[i], int64_t(expected.size())) << "segment " << i;
  }
  EXPECT_EQ(p.tokens, expected);
  // Decoding gives back the whole text.
  std::string joined;
  for (const auto& s : segments) joined += s;
  EXPECT_EQ(tok().decode(p.tokens), joined);
}

TEST_F(StoriesModel, ColdPromptIsOneSegment) {
  const auto t = KnowledgeTemplate::parse("Facts: {solution}\nQuestion: {question}\nAnswer:");
  const SegmentedPrompt p = tokenize_segments(*model_, knowledge_segments(t, {}, "Who is Tim?"));
  expect_well_formed(p, tok().bos());
  EXPECT_EQ(p.ends.size(), 1u);
  EXPECT_EQ(p.tokens, fresh_prompt(*model_, "Facts: \nQuestion: Who is Tim?\nAnswer:"));
}

TEST_F(StoriesModel, EmptySegmentAddsNoBoundary) {
  const SegmentedPrompt p = tokenize_segments(*model_, {"Once upon a time", "", " there was a dog"});
  expect_well_formed(p, tok().bos());
  ASSERT_EQ(p.ends.size(), 2u);
  EXPECT_EQ(p.ends[0], int64_t(fresh_prompt(*model_, "Once upon a time").size()));
}

// The key property: the tokens of [head+solution][middle+question+tail] begin
// with exactly the tokens of [head+solution], whatever the question.
void expect_solution_is_a_token_prefix(const Model& model, const std::string& tmpl_text, const std::string& solution,
                                       const std::vector<std::string>& questions) {
  const auto t = KnowledgeTemplate::parse(tmpl_text);
  const SegmentedPrompt alone = tokenize_segments(model, {t.head + solution});
  ASSERT_EQ(alone.ends.size(), 1u);
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& q : questions) {
    const auto segments = knowledge_segments(t, {solution}, q);
    ASSERT_EQ(segments.size(), 2u);
    ASSERT_EQ(segments[0], t.head + solution);
    const SegmentedPrompt p = tokenize_segments(model, segments);
    expect_well_formed(p, model.tokenizer().bos());
    EXPECT_TRUE(starts_with(p.tokens, alone.tokens)) << "question \"" << q << "\"";
    ASSERT_EQ(p.ends.size(), 2u);
    EXPECT_EQ(p.ends[0], int64_t(alone.tokens.size())) << "question \"" << q << "\"";
    prompts.push_back(p.tokens);
  }
  // The questions differ, so the prompts do; only the solution part is shared.
  for (size_t i = 1; i < prompts.size(); ++i) EXPECT_NE(prompts[0], prompts[i]);
}

TEST_F(StoriesModel, SolutionTokensDoNotDependOnTheQuestion) {
  expect_solution_is_a_token_prefix(*model_, "Facts: {solution}\nQuestion: {question}\nAnswer:",
                                    "Lily found a big red ball in the park.",
                                    {"What did Lily find?", "Where was the ball?"});
}

// A template with nothing between solution and question: a monolithic
// encoding would merge across the boundary ("ti" + "me" -> "time"), the
// segmented one must not.
TEST_F(StoriesModel, SolutionTokensAreStableEvenWhereTextWouldMerge) {
  const std::string solution = "Once upon a ti";
  const auto t = KnowledgeTemplate::parse("{solution}{question}");
  // Shows the case is a real one: encoded as one text, the solution's tokens
  // are not a prefix of the prompt's.
  const auto whole = fresh_prompt(*model_, solution + "me there was a dog");
  const auto solution_only = fresh_prompt(*model_, solution);
  EXPECT_FALSE(starts_with(whole, solution_only)) << "the vocabulary no longer merges across this boundary";
  expect_solution_is_a_token_prefix(*model_, "{solution}{question}", solution, {"me there was a dog", "ny cat"});
}

// ---------------------------------------------------------------------------
// longest_stored_prefix over an in-memory link index

Digest make_id(uint8_t first, uint8_t second = 0) {
  Digest d{};
  d[0] = first;
  d[1] = second;
  d[31] = 0xA5;  // never all zero
  return d;
}

Digest hash_tokens(const std::vector<int32_t>& tokens) {
  std::vector<uint32_t> ids(tokens.begin(), tokens.end());
  return hash_token_ids(ids);
}

// A store's link index kept in memory: (parent, hash of the link's own
// tokens) -> link. Counts lookups and records their parents.
struct FakeLinks {
  struct Entry {
    std::optional<Digest> parent;
    StoredLink link;
  };
  std::vector<Entry> entries;
  bool reversed = false;       // answer in the opposite order
  bool ignore_hashes = false;  // a lying catalog: every child of the parent, whatever its tokens
  int lookups = 0;
  std::vector<std::optional<Digest>> parents_asked;

  Digest add(std::optional<Digest> parent, const std::vector<int32_t>& tokens, Digest id) {
    entries.push_back({parent, StoredLink{id, int64_t(tokens.size()), hash_tokens(tokens)}});
    return id;
  }
  // A link that claims `n_tokens` but whose hash is that of `tokens`.
  void add_raw(std::optional<Digest> parent, Digest id, int64_t n_tokens, const Digest& tokens_sha256) {
    entries.push_back({parent, StoredLink{id, n_tokens, tokens_sha256}});
  }

  LinkLookup lookup() {
    return [this](const std::optional<Digest>& parent, std::span<const Digest> hashes) {
      ++lookups;
      parents_asked.push_back(parent);
      std::vector<StoredLink> out;
      for (const Entry& e : entries) {
        if (e.parent != parent) continue;
        if (!ignore_hashes && std::find(hashes.begin(), hashes.end(), e.link.tokens_sha256) == hashes.end()) continue;
        out.push_back(e.link);
      }
      if (reversed) std::reverse(out.begin(), out.end());
      return out;
    };
  }
};

const std::vector<int32_t> kPrompt = {1, 10, 11, 12, 13, 14, 15, 16};

StoredPrefix search(FakeLinks& links, const StoredPrefix& from = {}, int max_lookups = 64) {
  return longest_stored_prefix(kPrompt, from, links.lookup(), max_lookups);
}

TEST(LongestStoredPrefix, EmptyStoreFindsNothing) {
  FakeLinks links;
  const StoredPrefix r = search(links);
  EXPECT_FALSE(r.leaf.has_value());
  EXPECT_EQ(r.end, 0);
  EXPECT_EQ(links.lookups, 1);
  ASSERT_EQ(links.parents_asked.size(), 1u);
  EXPECT_FALSE(links.parents_asked[0].has_value());  // roots first
}

TEST(LongestStoredPrefix, StoredChainsThatDoNotBeginThePromptAreIgnored) {
  FakeLinks links;
  links.add(std::nullopt, {1, 10, 99}, make_id(1));
  links.add(std::nullopt, {2, 10}, make_id(2));
  links.add(make_id(7), {1, 10}, make_id(3));  // right tokens, but not a root
  const StoredPrefix r = search(links);
  EXPECT_FALSE(r.leaf.has_value());
  EXPECT_EQ(r.end, 0);
}

TEST(LongestStoredPrefix, MatchingRoot) {
  FakeLinks links;
  const Digest root = links.add(std::nullopt, {1, 10, 11}, make_id(1));
  const StoredPrefix r = search(links);
  ASSERT_TRUE(r.leaf.has_value());
  EXPECT_EQ(*r.leaf, root);
  EXPECT_EQ(r.end, 3);
}

TEST(LongestStoredPrefix, WholePromptStoredAsARoot) {
  FakeLinks links;
  const Digest root = links.add(std::nullopt, kPrompt, make_id(1));
  const StoredPrefix r = search(links);
  ASSERT_TRUE(r.leaf.has_value());
  EXPECT_EQ(*r.leaf, root);
  EXPECT_EQ(r.end, int64_t(kPrompt.size()));
  EXPECT_EQ(links.lookups, 1);  // nothing can continue a chain that covers the prompt
}

TEST(LongestStoredPrefix, TwoLinkChainBeatsItsRoot) {
  FakeLinks links;
  const Digest root = links.add(std::nullopt, {1, 10}, make_id(1));
  const Digest child = links.add(root, {11, 12}, make_id(2));
  links.add(root, {11, 99}, make_id(3));  // a sibling that diverges
  const StoredPrefix r = search(links);
  ASSERT_TRUE(r.leaf.has_value());
  EXPECT_EQ(*r.leaf, child);
  EXPECT_EQ(r.end, 4);
}

TEST(LongestStoredPrefix, ShorterFirstLinkThatLeadsFurtherWins) {
  for (bool reversed : {false, true}) {
    FakeLinks links;
    links.reversed = reversed;
    const Digest short_root = links.add(std::nullopt, {1, 10}, make_id(1));
    links.add(std::nullopt, {1, 10, 11, 12}, make_id(2));  // longer, but a dead end
    const Digest far = links.add(short_root, {11, 12, 13}, make_id(3));
    const StoredPrefix r = search(links);
    ASSERT_TRUE(r.leaf.has_value());
    EXPECT_EQ(*r.leaf, far) << "reversed " << reversed;
    EXPECT_EQ(r.end, 5) << "reversed " << reversed;
  }
}

TEST(LongestStoredPrefix, LongerRootBeatsAShorterChain) {
  FakeLinks links;
  const Digest a = links.add(std::nullopt, {1, 10}, make_id(1));
  links.add(a, {11}, make_id(2));                                        // ends at 3
  const Digest b = links.add(std::nullopt, {1, 10, 11, 12, 13}, make_id(9));  // ends at 5
  const StoredPrefix r = search(links);
  ASSERT_TRUE(r.leaf.has_value());
  EXPECT_EQ(*r.leaf, b);
  EXPECT_EQ(r.end, 5);
}

// The search must check the catalog's hash itself: a link offered for a
// parent whose tokens diverge from the prompt is not used.
TEST(LongestStoredPrefix, DivergingLinksOfferedByTheCatalogAreNotUsed) {
  for (bool reversed : {false, true}) {
    FakeLinks links;
    links.ignore_hashes = true;
    links.reversed = reversed;
    const Digest root = links.add(std::nullopt, {1, 10}, make_id(1));
    links.add(std::nullopt, {1, 10, 11, 99, 13, 14}, make_id(2));  // diverges at position 3
    const Digest good = links.add(root, {11}, make_id(3));
    links.add(root, {11, 12, 13, 14, 99}, make_id(4));  // diverges at its last token
    // Claims 4 tokens but carries the hash of the 3 that match.
    links.add_raw(root, make_id(5), 4, hash_tokens({11, 12, 13}));
    // Longer than what is left of the prompt.
    links.add_raw(root, make_id(6), 7, hash_tokens({11, 12, 13, 14, 15, 16}));
    links.add_raw(root, make_id(7), 0, hash_tokens({}));  // holds nothing
    const StoredPrefix r = search(links);
    ASSERT_TRUE(r.leaf.has_value());
    EXPECT_EQ(*r.leaf, good) << "reversed " << reversed;
    EXPECT_EQ(r.end, 3) << "reversed " << reversed;
  }
}

TEST(LongestStoredPrefix, TiesGoToTheSmallestLeafWhateverTheOrder) {
  // Two chains ending at 4: a single root and a root + child.
  for (bool reversed : {false, true}) {
    for (bool single_is_smaller : {false, true}) {
      FakeLinks links;
      links.reversed = reversed;
      const Digest single = make_id(single_is_smaller ? 0x10 : 0x90);
      const Digest chained = make_id(single_is_smaller ? 0x90 : 0x10);
      links.add(std::nullopt, {1, 10, 11, 12}, single);
      const Digest root = links.add(std::nullopt, {1, 10}, make_id(0x50));
      links.add(root, {11, 12}, chained);
      const StoredPrefix r = search(links);
      ASSERT_TRUE(r.leaf.has_value());
      EXPECT_EQ(*r.leaf, make_id(0x10)) << "reversed " << reversed << " single_is_smaller " << single_is_smaller;
      EXPECT_EQ(r.end, 4);
    }
  }
  // Equal leaves but for a later byte, several siblings with the same tokens.
  for (bool reversed : {false, true}) {
    FakeLinks links;
    links.reversed = reversed;
    links.add(std::nullopt, {1, 10, 11}, make_id(0x20, 3));
    links.add(std::nullopt, {1, 10, 11}, make_id(0x20, 1));
    links.add(std::nullopt, {1, 10, 11}, make_id(0x20, 2));
    const StoredPrefix r = search(links);
    ASSERT_TRUE(r.leaf.has_value());
    EXPECT_EQ(*r.leaf, make_id(0x20, 1)) << "reversed " << reversed;
    EXPECT_EQ(r.end, 3);
  }
}

TEST(LongestStoredPrefix, ContinuesFromAKnownPrefix) {
  FakeLinks links;
  const Digest a = links.add(std::nullopt, {1, 10}, make_id(1));
  const Digest b = links.add(a, {11, 12}, make_id(2));
  links.add(std::nullopt, {1, 10, 11, 12, 13, 14}, make_id(3));  // longer, but not under `a`
  const StoredPrefix r = search(links, StoredPrefix{a, 2});
  ASSERT_TRUE(r.leaf.has_value());
  EXPECT_EQ(*r.leaf, b);
  EXPECT_EQ(r.end, 4);
  ASSERT_FALSE(links.parents_asked.empty());
  ASSERT_TRUE(links.parents_asked[0].has_value());
  EXPECT_EQ(*links.parents_asked[0], a);
  for (const auto& p : links.parents_asked) EXPECT_TRUE(p.has_value()) << "asked for roots";
}

TEST(LongestStoredPrefix, KnownPrefixWithNoContinuationIsReturnedAsIs) {
  FakeLinks links;
  const Digest a = links.add(std::nullopt, {1, 10}, make_id(1));
  links.add(a, {99}, make_id(2));
  const StoredPrefix r = search(links, StoredPrefix{a, 2});
  ASSERT_TRUE(r.leaf.has_value());
  EXPECT_EQ(*r.leaf, a);
  EXPECT_EQ(r.end, 2);
}

// A chain of one-token links over the whole prompt: each lookup extends it by
// one link, so the bound on lookups is the bound on the chain found.
TEST(LongestStoredPrefix, RespectsMaxLookups) {
  auto build = [](FakeLinks& links) {
    std::optional<Digest> parent;
    for (size_t i = 0; i < kPrompt.size(); ++i) parent = links.add(parent, {kPrompt[i]}, make_id(uint8_t(i + 1)));
  };
  for (int max : {1, 3, 5}) {
    FakeLinks links;
    build(links);
    const StoredPrefix r = search(links, {}, max);
    EXPECT_EQ(links.lookups, max);
    ASSERT_TRUE(r.leaf.has_value());
    EXPECT_EQ(r.end, max);
    EXPECT_EQ(*r.leaf, make_id(uint8_t(max)));
  }
  {
    FakeLinks links;
    build(links);
    const StoredPrefix r = search(links, {}, 0);
    EXPECT_EQ(links.lookups, 0);
    EXPECT_FALSE(r.leaf.has_value());
    EXPECT_EQ(r.end, 0);
  }
  {
    FakeLinks links;
    build(links);
    const StoredPrefix r = search(links);  // default bound: room for the whole chain
    EXPECT_EQ(r.end, int64_t(kPrompt.size()));
    EXPECT_EQ(links.lookups, int(kPrompt.size()));  // the full chain is not looked past
  }
}

// A wide store: many matching siblings at every level. The bound holds even
// when every lookup finds several children.
TEST(LongestStoredPrefix, MaxLookupsBoundsAWideSearch) {
  FakeLinks links;
  std::vector<std::optional<Digest>> level{std::nullopt};
  uint8_t next = 1;
  for (size_t depth = 0; depth < 4; ++depth) {
    std::vector<std::optional<Digest>> below;
    for (const auto& parent : level)
      for (int copy = 0; copy < 3; ++copy) below.push_back(links.add(parent, {kPrompt[depth]}, make_id(next++)));
    level = std::move(below);
  }
  const StoredPrefix r = search(links, {}, 10);
  EXPECT_EQ(links.lookups, 10);
  EXPECT_GE(r.end, 1);
  EXPECT_LE(r.end, 4);
}

// ---------------------------------------------------------------------------
// first_line and AnswerLine

TEST(FirstLine, TakesTheFirstLineWithVisibleText) {
  EXPECT_EQ(first_line("Paris\nand more"), "Paris");
  EXPECT_EQ(first_line("\n\n  \nParis is big.\nMore."), "Paris is big.");
  EXPECT_EQ(first_line("  \t Paris \t \nx"), "Paris");
  EXPECT_EQ(first_line("The end"), "The end");
  EXPECT_EQ(first_line("\n \n  The end  "), "The end");
  EXPECT_EQ(first_line("a b\r\nc"), "a b");
  EXPECT_EQ(first_line(""), "");
  EXPECT_EQ(first_line(" \n\t\n  "), "");
  EXPECT_EQ(first_line("\n"), "");
}

// Feeds `tokens` one by one; returns the index of the first feed that
// answered false (tokens.size() when none did).
size_t feed_until_complete(AnswerLine& line, const std::vector<int32_t>& tokens) {
  for (size_t i = 0; i < tokens.size(); ++i)
    if (!line.feed(tokens[i])) return i;
  return tokens.size();
}

// Index of the first token whose decoded text holds a newline after visible
// text, found from the tokenizer's own decode of each prefix.
size_t newline_after_text(const Tokenizer& tok, int32_t previous, const std::vector<int32_t>& tokens) {
  std::vector<int32_t> prefix{previous};
  for (size_t i = 0; i < tokens.size(); ++i) {
    prefix.push_back(tokens[i]);
    const std::string text = tok.decode(prefix);
    const size_t nl = text.rfind('\n');
    if (nl != std::string::npos && text.substr(0, nl).find_first_not_of(" \t\r\n") != std::string::npos) return i;
  }
  return tokens.size();
}

TEST_F(StoriesModel, AnswerLineStopsAtTheNewlineAfterText) {
  const std::vector<int32_t> tokens = tok().encode_continuation(" Lily was happy.\nThen she went home.");
  const size_t expected = newline_after_text(tok(), tok().bos(), tokens);
  ASSERT_LT(expected, tokens.size());
  ASSERT_GT(expected, 0u);
  EXPECT_NE(tok().decode_piece(tokens[expected], tokens[expected - 1]).find('\n'), std::string::npos);

  AnswerLine line(tok(), tok().bos());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const bool more = line.feed(tokens[i]);
    EXPECT_EQ(more, i < expected) << "token " << i;
    if (i == expected) {
      EXPECT_EQ(line.answer(), "Lily was happy.");
    }
  }
  // The answer stays the first line whatever comes after.
  EXPECT_EQ(line.answer(), "Lily was happy.");
}

TEST_F(StoriesModel, AnswerLineSkipsLeadingBlankLines) {
  const std::vector<int32_t> tokens = tok().encode_continuation("\n\n \nThe dog ran.\nThe end.");
  const size_t expected = newline_after_text(tok(), tok().bos(), tokens);
  ASSERT_LT(expected, tokens.size());
  // The blank lines alone do not complete the answer.
  size_t blank_newlines = 0;
  for (size_t i = 0; i < expected; ++i) {
    if (tok().decode_piece(tokens[i], i ? tokens[i - 1] : tok().bos()).find('\n') != std::string::npos) ++blank_newlines;
  }
  EXPECT_GE(blank_newlines, 1u);

  AnswerLine line(tok(), tok().bos());
  EXPECT_EQ(feed_until_complete(line, tokens), expected);
  EXPECT_EQ(line.answer(), "The dog ran.");
}

TEST_F(StoriesModel, AnswerLineWithoutNewlineNeverCompletes) {
  const std::vector<int32_t> tokens = tok().encode_continuation(" The cat sat on the mat.");
  AnswerLine line(tok(), tok().bos());
  EXPECT_EQ(feed_until_complete(line, tokens), tokens.size());
  EXPECT_EQ(line.answer(), "The cat sat on the mat.");
}

TEST_F(StoriesModel, AnswerLineAfterAPromptTokenKeepsItsFirstSpaceButTrimsIt) {
  // After a prompt token (not BOS) the first piece's leading space is text;
  // the answer is trimmed all the same.
  const auto prompt = fresh_prompt(*model_, "Answer:");
  const std::vector<int32_t> tokens = tok().encode_continuation(" Tom\nBen");
  AnswerLine line(tok(), prompt.back());
  const size_t done = feed_until_complete(line, tokens);
  EXPECT_EQ(done, newline_after_text(tok(), prompt.back(), tokens));
  EXPECT_LT(done, tokens.size());
  EXPECT_EQ(line.answer(), "Tom");
}

}  // namespace
}  // namespace kvg
