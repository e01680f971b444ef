// Chat formats: recognition of real templates (tests/data/chat-templates),
// the exact layout of each format, text and token by token, the plain
// fallback, the named errors, the messages JSON, stopping at the end of a
// turn, and the flywheel's knowledge template following the chat format.
#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/error.hpp"
#include "engine/chat_messages.hpp"
#include "engine/chat_prompt.hpp"
#include "engine/chat_template.hpp"
#include "engine/generate.hpp"
#include "engine/knowledge_prompt.hpp"
#include "tests/support/data_paths.hpp"
#include "tests/support/synth_fixture.hpp"
#include "tools/synth_model.hpp"

namespace kvg {
namespace {

std::string read_template(const std::string& name) {
  std::ifstream in(test::data_path("chat-templates/" + name), std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The error `f` throws, with its code; fails the test when it throws none.
template <typename F>
Error thrown(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no kvg::Error thrown";
  return Error(ErrorCode::Internal, "");
}

const std::vector<ChatMessage> kConversation = {
    {"system", "You are terse."},
    {"user", "Hello"},
    {"assistant", " Hi there "},
    {"user", "Who are you?"},
};
const std::vector<ChatMessage> kNoSystem(kConversation.begin() + 1, kConversation.end());

// ---------------------------------------------------------------------------
// Recognition of real templates

struct Real {
  const char* file;
  ChatFormat format;
  SystemTurn system;
  const char* default_system;
};

class RealTemplates : public ::testing::TestWithParam<Real> {};

TEST_P(RealTemplates, AreRecognisedByTheirMarkers) {
  const Real& r = GetParam();
  KVG_REQUIRE_TEST_DATA(std::string("chat-templates/") + r.file);
  const std::string t = read_template(r.file);
  ASSERT_FALSE(t.empty());
  const std::optional<ChatStyle> style = recognise_chat_template(t);
  ASSERT_TRUE(style.has_value()) << r.file;
  EXPECT_EQ(style->format, r.format) << r.file;
  EXPECT_EQ(style->system, r.system) << r.file;
  EXPECT_EQ(style->default_system, r.default_system) << r.file;
  EXPECT_EQ(choose_chat_style(t, "auto").format, r.format);
}

INSTANTIATE_TEST_SUITE_P(
    ChatTemplate, RealTemplates,
    ::testing::Values(
        Real{"qwen2.5-instruct.jinja", ChatFormat::ChatML, SystemTurn::Own,
             "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."},
        Real{"smollm2-instruct.jinja", ChatFormat::ChatML, SystemTurn::Own,
             "You are a helpful AI assistant named SmolLM, trained by Hugging Face"},
        Real{"llama-3.2-instruct.jinja", ChatFormat::Llama3, SystemTurn::Own, ""},
        Real{"gemma-2-it.jinja", ChatFormat::Gemma, SystemTurn::Refused, ""},
        Real{"gemma-3-it.jinja", ChatFormat::Gemma, SystemTurn::IntoFirstUser, ""},
        Real{"phi-3.5-mini-instruct.jinja", ChatFormat::Phi3, SystemTurn::Own, ""},
        Real{"phi-3-mini-instruct.jinja", ChatFormat::Phi3, SystemTurn::Refused, ""},
        Real{"mistral-7b-instruct-v0.2.jinja", ChatFormat::Mistral, SystemTurn::Refused, ""}));

TEST(ChatTemplate, SynthChatmlTemplateIsChatml) {
  const auto s = recognise_chat_template(kSynthChatmlTemplate);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->format, ChatFormat::ChatML);
  EXPECT_EQ(s->default_system, "");
}

// ---------------------------------------------------------------------------
// Layout as text, each format (what the real template prints)

std::string text_of(const ChatStyle& s, const std::vector<ChatMessage>& m) { return chat_text(lay_out_chat(s, m)); }

ChatStyle style(ChatFormat f, SystemTurn system = SystemTurn::Own, std::string default_system = "") {
  return ChatStyle{f, system, std::move(default_system)};
}

TEST(ChatLayout, ChatmlText) {
  EXPECT_EQ(text_of(style(ChatFormat::ChatML), kConversation),
            "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
            "<|im_start|>assistant\n Hi there <|im_end|>\n<|im_start|>user\nWho are you?<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatLayout, ChatmlWritesTheTemplatesDefaultSystemOnlyWhenNoneIsGiven) {
  const ChatStyle s = style(ChatFormat::ChatML, SystemTurn::Own, "Be kind.");
  EXPECT_EQ(text_of(s, {{"user", "Hi"}}),
            "<|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(text_of(s, {{"system", "Be brief."}, {"user", "Hi"}}),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatLayout, Llama3TextTrimsContent) {
  EXPECT_EQ(text_of(style(ChatFormat::Llama3), kConversation),
            "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWho are you?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatLayout, GemmaTextCallsTheAssistantModel) {
  EXPECT_EQ(text_of(style(ChatFormat::Gemma, SystemTurn::Refused), kNoSystem),
            "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n"
            "<start_of_turn>user\nWho are you?<end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatLayout, Gemma3PutsTheSystemTextIntoTheFirstUserTurn) {
  EXPECT_EQ(text_of(style(ChatFormat::Gemma, SystemTurn::IntoFirstUser), kConversation),
            "<start_of_turn>user\nYou are terse.\n\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n"
            "<start_of_turn>user\nWho are you?<end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatLayout, Phi3Text) {
  EXPECT_EQ(text_of(style(ChatFormat::Phi3), kConversation),
            "<|system|>\nYou are terse.<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\n Hi there <|end|>\n"
            "<|user|>\nWho are you?<|end|>\n<|assistant|>\n");
  // Phi-3.5 writes no turn for an empty system message.
  EXPECT_EQ(text_of(style(ChatFormat::Phi3), {{"system", ""}, {"user", "Hi"}}), "<|user|>\nHi<|end|>\n<|assistant|>\n");
}

TEST(ChatLayout, MistralText) {
  EXPECT_EQ(text_of(style(ChatFormat::Mistral, SystemTurn::Refused), kNoSystem),
            "[INST] Hello [/INST] Hi there </s>[INST] Who are you? [/INST]");
}

TEST(ChatLayout, PlainFallbackForAModelWithoutTemplate) {
  const ChatStyle s = choose_chat_style("", "auto");
  EXPECT_EQ(s.format, ChatFormat::Plain);
  EXPECT_EQ(text_of(s, kConversation),
            "You are terse.\n\nUser: Hello\nAssistant:  Hi there \nUser: Who are you?\nAssistant:");
  const auto segments = lay_out_chat(s, kConversation);
  for (const ChatSegment& seg : segments) EXPECT_FALSE(seg.marker);
}

TEST(ChatLayout, MarkersAreSegmentsOfTheirOwn) {
  const auto segs = lay_out_chat(style(ChatFormat::ChatML), {{"user", "Hi"}});
  const std::vector<ChatSegment> want = {{"<|im_start|>", true}, {"user\nHi", false}, {"<|im_end|>", true},
                                         {"\n", false},          {"<|im_start|>", true}, {"assistant\n", false}};
  EXPECT_EQ(segs, want);
}

// ---------------------------------------------------------------------------
// Choosing a style, and the named errors

TEST(ChatStyleChoice, UnrecognisedTemplateIsRefusedUnlessPlainIsAskedFor) {
  const std::string odd = "{% for m in messages %}<<{{ m.role }}>> {{ m.content }}{% endfor %}";
  EXPECT_FALSE(recognise_chat_template(odd));
  const Error e = thrown([&] { choose_chat_style(odd, "auto"); });
  EXPECT_EQ(e.code(), ErrorCode::Unsupported);
  EXPECT_NE(std::string(e.what()).find("not a format kvg lays out"), std::string::npos) << e.what();
  EXPECT_EQ(choose_chat_style(odd, "plain").format, ChatFormat::Plain);
  EXPECT_EQ(choose_chat_style(odd, "chatml").format, ChatFormat::ChatML);
  // A named format the template is not: its oldest templates' system rule.
  EXPECT_EQ(choose_chat_style(odd, "gemma").system, SystemTurn::Refused);
  EXPECT_EQ(choose_chat_style(odd, "phi3").system, SystemTurn::Own);
  // A named format the template is: what the template says.
  KVG_REQUIRE_TEST_DATA("chat-templates/gemma-3-it.jinja");
  EXPECT_EQ(choose_chat_style(read_template("gemma-3-it.jinja"), "gemma").system, SystemTurn::IntoFirstUser);
  EXPECT_EQ(thrown([&] { choose_chat_style(odd, "jinja"); }).code(), ErrorCode::InvalidArgument);
}

TEST(ChatStyleChoice, OtherMistralVariantsAreNotGuessed) {
  // Mistral v0.3's spacing ("[INST] " + content + "[/INST]") differs from v0.1/v0.2.
  EXPECT_FALSE(recognise_chat_template("{{ bos_token }}{{ '[INST] ' + message['content'] + '[/INST]' }}"));
  EXPECT_FALSE(recognise_chat_template("{{ '[INST] <<SYS>>\\n' }}{{ '[INST] ' + message['content'] + ' [/INST]' }}"));
}

TEST(ChatErrors, SystemWhereTheFormatHasNoPlaceForIt) {
  for (const ChatFormat f : {ChatFormat::Gemma, ChatFormat::Mistral}) {
    const Error e = thrown([&] { lay_out_chat(style(f, SystemTurn::Refused), kConversation); });
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
    EXPECT_NE(std::string(e.what()).find("no place for a system message"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("chat message 1 (system)"), std::string::npos) << e.what();
  }
}

TEST(ChatErrors, ConversationsThatCannotBeLaidOut) {
  const ChatStyle chatml = style(ChatFormat::ChatML);
  auto code = [&](const ChatStyle& s, std::vector<ChatMessage> m) {
    return thrown([&] { lay_out_chat(s, m); }).code();
  };
  EXPECT_EQ(code(chatml, {}), ErrorCode::InvalidArgument);
  EXPECT_EQ(code(chatml, {{"tool", "x"}, {"user", "y"}}), ErrorCode::InvalidArgument);
  EXPECT_EQ(code(chatml, {{"user", "x"}, {"system", "y"}, {"user", "z"}}), ErrorCode::InvalidArgument);
  EXPECT_EQ(code(chatml, {{"user", "x"}, {"assistant", "y"}}), ErrorCode::InvalidArgument);
  // Gemma and Mistral need user and assistant to alternate.
  EXPECT_EQ(code(style(ChatFormat::Gemma, SystemTurn::Refused), {{"user", "a"}, {"user", "b"}}),
            ErrorCode::InvalidArgument);
  EXPECT_EQ(code(style(ChatFormat::Mistral, SystemTurn::Refused), {{"assistant", "a"}, {"user", "b"}}),
            ErrorCode::InvalidArgument);
  EXPECT_NO_THROW(lay_out_chat(chatml, {{"user", "a"}, {"user", "b"}}));
  const std::vector<ChatMessage> many(kMaxChatMessages + 1, ChatMessage{"user", "x"});
  EXPECT_EQ(code(chatml, many), ErrorCode::OutOfRange);
}

// ---------------------------------------------------------------------------
// Messages JSON

TEST(ChatMessagesJson, ReadsRolesAndContentWithEscapes) {
  const auto m = parse_chat_messages(
      R"( [ {"role":"system","content":"a\nb \"q\" \u00e9 \ud83d\ude00"}, {"content":"x","role":"user"} ] )");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].role, "system");
  EXPECT_EQ(m[0].content, "a\nb \"q\" \xc3\xa9 \xf0\x9f\x98\x80");
  EXPECT_EQ(m[1].role, "user");
  EXPECT_EQ(m[1].content, "x");
  EXPECT_TRUE(parse_chat_messages("[]").empty());
}

TEST(ChatMessagesJson, RefusesAnythingElseByName) {
  for (const char* bad : {"", "{}", "[1]", R"([{"role":"user"}])", R"([{"role":"user","content":["x"]}])",
                          R"([{"role":"user","content":"x","name":"n"}])", R"([{"role":"user","content":"x"}] x)",
                          R"([{"role":"user","content":"x","role":"user"}])", R"([{"role":"user","content":"\ud800"}])",
                          R"([{"role":"user","content":"a)", "[{\"role\":\"user\",\"content\":\"\x01\"}]",
                          R"([{"role":"user","content":"x"},])", "[1e999]",
                          R"([{"role":"user","content":"x","n":1e999}])"}) {
    const Error e = thrown([&] { parse_chat_messages(bad); });
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << bad;
    EXPECT_NE(std::string(e.what()).find("chat messages JSON"), std::string::npos) << e.what();
  }
  const Error e = thrown([] { parse_chat_messages(R"([{"role":"user","content":"x","tool_calls":"y"}])"); });
  EXPECT_NE(std::string(e.what()).find("unknown member \"tool_calls\""), std::string::npos) << e.what();
}

// ---------------------------------------------------------------------------
// Tokens: markers become their special ids, text stays text

// The synthetic SentencePiece vocabulary, with every format's markers added
// as control tokens after it.
Tokenizer marker_tokenizer(std::vector<std::string>* added = nullptr) {
  const SynthVocab sv = synth_vocab(512);
  Vocabulary v;
  v.pieces = sv.pieces;
  v.scores = sv.scores;
  for (int32_t t : sv.types) v.types.push_back(TokenType(t));
  for (const ChatFormat f : {ChatFormat::ChatML, ChatFormat::Llama3, ChatFormat::Gemma, ChatFormat::Phi3})
    for (const std::string& m : chat_markers(f)) {
      v.pieces.push_back(m);
      v.scores.push_back(0);
      v.types.push_back(TokenType::Control);
      if (added) added->push_back(m);
    }
  return Tokenizer(std::move(v));
}

TEST(ChatTokens, EachMarkerIsItsSpecialIdAndTextIsEncodedBetween) {
  const Tokenizer tok = marker_tokenizer();
  const int32_t start = tok.special_id("<|im_start|>"), end = tok.special_id("<|im_end|>");
  ASSERT_GE(start, 512);
  ASSERT_GE(end, 512);
  std::vector<int32_t> got;
  append_segment_tokens(tok, lay_out_chat(style(ChatFormat::ChatML), {{"user", "Hi"}}), false, got);
  // llama.cpp's partition: a text stretch after a special token gets the
  // SentencePiece space prefix again.
  std::vector<int32_t> want = {start};
  for (int32_t id : tok.encode("user\nHi")) want.push_back(id);
  want.push_back(end);
  for (int32_t id : tok.encode("\n")) want.push_back(id);
  want.push_back(start);
  for (int32_t id : tok.encode("assistant\n")) want.push_back(id);
  EXPECT_EQ(got, want);
  // Exactly three marker ids, at those places; nothing else is a marker.
  int markers = 0;
  for (int32_t id : got) markers += id >= 512;
  EXPECT_EQ(markers, 3);
}

TEST(ChatTokens, EveryFormatsLayoutHasItsMarkerIdsWhereTheTextHasMarkers) {
  const Tokenizer tok = marker_tokenizer();
  for (const ChatFormat f : {ChatFormat::ChatML, ChatFormat::Llama3, ChatFormat::Gemma, ChatFormat::Phi3}) {
    const ChatStyle s = style(f, f == ChatFormat::Gemma ? SystemTurn::IntoFirstUser : SystemTurn::Own);
    const auto segs = lay_out_chat(s, kConversation);
    std::vector<int32_t> got;
    append_segment_tokens(tok, segs, false, got);
    std::vector<int32_t> marker_ids, want_ids;
    for (int32_t id : got)
      if (id >= 512) marker_ids.push_back(id);
    for (const ChatSegment& seg : segs)
      if (seg.marker) want_ids.push_back(tok.special_id(seg.text));
    EXPECT_EQ(marker_ids, want_ids) << chat_format_name(f);
    EXPECT_FALSE(want_ids.empty());
  }
}

TEST(ChatTokens, AMarkerTheVocabularyLacksIsText) {
  const Tokenizer tok = marker_tokenizer();  // no [INST] token: Mistral v0.1's vocabulary
  std::vector<int32_t> got;
  append_segment_tokens(tok, lay_out_chat(style(ChatFormat::Mistral, SystemTurn::Refused), {{"user", "Hi"}}), false,
                        got);
  EXPECT_EQ(got, tok.encode("[INST] Hi [/INST]"));
}

TEST(ChatTokens, EndOfTurnIdsAreEndsOfGenerationAndMustBeInTheVocabulary) {
  const SynthVocab sv = synth_vocab(300);
  Vocabulary v;
  v.pieces = sv.pieces;
  for (int32_t t : sv.types) v.types.push_back(TokenType(t));
  v.eot = 7;
  v.eom = 8;
  const Tokenizer tok(v);
  EXPECT_TRUE(tok.is_end_of_generation(2));  // EOS
  EXPECT_TRUE(tok.is_end_of_generation(7));
  EXPECT_TRUE(tok.is_end_of_generation(8));
  EXPECT_FALSE(tok.is_end_of_generation(9));
  v.eot = 300;
  EXPECT_EQ(thrown([&] { Tokenizer{v}; }).code(), ErrorCode::InvalidArgument);
}

TEST(ChatTokens, SplitAtMarkersRoundTrips) {
  const std::vector<std::string> markers = {"<|im_start|>", "<|im_end|>"};
  const std::string text = "a<|im_start|>b<|im_end|><|im_end|>c<|im_";
  const auto segs = split_at_markers(text, markers);
  EXPECT_EQ(chat_text(segs), text);
  ASSERT_EQ(segs.size(), 6u);
  EXPECT_TRUE(segs[1].marker);
  EXPECT_TRUE(segs[3].marker);
  EXPECT_TRUE(segs[4].marker);
  EXPECT_FALSE(segs[5].marker);
}

// ---------------------------------------------------------------------------
// The synthetic ChatML model: prompt, stop at the end of turn, knowledge template

class ChatmlModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    SynthOptions o = test::tiny_synth_options();
    o.chat_template = "chatml";
    o.n_ctx = 512;  // the synthetic vocabulary spells most words letter by letter
    model_ = test::load_synth(o, "chat_chatml");
  }
  static void TearDownTestSuite() { model_.reset(); }
  static const Model& model() { return *model_; }
  static std::shared_ptr<const Model> model_;
};
std::shared_ptr<const Model> ChatmlModel::model_;

TEST_F(ChatmlModel, VocabularyHasTheChatmlTokensAndTemplate) {
  const Tokenizer& tok = model().tokenizer();
  const int32_t n = int32_t(tok.size());
  EXPECT_EQ(tok.special_id("<|im_start|>"), n - 2);
  EXPECT_EQ(tok.special_id("<|im_end|>"), n - 1);
  EXPECT_TRUE(tok.is_end_of_generation(n - 1));  // tokenizer.ggml.eot_token_id
  EXPECT_TRUE(tok.is_end_of_generation(tok.eos()));
  EXPECT_FALSE(tok.is_end_of_generation(n - 2));
  EXPECT_EQ(model_chat_style(tok).format, ChatFormat::ChatML);
}

TEST_F(ChatmlModel, PromptHasTheTurnMarkersWhereTheyMustBe) {
  const Tokenizer& tok = model().tokenizer();
  const int32_t start = tok.special_id("<|im_start|>"), end = tok.special_id("<|im_end|>");
  const ChatPrompt p = chat_prompt(model(), model_chat_style(tok), kConversation);
  EXPECT_EQ(p.text.rfind("<|im_start|>assistant\n"), p.text.size() - 22);
  ASSERT_GE(p.tokens.size(), 4u);
  EXPECT_EQ(p.tokens[0], tok.bos());
  EXPECT_EQ(p.tokens[1], start);
  std::vector<size_t> starts, ends;
  for (size_t i = 0; i < p.tokens.size(); ++i) {
    if (p.tokens[i] == start) starts.push_back(i);
    if (p.tokens[i] == end) ends.push_back(i);
  }
  ASSERT_EQ(starts.size(), 5u);  // four turns and the assistant's cue
  ASSERT_EQ(ends.size(), 4u);
  for (size_t k = 0; k < 4; ++k) EXPECT_LT(starts[k], ends[k]);
  for (size_t k = 0; k + 1 < 5; ++k) EXPECT_GT(starts[k + 1], ends[k]);
  // After the last <|im_start|>: "assistant\n" as text, and nothing else.
  std::vector<int32_t> tail(p.tokens.begin() + long(starts.back()) + 1, p.tokens.end());
  EXPECT_EQ(tail, tok.encode("assistant\n"));
  EXPECT_EQ(p.stop_tokens, std::vector<int32_t>{end});
}

TEST_F(ChatmlModel, OneTurnTokenByToken) {
  // <s> <|im_start|> "▁user" (letter by letter) <0x0A> "H" "i" <|im_end|> "▁" <0x0A>
  // <|im_start|> "▁assistant" <0x0A>: every text stretch after a marker gets
  // the SentencePiece space prefix (259 is "▁"), as llama.cpp encodes it.
  const std::vector<int32_t> want = {1,   298, 259, 120, 118, 104, 117, 13,  75,  108, 299, 259, 13,
                                     298, 259, 100, 118, 118, 108, 118, 119, 100, 113, 119, 13};
  EXPECT_EQ(chat_prompt(model(), model_chat_style(model().tokenizer()), {{"user", "Hi"}}).tokens, want);
}

TEST_F(ChatmlModel, MarkerTextInAMessageIsRefused) {
  const Error e = thrown([&] {
    chat_prompt(model(), model_chat_style(model().tokenizer()), {{"user", "a<|im_end|>b"}});
  });
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(std::string(e.what()).find("chat message 1 (user)"), std::string::npos) << e.what();
}

TEST_F(ChatmlModel, GenerationStopsAtAStopToken) {
  const auto& shared = model_;
  const ChatPrompt p = chat_prompt(model(), model_chat_style(model().tokenizer()), kNoSystem);
  GenerateOptions free_run;
  free_run.max_new_tokens = 12;
  free_run.stop_at_eos = false;
  Session s1(shared, EngineOptions{});
  const GenerateResult all = generate(s1, p.tokens, free_run);
  ASSERT_EQ(all.tokens.size(), 12u);
  // Make the third token the turn's end: generation stops right after it.
  GenerateOptions stop = free_run;
  stop.stop_at_eos = true;
  stop.stop_tokens = {all.tokens[2]};
  Session s2(shared, EngineOptions{});
  const GenerateResult r = generate(s2, p.tokens, stop);
  const size_t first = size_t(std::find(all.tokens.begin(), all.tokens.end(), all.tokens[2]) - all.tokens.begin());
  ASSERT_EQ(r.tokens.size(), first + 1);
  EXPECT_TRUE(r.stopped_at_eos);
  EXPECT_TRUE(std::equal(r.tokens.begin(), r.tokens.end(), all.tokens.begin()));
}

TEST_F(ChatmlModel, KnowledgeTemplateFollowsTheChatFormat) {
  const Tokenizer& tok = model().tokenizer();
  const KnowledgeTemplate t = knowledge_template_for(model(), kDefaultKnowledgeTemplate);
  EXPECT_EQ(t.head, "<|im_start|>user\n");
  EXPECT_EQ(t.middle, "\nQuestion: ");
  EXPECT_EQ(t.tail, "<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_FALSE(t.markers.empty());
  const SegmentedPrompt p =
      tokenize_segments(model(), knowledge_segments(t, {"Sky is blue."}, "What colour?"), {}, t.markers);
  ASSERT_EQ(p.ends.size(), 2u);
  EXPECT_EQ(p.tokens[0], tok.bos());
  EXPECT_EQ(p.tokens[1], tok.special_id("<|im_start|>"));
  EXPECT_EQ(std::count(p.tokens.begin(), p.tokens.end(), tok.special_id("<|im_start|>")), 2);
  EXPECT_EQ(std::count(p.tokens.begin(), p.tokens.end(), tok.special_id("<|im_end|>")), 1);
  // A flywheel answer ends at the format's end marker, not only at EOS/EOT.
  ASSERT_EQ(t.stop_tokens.size(), 1u);
  EXPECT_EQ(t.stop_tokens[0], tok.special_id("<|im_end|>"));
  EXPECT_NE(t.stop_tokens[0], tok.eos());
  // The setting still overrides it, as text.
  const KnowledgeTemplate own = knowledge_template_for(model(), "Q: {solution} {question} A:");
  EXPECT_EQ(own.head, "Q: ");
  EXPECT_TRUE(own.markers.empty());
  EXPECT_TRUE(own.stop_tokens.empty());
  // A solution holding a marker's text is refused.
  EXPECT_THROW(knowledge_segments(t, {"x<|im_start|>"}, "q"), Error);
}

TEST(ChatKnowledge, ModelWithoutChatTemplateKeepsThePlainDefault) {
  const auto model = test::load_synth(test::tiny_synth_options(), "chat_plain");
  const KnowledgeTemplate t = knowledge_template_for(*model, kDefaultKnowledgeTemplate);
  EXPECT_EQ(t.head, "");
  EXPECT_EQ(t.middle, "\nQuestion: ");
  EXPECT_EQ(t.tail, "\nAnswer:");
  EXPECT_TRUE(t.markers.empty());
  EXPECT_TRUE(t.stop_tokens.empty());
  EXPECT_EQ(model_chat_style(model->tokenizer()).format, ChatFormat::Plain);
  const ChatPrompt p = chat_prompt(*model, model_chat_style(model->tokenizer()), {{"user", "Hi"}});
  EXPECT_EQ(p.text, "User: Hi\nAssistant:");
  EXPECT_TRUE(p.stop_tokens.empty());
}

}  // namespace
}  // namespace kvg
