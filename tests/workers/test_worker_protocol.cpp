// The workers' protocol (extension/src/workers/protocol/), without a
// server: every message kind of the engine worker, the writer and the
// verifier round-trips with its values; every prefix of each encoded message,
// and each with a byte more, is refused as a ProtocolError; random bytes and
// bit flips either decode or are refused, never crash or throw anything else;
// a length beyond its bytes is refused before anything is allocated for it;
// and the request slot allows its transitions and no others.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "extension/src/workers/protocol/engine_messages.hpp"
#include "extension/src/workers/protocol/request_slot.hpp"
#include "extension/src/workers/protocol/verifier_messages.hpp"
#include "extension/src/workers/protocol/wire.hpp"
#include "extension/src/workers/protocol/writer_messages.hpp"

// The largest single allocation while `tracking` is set: a decoder that
// believed a length would ask for it.
namespace {
std::atomic<bool> tracking{false};
std::atomic<size_t> largest_allocation{0};
}  // namespace

void* operator new(size_t n) {
  if (tracking.load(std::memory_order_relaxed) && n > largest_allocation.load(std::memory_order_relaxed))
    largest_allocation.store(n, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// Not inlined: the compiler would see new's pointer reach free() and warn.
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace kvg::worker_protocol {
namespace {

// A frozen verifier's pin: 64 hex characters.
constexpr const char* kPin = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

Sha256 digest_of(uint8_t seed) {
  Sha256 d{};
  for (size_t i = 0; i < d.size(); ++i) d[i] = uint8_t(seed * 31 + i * 7);
  return d;
}

GenerationRequest generation_request() {
  GenerationRequest r;
  r.model_path = "/models/tiny llama \xC3\xA9.gguf";
  r.model_fingerprint = digest_of(1);
  r.model_file = {uint64_t(1) << 40, 12345678901, int64_t(7) << 30, 1733300000123456789, 17};
  r.recipe = "q8-portable-v1+kv-i8";
  r.device = Device(2);
  r.gpu_staging_bytes = uint64_t(3) << 33;
  r.max_kv_bytes = -1;
  r.context_limit = 1 << 20;
  r.prompt = {1, 15043, -7, 2147483647};
  r.leaf = digest_of(2);
  r.database = 16384;
  r.links = {{digest_of(3), 40001}, {digest_of(2), 40002}};
  r.chain_tokens = 262144;
  r.max_new_tokens = 77;
  r.temperature = 0.7f;
  r.top_k = 40;
  r.top_p = 0.95f;
  r.seed = 0xFEEDFACECAFEBEEFull;
  r.stop_at_eos = false;
  r.stop_tokens = {13, 29889};
  r.prefill_chunk = 512;
  r.answer_line = true;
  r.capture_ends = {64, 128, 4096};
  r.max_kv_is_share = true;
  r.continuations = 4;
  r.prompt_logits_from = 37;
  r.capture_from = 12;
  r.capture_parent = digest_of(9);
  return r;
}

SuppliedArtifacts supplied_artifacts() {
  SuppliedArtifacts s;
  s.artifacts.push_back({digest_of(4), std::make_shared<const std::vector<uint8_t>>(std::vector<uint8_t>{0, 1, 2, 255})});
  s.artifacts.push_back({digest_of(5), std::make_shared<const std::vector<uint8_t>>(std::vector<uint8_t>(300, 9))});
  return s;
}

const std::string kArtifactBytes("KVGA\0\x01\xFF binary", 15);

// One encoded message of each kind, and how to decode it and encode the
// result again (the same bytes mean every field came back).
struct Sample {
  std::string name;
  std::string bytes;
  std::function<std::string(std::string_view)> decode_and_encode;
};

template <class M>
Sample sample(std::string name, const M& message) {
  return {std::move(name), encode(message), [](std::string_view bytes) { return encode(decode<M>(bytes)); }};
}

std::vector<Sample> every_message_kind() {
  GenerationRequest without_leaf = generation_request();
  without_leaf.leaf.reset();
  without_leaf.links.clear();
  return {
      sample("GenerationRequest", generation_request()),
      sample("GenerationRequest without a chain", without_leaf),
      sample("NeedReply", EngineReply(NeedReply{{digest_of(6), digest_of(7)}})),
      sample("StartedReply", EngineReply(StartedReply{})),
      sample("PrefilledReply", EngineReply(PrefilledReply{384, 1000})),
      sample("TokenReply", EngineReply(TokenReply{-123456})),
      sample("LogitsReply", EngineReply(LogitsReply{{-1.5f, 0.0f, 3.25f, -0.0f}})),
      sample("LinkReply", EngineReply(LinkReply{{7, 0, 255, 1}})),
      sample("DoneReply", EngineReply(DoneReply{true, 0.25, 1.5, 96, 1234, 8})),
      sample("FailedReply of an error", EngineReply(FailedReply::of(Error(ErrorCode::TokenMismatch, "no")))),
      sample("FailedReply of a SQLSTATE", EngineReply(FailedReply::of("53200", "kvg: no room"))),
      sample("SuppliedArtifacts", supplied_artifacts()),
      sample("SupplyNotice", SupplyNotice{0xDEADBEEF}),
      sample("WriterRequest", WriterRequest{7, {"abc", std::nullopt, kArtifactBytes, ""}}),
      sample("WriterReply committed", WriterReply{987654321012, "", ""}),
      sample("WriterReply failed", WriterReply::failed("23505", "duplicate key")),
      sample("VerifierRequest", VerifierRequest{16384, 5000, false, "\"s\".\"f\"", "pin", "2+2?", "4"}),
      sample("VerifierRequest to freeze", VerifierRequest{16384, 5000, true, "\"s\".\"f\"", "", "", ""}),
      sample("VerifierOutcome passed", VerifierOutcome{true, "", "", ""}),
      sample("VerifierOutcome refused", VerifierOutcome{false, "the role kvg_verifier does not exist", "", ""}),
      sample("VerifierOutcome frozen", VerifierOutcome{false, "", "kvg_frozen.v_0123456789abcdef0123456789abcdef01234567",
                                                       std::string_view(kPin)}),
  };
}

TEST(WorkerProtocol, EveryMessageKindDecodesToTheSameBytes) {
  for (const Sample& s : every_message_kind()) {
    SCOPED_TRACE(s.name);
    EXPECT_EQ(s.decode_and_encode(s.bytes), s.bytes);
  }
}

TEST(WorkerProtocol, AGenerationRequestKeepsEveryValue) {
  const GenerationRequest sent = generation_request();
  const GenerationRequest got = decode<GenerationRequest>(encode(sent));
  EXPECT_EQ(got.model_path, sent.model_path);
  EXPECT_EQ(got.model_fingerprint, sent.model_fingerprint);
  EXPECT_EQ(got.model_file.device, sent.model_file.device);
  EXPECT_EQ(got.model_file.inode, sent.model_file.inode);
  EXPECT_EQ(got.model_file.size, sent.model_file.size);
  EXPECT_EQ(got.model_file.mtime_ns, sent.model_file.mtime_ns);
  EXPECT_EQ(got.model_file.fd, 17);
  EXPECT_EQ(got.recipe, sent.recipe);
  EXPECT_EQ(int(got.device), 2);
  EXPECT_EQ(got.gpu_staging_bytes, sent.gpu_staging_bytes);
  EXPECT_EQ(got.max_kv_bytes, -1);
  EXPECT_EQ(got.context_limit, 1 << 20);
  EXPECT_EQ(got.prompt, sent.prompt);
  EXPECT_EQ(got.leaf, sent.leaf);
  EXPECT_EQ(got.database, 16384u);
  ASSERT_EQ(got.links.size(), 2u);
  EXPECT_EQ(got.links[1].id, digest_of(2));
  EXPECT_EQ(got.links[1].loid, 40002u);
  EXPECT_EQ(got.chain_tokens, 262144);
  EXPECT_EQ(got.max_new_tokens, 77);
  EXPECT_EQ(got.temperature, 0.7f);
  EXPECT_EQ(got.top_k, 40);
  EXPECT_EQ(got.top_p, 0.95f);
  EXPECT_EQ(got.seed, sent.seed);
  EXPECT_FALSE(got.stop_at_eos);
  EXPECT_EQ(got.stop_tokens, sent.stop_tokens);
  EXPECT_EQ(got.prefill_chunk, 512);
  EXPECT_TRUE(got.answer_line);
  EXPECT_EQ(got.capture_ends, sent.capture_ends);
  EXPECT_TRUE(got.max_kv_is_share);
}

TEST(WorkerProtocol, EachEngineReplyComesBackAsItsOwnKind) {
  const auto token = decode<EngineReply>(encode(EngineReply(TokenReply{42})));
  ASSERT_TRUE(std::holds_alternative<TokenReply>(token));
  EXPECT_EQ(std::get<TokenReply>(token).token, 42);
  const auto done = decode<EngineReply>(encode(EngineReply(DoneReply{true, 0.5, 2.0, 10, 20, 3})));
  ASSERT_TRUE(std::holds_alternative<DoneReply>(done));
  EXPECT_TRUE(std::get<DoneReply>(done).stopped_at_eos);
  EXPECT_EQ(std::get<DoneReply>(done).decode_seconds, 2.0);
  EXPECT_EQ(std::get<DoneReply>(done).batch_peak, 3);
  const auto failed = decode<EngineReply>(encode(EngineReply(FailedReply::of(Error(ErrorCode::NotFound, "gone")))));
  ASSERT_TRUE(std::holds_alternative<FailedReply>(failed));
  EXPECT_EQ(std::get<FailedReply>(failed).code(), ErrorCode::NotFound);
  EXPECT_EQ(std::get<FailedReply>(failed).message, "gone");
  const auto state = decode<EngineReply>(encode(EngineReply(FailedReply::of("57V02", "down"))));
  EXPECT_FALSE(std::get<FailedReply>(state).code());
  EXPECT_EQ(std::get<FailedReply>(state).sqlstate, "57V02");
  const auto need = decode<EngineReply>(encode(EngineReply(NeedReply{{digest_of(8)}})));
  EXPECT_EQ(std::get<NeedReply>(need).ids, std::vector<Sha256>{digest_of(8)});
}

TEST(WorkerProtocol, SuppliedArtifactsKeepTheirIdentitiesAndBytes) {
  const SuppliedArtifacts got = decode<SuppliedArtifacts>(encode(supplied_artifacts()));
  ASSERT_EQ(got.artifacts.size(), 2u);
  EXPECT_EQ(got.artifacts[0].id, digest_of(4));
  EXPECT_EQ(*got.artifacts[0].bytes, (std::vector<uint8_t>{0, 1, 2, 255}));
  EXPECT_EQ(got.artifacts[1].bytes->size(), 300u);
}

TEST(WorkerProtocol, AWriterRequestKeepsNullsAndBinaryValues) {
  const std::string bytes = encode(WriterRequest{3, {std::nullopt, kArtifactBytes, ""}});
  const WriterRequest got = decode<WriterRequest>(bytes);
  EXPECT_EQ(got.statement, 3u);
  ASSERT_EQ(got.values.size(), 3u);
  EXPECT_FALSE(got.values[0]);
  EXPECT_EQ(*got.values[1], kArtifactBytes);
  ASSERT_TRUE(got.values[2]);
  EXPECT_TRUE(got.values[2]->empty());
}

TEST(WorkerProtocol, AWriterReplyFitsItsSlotWhateverTheError) {
  const std::string long_error(10000, 'e');
  const WriterReply reply = WriterReply::failed("XX000", long_error);
  char slot[WriterReply::kFramedBytes];
  encode_framed(reply, slot, sizeof(slot));
  const WriterReply got = decode_framed<WriterReply>(slot, sizeof(slot));
  EXPECT_EQ(got.sqlstate, "XX000");
  EXPECT_EQ(got.error, long_error.substr(0, WriterReply::kMaxErrorBytes));
  EXPECT_EQ(WriterReply::failed("not a state", "x").sqlstate, "");
}

TEST(WorkerProtocol, AVerifierOutcomeFitsItsBufferWithTheLongestRefusal) {
  const std::string refusal(VerifierOutcome::kMaxRefusalBytes, 'r');
  const std::string frozen(VerifierOutcome::kMaxFrozenBytes, 'f');
  char buffer[VerifierOutcome::kFramedBytes];
  encode_framed(VerifierOutcome{false, refusal, frozen, kPin}, buffer, sizeof(buffer));
  EXPECT_EQ(decode_framed<VerifierOutcome>(buffer, sizeof(buffer)).refusal, refusal);
  EXPECT_THROW(encode_framed(VerifierOutcome{false, refusal + "r", frozen, kPin}, buffer, sizeof(buffer)),
               ProtocolError);
  // What no worker sends is refused on reading.
  char roomy[2 * VerifierOutcome::kFramedBytes];
  encode_framed(VerifierOutcome{false, "", frozen + "f", ""}, roomy, sizeof(roomy));
  EXPECT_THROW(decode_framed<VerifierOutcome>(roomy, sizeof(roomy)), ProtocolError);
  encode_framed(VerifierOutcome{false, "", "", "abc"}, roomy, sizeof(roomy));
  EXPECT_THROW(decode_framed<VerifierOutcome>(roomy, sizeof(roomy)), ProtocolError);
}

TEST(WorkerProtocol, PrefillProgressPastItsPromptIsRefusedOnReading) {
  EXPECT_EQ(std::get<PrefilledReply>(decode<EngineReply>(encode(EngineReply(PrefilledReply{5, 5})))).done, 5);
  EXPECT_THROW(decode<EngineReply>(encode(EngineReply(PrefilledReply{6, 5}))), ProtocolError);
  EXPECT_THROW(decode<EngineReply>(encode(EngineReply(PrefilledReply{-1, 5}))), ProtocolError);
}

TEST(WorkerProtocol, AFramedMessageIsReadFromAPlaceLongerThanItself) {
  std::string place(4096, '\x7f');
  const VerifierRequest sent{1, 2, false, "spec", "pin", "question", "candidate"};
  encode_framed(sent, place.data(), place.size());
  const VerifierRequest got = decode_framed<VerifierRequest>(place.data(), place.size());
  EXPECT_EQ(got.candidate, "candidate");
  EXPECT_THROW(decode_framed<VerifierRequest>(place.data(), framed_size(sent) - 1), ProtocolError);
  EXPECT_THROW(decode_framed<VerifierRequest>(place.data(), 7), ProtocolError);
}

TEST(WorkerProtocol, EveryPrefixOfEveryMessageIsRefusedAsCutShort) {
  for (const Sample& s : every_message_kind()) {
    SCOPED_TRACE(s.name);
    for (size_t n = 0; n < s.bytes.size(); ++n)
      EXPECT_THROW(s.decode_and_encode(std::string_view(s.bytes).substr(0, n)), ProtocolError) << n << " bytes";
  }
}

TEST(WorkerProtocol, AMessageWithABytePastItsEndIsRefused) {
  for (const Sample& s : every_message_kind()) {
    SCOPED_TRACE(s.name);
    EXPECT_THROW(s.decode_and_encode(s.bytes + '\0'), ProtocolError);
  }
}

// Decodes `bytes` as message `s`: true when it decoded, false when refused;
// anything else (another exception) fails the test.
bool decodes_or_is_refused(const Sample& s, const std::string& bytes) {
  try {
    (void)s.decode_and_encode(bytes);
    return true;
  } catch (const ProtocolError&) {
    return false;
  } catch (const std::exception& e) {
    ADD_FAILURE() << s.name << ": " << typeid(e).name() << ": " << e.what();
    return false;
  }
}

TEST(WorkerProtocol, EverySingleBitFlipDecodesOrIsRefused) {
  for (const Sample& s : every_message_kind()) {
    SCOPED_TRACE(s.name);
    if (s.bytes.size() > 512) continue;  // the shorter kinds cover every field type
    for (size_t bit = 0; bit < s.bytes.size() * 8; ++bit) {
      std::string flipped = s.bytes;
      flipped[bit / 8] = char(flipped[bit / 8] ^ (1 << (bit % 8)));
      (void)decodes_or_is_refused(s, flipped);
    }
  }
}

TEST(WorkerProtocol, RandomBytesAndRandomDamageDecodeOrAreRefused) {
  std::mt19937_64 random(20240536);
  const std::vector<Sample> samples = every_message_kind();
  int refused = 0;
  for (int round = 0; round < 20000; ++round) {
    const Sample& s = samples[random() % samples.size()];
    std::string bytes;
    if (round % 2 == 0) {
      bytes.resize(random() % 64);
      for (char& c : bytes) c = char(random());
    } else {
      bytes = s.bytes;
      for (int hits = 1 + int(random() % 4); hits > 0 && !bytes.empty(); --hits)
        bytes[random() % bytes.size()] = char(random());
      if (random() % 4 == 0) bytes.resize(random() % (bytes.size() + 1));
    }
    if (!decodes_or_is_refused(s, bytes)) ++refused;
  }
  EXPECT_GT(refused, 10000);  // the damage was seen, not decoded as something else
}

// The bytes of a length field of `n` followed by `tail`.
std::string length_then(uint64_t n, std::string tail) {
  std::string bytes(reinterpret_cast<const char*>(&n), sizeof(n));
  return bytes + tail;
}

TEST(WorkerProtocol, ALengthBeyondItsBytesIsRefusedBeforeAnythingIsAllocated) {
  const std::vector<uint64_t> lengths = {uint64_t(1) << 63, uint64_t(1) << 40, ~uint64_t(0), 17};
  for (const uint64_t n : lengths) {
    SCOPED_TRACE(n);
    largest_allocation = 0;
    tracking = true;
    // A token vector, a vector of links, a string, a byte block, a count of values.
    EXPECT_THROW(decode<EngineReply>(std::string(1, 'N') + length_then(n, std::string(16, 'x'))), ProtocolError);
    EXPECT_THROW(decode<EngineReply>(std::string(1, 'L') + length_then(n, "xyz")), ProtocolError);
    EXPECT_THROW(decode<SuppliedArtifacts>(length_then(n, std::string(40, 'x'))), ProtocolError);
    EXPECT_THROW(decode<WriterRequest>(std::string(4, '\0') + length_then(n, "\x01")), ProtocolError);
    EXPECT_THROW(decode<VerifierRequest>(std::string(8, '\0') + length_then(n, "spec")), ProtocolError);
    tracking = false;
    // What the error's message takes, not what the length asked for.
    EXPECT_LT(largest_allocation.load(), size_t(4096));
  }
  // The tracking sees a length that was believed: an artifact's 300 bytes.
  largest_allocation = 0;
  tracking = true;
  (void)decode<SuppliedArtifacts>(encode(supplied_artifacts()));
  tracking = false;
  EXPECT_GE(largest_allocation.load(), size_t(300));
}

TEST(WorkerProtocol, AFlagOtherThanZeroOrOneIsRefused) {
  std::string bytes = encode(VerifierOutcome{true, ""});
  bytes[0] = 2;
  EXPECT_THROW(decode<VerifierOutcome>(bytes), ProtocolError);
  std::string request = encode(WriterRequest{1, {std::nullopt}});
  request.back() = 7;  // the value's presence
  EXPECT_THROW(decode<WriterRequest>(request), ProtocolError);
}

TEST(WorkerProtocol, AReplyOfNoKnownKindIsRefused) {
  std::string bytes = encode(EngineReply(TokenReply{1}));
  bytes[0] = 'Z';
  EXPECT_THROW(decode<EngineReply>(bytes), ProtocolError);
}

TEST(WorkerProtocol, AFailedReplyNamingNoErrorCodeOrSqlstateIsRefused) {
  FailedReply bad_code = FailedReply::of("XX000", "x");
  bad_code.error_code = int32_t(ErrorCode::Internal) + 1;
  EXPECT_THROW(decode<EngineReply>(encode(EngineReply(bad_code))), ProtocolError);
  FailedReply bad_state = FailedReply::of("XX000", "x");
  bad_state.sqlstate = "xx0'0";
  EXPECT_THROW(decode<EngineReply>(encode(EngineReply(bad_state))), ProtocolError);
  EXPECT_THROW(decode<WriterReply>(encode(WriterReply{0, "ab", "x"})), ProtocolError);
}

TEST(WorkerProtocol, AProtocolErrorIsACorruptKvgError) {
  try {
    (void)decode<SupplyNotice>("ab");
    FAIL() << "decoded two bytes as four";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Corrupt);
    EXPECT_NE(std::string(e.what()).find("cut short"), std::string::npos) << e.what();
  }
}

TEST(WorkerProtocol, AMessageTooLargeForItsPlaceIsNotWritten) {
  char place[16];
  EXPECT_THROW(encode_framed(WriterRequest{1, {"a longer value than fits"}}, place, sizeof(place)), ProtocolError);
  EXPECT_THROW(encode_into(TokenReply{1}, place, 3), ProtocolError);
}

// --- the request slot ---------------------------------------------------------

RequestSlot slot_in(SlotState state, uint64_t request = 7) { return RequestSlot{state, request}; }

TEST(RequestSlot, ARequestGoesFromQueuedToClaimedToDoneAndIsCollectedOnce) {
  RequestSlot slot{};
  EXPECT_EQ(slot.state, SlotState::Free);
  ASSERT_TRUE(slot.queue(7));
  EXPECT_EQ(slot.state, SlotState::Queued);
  EXPECT_EQ(slot.collect(7), std::nullopt);  // not answered yet
  EXPECT_EQ(slot.claim(), std::optional<uint64_t>(7));
  EXPECT_EQ(slot.claim(), std::nullopt);  // claimed once
  EXPECT_TRUE(slot.holds(7));
  EXPECT_TRUE(slot.answer(7, true));
  EXPECT_EQ(slot.state, SlotState::Done);
  EXPECT_EQ(slot.collect(7), SlotState::Done);
  EXPECT_EQ(slot.state, SlotState::Free);
  EXPECT_EQ(slot.collect(7), std::nullopt);
}

TEST(RequestSlot, AFailedRequestIsCollectedAsFailed) {
  RequestSlot slot = slot_in(SlotState::Claimed);
  EXPECT_TRUE(slot.answer(7, false));
  EXPECT_EQ(slot.collect(7), SlotState::Failed);
}

TEST(RequestSlot, ACallerThatGivesUpFreesAQueuedSlotAndAbandonsAClaimedOne) {
  RequestSlot queued = slot_in(SlotState::Queued);
  EXPECT_TRUE(queued.abandon(7));
  EXPECT_EQ(queued.state, SlotState::Free);
  EXPECT_EQ(queued.claim(), std::nullopt);  // no worker takes it now

  RequestSlot claimed = slot_in(SlotState::Claimed);
  EXPECT_TRUE(claimed.abandon(7));
  EXPECT_EQ(claimed.state, SlotState::Abandoned);
  EXPECT_FALSE(claimed.holds(7));
  EXPECT_FALSE(claimed.answer(7, true));  // nobody to wake
  EXPECT_EQ(claimed.state, SlotState::Free);

  RequestSlot answered = slot_in(SlotState::Done);
  EXPECT_TRUE(answered.abandon(7));
  EXPECT_EQ(answered.state, SlotState::Free);
}

TEST(RequestSlot, TheEngineWorkerReleasesWhatItClaimedOrWasAbandoned) {
  RequestSlot claimed = slot_in(SlotState::Claimed);
  EXPECT_TRUE(claimed.release(7));
  EXPECT_EQ(claimed.state, SlotState::Free);
  RequestSlot abandoned = slot_in(SlotState::Abandoned);
  EXPECT_TRUE(abandoned.release(7));
  EXPECT_EQ(abandoned.state, SlotState::Free);
  RequestSlot queued = slot_in(SlotState::Queued);
  EXPECT_FALSE(queued.release(7));  // never claimed
  EXPECT_EQ(queued.state, SlotState::Queued);
}

TEST(RequestSlot, NothingIsDoneToASlotThatHoldsAnotherRequest) {
  for (const SlotState state : {SlotState::Queued, SlotState::Claimed, SlotState::Done, SlotState::Failed,
                                SlotState::Abandoned}) {
    SCOPED_TRACE(slot_state_name(state));
    RequestSlot slot = slot_in(state, 8);
    EXPECT_FALSE(slot.answer(7, true));
    EXPECT_FALSE(slot.release(7));
    EXPECT_FALSE(slot.holds(7));
    EXPECT_EQ(slot.collect(7), std::nullopt);
    EXPECT_FALSE(slot.abandon(7));
    EXPECT_EQ(slot.state, state);
    EXPECT_EQ(slot.request, 8u);
  }
}

TEST(RequestSlot, OnlyAClaimedRequestIsAnswered) {
  for (const SlotState state : {SlotState::Free, SlotState::Queued, SlotState::Done, SlotState::Failed}) {
    SCOPED_TRACE(slot_state_name(state));
    RequestSlot slot = slot_in(state);
    EXPECT_FALSE(slot.answer(7, true));
    EXPECT_EQ(slot.state, state);
  }
}

TEST(RequestSlot, ANewRequestReplacesWhateverAnExitedProcessLeftButNotWithTheSameId) {
  for (const SlotState state : {SlotState::Free, SlotState::Queued, SlotState::Claimed, SlotState::Done,
                                SlotState::Failed, SlotState::Abandoned}) {
    SCOPED_TRACE(slot_state_name(state));
    RequestSlot slot = slot_in(state);
    EXPECT_FALSE(slot.queue(7));
    EXPECT_EQ(slot.state, state);
    EXPECT_TRUE(slot.queue(9));
    EXPECT_EQ(slot.state, SlotState::Queued);
    EXPECT_EQ(slot.request, 9u);
  }
}

TEST(RequestSlot, AStoppingWriterFailsWhatItHadNotAnsweredAndFreesWhatWasAbandoned) {
  RequestSlot queued = slot_in(SlotState::Queued), claimed = slot_in(SlotState::Claimed);
  RequestSlot abandoned = slot_in(SlotState::Abandoned), done = slot_in(SlotState::Done);
  EXPECT_TRUE(queued.fail_unanswered());
  EXPECT_TRUE(claimed.fail_unanswered());
  EXPECT_FALSE(abandoned.fail_unanswered());
  EXPECT_FALSE(done.fail_unanswered());
  EXPECT_EQ(queued.state, SlotState::Failed);
  EXPECT_EQ(claimed.state, SlotState::Failed);
  EXPECT_EQ(abandoned.state, SlotState::Free);
  EXPECT_EQ(done.state, SlotState::Done);  // its caller collects it
}

TEST(RequestSlot, AStartingEngineWorkerForgetsTheClaimsOfTheOneBefore) {
  RequestSlot claimed = slot_in(SlotState::Claimed), abandoned = slot_in(SlotState::Abandoned);
  RequestSlot queued = slot_in(SlotState::Queued);
  EXPECT_TRUE(claimed.forget_claim());
  EXPECT_TRUE(abandoned.forget_claim());
  EXPECT_FALSE(queued.forget_claim());  // still to be claimed by the new one
  EXPECT_EQ(claimed.state, SlotState::Free);
  EXPECT_EQ(abandoned.state, SlotState::Free);
  EXPECT_EQ(queued.state, SlotState::Queued);
}

TEST(RequestSlot, RequestIdsDifferWithinAndBetweenProcessesAndAreNeverZero) {
  RequestIds first, second;
  const uint64_t a = first.next(100), b = first.next(100), c = second.next(101);
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(b, c);
  EXPECT_NE(a, 0u);
}

}  // namespace
}  // namespace kvg::worker_protocol
