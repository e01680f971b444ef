// The engine's side of the trust boundary (docs/security.md): recomputing an
// artifact from its tokens alone reproduces a genuine one's identity and
// exposes a forged one; non-finite KV is named; a graft check over
// non-finite logits never claims KL 0; text that cannot fit the context is
// refused by its length before it is tokenized.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "common/error.hpp"
#include "engine/artifact_recheck.hpp"
#include "engine/gguf/gguf_file.hpp"
#include "engine/graft_check.hpp"
#include "engine/knowledge_prompt.hpp"
#include "engine/memory_artifacts.hpp"
#include "engine/prompt.hpp"
#include "tests/support/data_paths.hpp"
#include "tests/support/synth_fixture.hpp"
#include "tools/synth_model.hpp"

namespace kvg {
namespace {

// Two layers and GQA, so that layer and head offsets are exercised.
std::shared_ptr<const Model> small_model() {
  static std::shared_ptr<const Model> model = [] {
    SynthOptions o = test::tiny_synth_options();
    o.n_layer = 2;
    o.n_head = 4;
    o.seed = 7;
    return test::load_synth(o, "recheck");
  }();
  return model;
}

std::vector<int32_t> tokens_from(int32_t first, size_t n) {
  std::vector<int32_t> t = {1};
  for (size_t i = 1; i < n; ++i) t.push_back(int32_t(3 + (size_t(first) + i * 37) % 290));
  return t;
}

// Captures [from, to) of `tokens` (whose first `from` are the parent's).
Digest capture_span(MemoryArtifacts& store, const std::vector<int32_t>& tokens, int64_t from, int64_t to,
                    std::optional<Digest> parent, const EngineOptions& options = {}) {
  Session session(small_model(), options);
  session.prefill(std::span<const int32_t>(tokens.data(), size_t(to)), 0, LogitsFor::None, nullptr);
  return store.capture_from(session, from, to, parent);
}

// The trailer recomputed over changed bytes: an intact-looking artifact.
std::vector<uint8_t> resealed(std::vector<uint8_t> art) {
  const Digest trailer = sha256(std::span<const uint8_t>(art.data(), art.size() - 32));
  std::memcpy(art.data() + art.size() - 32, trailer.data(), 32);
  return art;
}

size_t header_bytes(const std::vector<uint8_t>& art) {
  uint32_t n;
  std::memcpy(&n, art.data() + 8, 4);  // docs/artifact-format.md: u32 LE at offset 8
  return n;
}

// `art` with float `index` of its payload replaced, resealed.
std::vector<uint8_t> with_float(std::vector<uint8_t> art, size_t index, float value) {
  std::memcpy(art.data() + header_bytes(art) + index * sizeof(float), &value, sizeof(float));
  return resealed(std::move(art));
}

TEST(Recheck, GenuineArtifactsRecomputeToTheirIdentity) {
  MemoryArtifacts store;
  const auto tokens = tokens_from(5, 40);
  const Digest root = capture_span(store, tokens, 0, 33, std::nullopt);
  const Digest link = capture_span(store, tokens, 33, 40, root);
  for (const Digest& id : {root, link}) {
    const auto r = recompute_artifact(small_model(), EngineOptions{}, verify_artifact(store.bytes.at(id)).header,
                                      store.opener(), {});
    EXPECT_EQ(r.identity, id);
  }
  EXPECT_EQ(recompute_artifact(small_model(), EngineOptions{}, verify_artifact(store.bytes.at(link)).header,
                               store.opener(), {})
                .tokens,
            40);
}

TEST(Recheck, ForgedKvIsExposed) {
  MemoryArtifacts store;
  const auto genuine_tokens = tokens_from(5, 12), other_tokens = tokens_from(99, 12);
  const Digest genuine = capture_span(store, genuine_tokens, 0, 12, std::nullopt);
  const Digest other = capture_span(store, other_tokens, 0, 12, std::nullopt);
  // The genuine header and tokens over the other run's KV: a well-formed artifact.
  std::vector<uint8_t> forged = store.bytes.at(genuine);
  const ArtifactHeader header = verify_artifact(forged).header;
  const std::vector<uint8_t>& donor = store.bytes.at(other);
  std::memcpy(forged.data() + header.header_bytes(), donor.data() + header.header_bytes(), header.payload_bytes());
  const VerifiedArtifact art = verify_artifact(resealed(forged));  // intact bytes: the hash cannot tell
  EXPECT_NE(recompute_artifact(small_model(), EngineOptions{}, art.header, store.opener(), {}).identity,
            art.identity);
  // One flipped low mantissa bit is enough.
  float v;
  std::memcpy(&v, store.bytes.at(genuine).data() + header.header_bytes() + 40, 4);
  const auto nudged = verify_artifact(with_float(store.bytes.at(genuine), 10, std::nextafter(v, 1e30f)));
  EXPECT_NE(recompute_artifact(small_model(), EngineOptions{}, nudged.header, store.opener(), {}).identity,
            nudged.identity);
}

TEST(Recheck, ArtifactOfAnotherModelIsRefusedByName) {
  MemoryArtifacts store;
  const Digest id = capture_span(store, tokens_from(5, 8), 0, 8, std::nullopt);
  ArtifactHeader header = verify_artifact(store.bytes.at(id)).header;
  header.model_fingerprint[0] ^= 1;
  try {
    recompute_artifact(small_model(), EngineOptions{}, header, store.opener(), {});
    FAIL() << "recomputed an artifact of another model";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::ModelMismatch);
  }
}

TEST(Recheck, NonFiniteKvIsNamed) {
  MemoryArtifacts store;
  const Digest id = capture_span(store, tokens_from(5, 8), 0, 8, std::nullopt);
  const auto& bytes = store.bytes.at(id);
  const ArtifactHeader header = verify_artifact(bytes).header;
  EXPECT_EQ(first_non_finite_kv(header, bytes), std::nullopt);
  const size_t row = size_t(header.n_head_kv) * header.head_dim, block = row * header.n_tokens();
  // Layer 1's V block, token 3, element 5.
  const size_t index = 2 * block + block + 3 * row + 5;
  EXPECT_EQ(first_non_finite_kv(header, with_float(bytes, index, std::numeric_limits<float>::quiet_NaN())),
            "layer 1 V, token 3, element 5 is NaN");
  EXPECT_EQ(first_non_finite_kv(header, with_float(bytes, 0, -std::numeric_limits<float>::infinity())),
            "layer 0 K, token 0, element 0 is infinite");
  EXPECT_EQ(first_non_finite_kv(header, with_float(bytes, 0, 3e38f)), std::nullopt);
}

EngineOptions with_storage(KvStorage storage) {
  EngineOptions o;
  o.recipe.kv = storage;
  return o;
}

// Under a compact KV storage the recheck recomputes with the same rounding
// (the artifact's own recipe, whatever the caller's): genuine artifacts give
// back their identity, a changed step does not, and a header whose kv_dtype
// contradicts its recipe is refused by name.
TEST(Recheck, CompactArtifactsRecomputeUnderTheirOwnStorage) {
  for (KvStorage storage : {KvStorage::BF16, KvStorage::I8}) {
    SCOPED_TRACE(kv_storage_name(storage));
    MemoryArtifacts store;
    const auto tokens = tokens_from(5, 40);
    const Digest root = capture_span(store, tokens, 0, 33, std::nullopt, with_storage(storage));
    const Digest link = capture_span(store, tokens, 33, 40, root, with_storage(storage));
    for (const Digest& id : {root, link}) {
      const ArtifactHeader h = verify_artifact(store.bytes.at(id)).header;
      EXPECT_EQ(recompute_artifact(small_model(), EngineOptions{}, h, store.opener(), {}).identity, id);
      ArtifactHeader contradicting = h;
      contradicting.kv_dtype = kKvDtypeF32;
      try {
        recompute_artifact(small_model(), EngineOptions{}, contradicting, store.opener(), {});
        ADD_FAILURE() << "recomputed an artifact whose dtype contradicts its recipe";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::RecipeMismatch);
        EXPECT_NE(std::string(e.what()).find("stores its KV as f32 but names recipe '" + with_storage(storage).recipe.name()),
                  std::string::npos)
            << e.what();
      }
    }
    // One step of the last element (a bf16 ulp, an int8 q; canonical either way).
    std::vector<uint8_t> nudged = store.bytes.at(root);
    const ArtifactHeader h = verify_artifact(nudged).header;
    nudged[h.header_bytes() + h.payload_bytes() - (storage == KvStorage::BF16 ? 2 : 1)] ^= 1;
    const VerifiedArtifact art = verify_artifact(resealed(nudged));
    EXPECT_NE(recompute_artifact(small_model(), EngineOptions{}, art.header, store.opener(), {}).identity,
              art.identity);
  }
}

TEST(Recheck, NonFiniteKvIsNamedInCompactDtypes) {
  MemoryArtifacts store;
  const Digest bf16 = capture_span(store, tokens_from(5, 8), 0, 8, std::nullopt, with_storage(KvStorage::BF16));
  const auto& bytes = store.bytes.at(bf16);
  const ArtifactHeader header = verify_artifact(bytes).header;
  EXPECT_EQ(first_non_finite_kv(header, bytes), std::nullopt);
  const size_t row = size_t(header.n_head_kv) * header.head_dim, block = row * header.n_tokens();
  const size_t at = header.header_bytes() + 2 * (2 * block + block + 3 * row + 5);  // layer 1 V, token 3, element 5
  auto with_u16 = [&](uint16_t v) {
    std::vector<uint8_t> b = bytes;
    b[at] = uint8_t(v), b[at + 1] = uint8_t(v >> 8);
    return resealed(std::move(b));
  };
  EXPECT_EQ(first_non_finite_kv(header, with_u16(0x7fc0)), "layer 1 V, token 3, element 5 is NaN");
  EXPECT_EQ(first_non_finite_kv(header, with_u16(0xff80)), "layer 1 V, token 3, element 5 is infinite");
  EXPECT_THROW(first_non_finite_kv(header, with_u16(0x7fc1)), Error);  // not canonical: not a value at all
  // int8 rows are finite by construction; a non-canonical one is refused.
  const Digest i8 = capture_span(store, tokens_from(5, 8), 0, 8, std::nullopt, with_storage(KvStorage::I8));
  std::vector<uint8_t> i8_bytes = store.bytes.at(i8);
  const ArtifactHeader i8_header = verify_artifact(i8_bytes).header;
  EXPECT_EQ(first_non_finite_kv(i8_header, i8_bytes), std::nullopt);
  i8_bytes[i8_header.header_bytes()] = 122;  // the first row's exponent: 64 * 2^122 is not finite
  try {
    first_non_finite_kv(i8_header, resealed(i8_bytes));
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Corrupt);
    EXPECT_NE(std::string(e.what()).find("layer 0 K, token 0, head 0: int8 row exponent 122"), std::string::npos) << e.what();
  }
}

TEST(Recheck, GraftCheckOverNonFiniteLogitsIsNeitherExactNorKlZero) {
  MemoryArtifacts store;
  const auto tokens = tokens_from(5, 12);
  const Digest id = capture_span(store, tokens, 0, 8, std::nullopt);
  const auto poisoned = with_float(store.bytes.at(id), 3, std::numeric_limits<float>::quiet_NaN());
  const Digest bad = sha256(std::span<const uint8_t>(poisoned));
  store.bytes[bad] = poisoned;
  const auto r = graft_check(small_model(), EngineOptions{}, bad, store.opener(), tokens, GraftCheckOptions{});
  EXPECT_FALSE(r.exact);
  EXPECT_TRUE(std::isnan(r.kl_max)) << r.kl_max;
}

TEST(PromptBounds, TextThatCannotFitIsRefusedBeforeTokenizing) {
  const Model& model = *small_model();
  const size_t limit = max_prompt_bytes(model);
  EXPECT_EQ(limit, size_t(model.config().n_ctx) * model.tokenizer().max_text_bytes_per_token());
  try {
    fresh_prompt(model, std::string(limit + 1, 'a'));
    FAIL() << "a prompt longer than the context can hold was tokenized";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::OutOfRange);
    EXPECT_NE(std::string(e.what()).find("cannot fit in the context length 64"), std::string::npos) << e.what();
  }
  // Within the byte bound, the token count still decides.
  try {
    fresh_prompt(model, std::string(200, 'a'));
    FAIL() << "a prompt of more tokens than the context was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::OutOfRange);
  }
  EXPECT_THROW(tokenize_segments(model, {std::string(limit, 'a'), std::string(1, 'a')}), Error);
  EXPECT_EQ(fresh_prompt(model, "ab").front(), 1);
}

// Long encodings call the caller's check as they go, so that a cancel
// stops them: the SentencePiece merge and the BPE word loop.
TEST(PromptBounds, TokenizingPollsTheCheckAndStopsWhenItThrows) {
  const std::string text = [] {
    std::string t;
    while (t.size() < 200000) t += "Once upon a time, there was a little girl named Lily. ";
    return t;
  }();
  std::vector<const char*> vocabularies = {"tokenizer-vectors/ggml-vocab-llama-spm.gguf",
                                           "tokenizer-vectors/ggml-vocab-gpt-2.gguf"};
  for (const char* vocab : vocabularies) {
    KVG_REQUIRE_TEST_DATA(vocab);
    const Tokenizer tok = Tokenizer::from_gguf(*gguf::File::open(test::data_path(vocab)));
    int calls = 0;
    const std::vector<int32_t> ids = tok.encode(text, false, [&] { ++calls; });
    EXPECT_GE(calls, 10) << vocab;
    EXPECT_EQ(ids, tok.encode(text)) << vocab << ": polling changes nothing";
    const ProgressCheck cancel = [] { throw Error(ErrorCode::Cancelled, "cancelled"); };
    EXPECT_THROW(tok.encode(text, false, cancel), Error) << vocab;
    EXPECT_THROW(tok.encode_continuation(text, cancel), Error) << vocab;
  }
}

}  // namespace
}  // namespace kvg
