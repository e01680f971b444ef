// Context beyond memory (engine/mapped_kv.hpp): attention that reads the KV
// of positions below a mapped chain's end from the artifact files in place
// gives the same logits bytes as a resident graft and as a monolithic
// recompute, whatever the split (not aligned to 32), the thread count and the
// ISA; a context larger than the KV budget runs mapped although a resident
// one is refused; damaged or unusable artifacts are refused by name. The
// files a server maps from (engine/mapped_kv_files.hpp) are hashed once,
// rebuilt when damaged or deleted, and bounded.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>

#include "common/error.hpp"
#include "engine/graft.hpp"
#include "engine/mapped_kv.hpp"
#include "engine/mapped_kv_files.hpp"
#include "engine/memory_artifacts.hpp"
#include "kernels/cpu/attention.hpp"
#include "storage/file_store.hpp"
#include "tests/support/data_paths.hpp"
#include "tests/support/synth_fixture.hpp"

namespace kvg {
namespace {

// Flips one bit of the byte in the middle of the file at `path`, in place.
void flip_middle_byte(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr) << path;
  ASSERT_EQ(std::fseek(f, 0, SEEK_END), 0);
  const long middle = std::ftell(f) / 2;
  ASSERT_EQ(std::fseek(f, middle, SEEK_SET), 0);
  const int c = std::fgetc(f);
  ASSERT_EQ(std::fseek(f, middle, SEEK_SET), 0);
  std::fputc(c ^ 0x10, f);
  std::fclose(f);
}

std::vector<Isa> attention_isas() {  // the two attention kernels: scalar, and AVX-512 where the CPU has it
  std::vector<Isa> isas = {Isa::Scalar};
  if (detect_isa() == Isa::Avx512) isas.push_back(Isa::Avx512);
  return isas;
}

bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// --- the kernel: a layout split into segments reads the same rows ---------

// The rows of positions [0, n) of a [position][row_stride] array, split at
// `bounds` into segments that each live in a buffer of their own (the last
// part becomes the resident rows), so no read can reach across by accident.
struct SplitRows {
  std::vector<std::vector<float>> k, v;  // one pair per segment, then the resident rows
  std::vector<KvSegment> segments;

  SplitRows(const std::vector<float>& all_k, const std::vector<float>& all_v, int64_t row_stride, int64_t n,
            const std::vector<int64_t>& bounds) {
    int64_t begin = 0;
    for (int64_t end : bounds) {
      k.emplace_back(all_k.begin() + begin * row_stride, all_k.begin() + end * row_stride);
      v.emplace_back(all_v.begin() + begin * row_stride, all_v.begin() + end * row_stride);
      begin = end;
    }
    k.emplace_back(all_k.begin() + begin * row_stride, all_k.begin() + n * row_stride);
    v.emplace_back(all_v.begin() + begin * row_stride, all_v.begin() + n * row_stride);
    begin = 0;
    for (size_t i = 0; i < bounds.size(); ++i) {
      segments.push_back(KvSegment{begin, bounds[i], k[i].data(), v[i].data()});
      begin = bounds[i];
    }
  }
  KvLayout layout(int64_t row_stride, int64_t head_offset) const {
    return KvLayout{k.back().data(), v.back().data(), row_stride, head_offset, segments};
  }
};

TEST(SegmentedAttention, SameBitsAsContiguousRowsForEverySplitAndIsa) {
  std::mt19937 rng(21);
  std::normal_distribution<float> value(0.0f, 1.5f);
  const int head_dim = 40;  // not a multiple of 16: the AVX-512 path's masked tail
  const int64_t heads = 2, row_stride = heads * head_dim, n = 110;
  std::vector<float> k(size_t(n * row_stride)), v(k.size()), q(static_cast<size_t>(head_dim));
  for (auto& x : k) x = value(rng);
  for (auto& x : v) x = value(rng);
  for (auto& x : q) x = value(rng);
  std::vector<int64_t> every_row;
  for (int64_t p = 1; p <= 70; ++p) every_row.push_back(p);
  const std::vector<std::vector<int64_t>> splits = {
      {1}, {31}, {32}, {33}, {17, 50, 81}, {5, 6, 7, 64, 65}, every_row, {109}, {n}};
  for (const auto& bounds : splits) {
    const SplitRows split(k, v, row_stride, n, bounds);
    for (int64_t head_offset : {int64_t(0), int64_t(head_dim)})
      for (const AttentionExtras extras : {AttentionExtras{}, AttentionExtras{37, 0.0f}, AttentionExtras{0, 2.0f}})
        for (int64_t pos : {int64_t(0), int64_t(16), int64_t(31), int64_t(32), int64_t(33), int64_t(70),
                            int64_t(96), int64_t(109)}) {
          std::vector<float> expected(static_cast<size_t>(head_dim)), out(static_cast<size_t>(head_dim));
          attention_head(q.data(), KvLayout{k.data(), v.data(), row_stride, head_offset}, head_dim, pos, 0.25f,
                         expected.data(), Isa::Scalar, extras);
          for (Isa isa : attention_isas()) {
            attention_head(q.data(), split.layout(row_stride, head_offset), head_dim, pos, 0.25f, out.data(), isa,
                           extras);
            ASSERT_TRUE(same_bytes(out, expected)) << isa_name(isa) << " split " << bounds.front() << ".."
                                                   << bounds.back() << " position " << pos;
          }
        }
  }
}

// --- the engine: a mapped chain against a resident graft and a recompute ---

class MappedKvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::load_synth(test::small_synth_options(), "mapped_kv");  // 128 positions, GQA
    store_ = std::make_unique<FileStore>(test::temp_dir("mapped_kv_store"));
    std::mt19937 rng(3);
    std::uniform_int_distribution<int32_t> id(3, model_->config().n_vocab - 1);
    tokens_ = {1};
    while (tokens_.size() < 120) tokens_.push_back(id(rng));
  }

  // Captures positions [from, to) after grafting `parent` (resident) and
  // stores the artifact in the file store.
  Digest capture(int64_t from, int64_t to, std::optional<Digest> parent) {
    EngineOptions options;
    options.recipe = recipe_;
    Session session(model_, options);
    if (parent) graft(session, *parent, memory_.opener());
    session.prefill(std::span<const int32_t>(tokens_.data() + from, size_t(to - from)), 0, LogitsFor::None, nullptr);
    const Digest id = memory_.capture_from(session, from, to, parent);
    MemorySource bytes(memory_.bytes.at(id));
    EXPECT_EQ(store_->put(bytes), id);
    return id;
  }
  ArtifactPathOf path_of() {
    return [this](const Digest& id) { return store_->path_of(id); };
  }
  // A store of its own holding copies of `ids`, to damage without touching store_.
  FileStore copies_of(const char* name, std::initializer_list<Digest> ids) {
    FileStore copy(test::temp_dir(name));
    for (const Digest& id : ids) {
      MemorySource bytes(memory_.bytes.at(id));
      copy.put(bytes);
    }
    return copy;
  }
  // Logits of positions [from, end) from one monolithic prefill.
  std::vector<float> recompute(int64_t from, const EngineOptions& options) {
    Session session(model_, options);
    std::vector<float> all;
    session.prefill(tokens_, 0, LogitsFor::All, &all);
    const size_t vocab = size_t(model_->config().n_vocab);
    return {all.begin() + from * int64_t(vocab), all.end()};
  }
  // The rest of the prompt after what the session holds: half in one
  // prefill, the other half token by token (decode steps).
  std::vector<float> continue_prompt(Session& session) {
    const int64_t from = session.n_past(), n = int64_t(tokens_.size());
    const int64_t half = from + (n - from) / 2;
    std::vector<float> out, part;
    session.prefill(std::span<const int32_t>(tokens_.data() + from, size_t(half - from)), 0, LogitsFor::All, &out);
    for (int64_t p = half; p < n; ++p) {
      session.forward(std::span<const int32_t>(tokens_.data() + p, 1), LogitsFor::Last, &part);
      out.insert(out.end(), part.begin(), part.end());
    }
    return out;
  }

  // Mapped vs resident graft vs monolithic recompute of the rest of the
  // prompt after `leaf`, on every attention ISA and on 1 and 2 threads.
  void expect_exact(const Digest& leaf) {
    for (Isa isa : attention_isas())
      for (int threads : {1, 2}) {
        EngineOptions options;
        options.recipe = recipe_;
        options.isa = isa;
        options.threads = threads;
        Session mapped(model_, options);
        const GraftedChain chain = graft_mapped(mapped, leaf, path_of(), tokens_);
        ASSERT_EQ(mapped.mapped_end(), chain.n_tokens);
        EXPECT_EQ(mapped.kv_cache().held_bytes(), 0);  // nothing resident before the first forward
        Session resident(model_, options);
        graft(resident, leaf, memory_.opener(), tokens_);
        ASSERT_EQ(resident.n_past(), mapped.n_past());
        const std::vector<float> from_mapped = continue_prompt(mapped);
        const std::vector<float> from_resident = continue_prompt(resident);
        const std::vector<float> monolithic = recompute(chain.n_tokens, options);
        EXPECT_TRUE(same_bytes(from_mapped, from_resident))
            << chain.n_tokens << " mapped, " << isa_name(isa) << ", " << threads << " threads";
        EXPECT_TRUE(same_bytes(from_mapped, monolithic))
            << chain.n_tokens << " mapped, " << isa_name(isa) << ", " << threads << " threads";
        // The cache held the session's own positions only.
        EXPECT_LT(mapped.kv_cache().held_bytes(), resident.kv_cache().held_bytes());
      }
  }

  std::shared_ptr<const Model> model_;
  std::unique_ptr<FileStore> store_;
  MemoryArtifacts memory_;
  std::vector<int32_t> tokens_;
  Recipe recipe_{};  // what captures and sessions run under
};

TEST_F(MappedKvTest, LogitsEqualResidentGraftAndRecomputeAtUnalignedSplits) {
  const Digest a = capture(0, 37, std::nullopt);
  const Digest b = capture(37, 70, a);
  const Digest single = capture(0, 33, std::nullopt);
  const Digest one = capture(0, 1, std::nullopt);
  for (const Digest& leaf : {b, single, one, a}) expect_exact(leaf);
}

// Sliding-window layers (first visible block entered mid-block) and
// soft-capped scores read mapped rows the same way.
TEST_F(MappedKvTest, WindowedAndSoftcappedLayersAreExactToo) {
  SynthOptions gemma2 = test::small_synth_options();
  gemma2.architecture = "gemma2";  // alternate 40-position windows, attention and final soft-caps
  model_ = test::load_synth(gemma2, "mapped_kv_gemma2");
  const Digest a = capture(0, 29, std::nullopt);
  expect_exact(capture(29, 75, a));
}

// Compact KV (bf16, i8 rows): widened as attention reads them, into the
// floats a resident cache of that storage holds, so the bits are its bits.
TEST_F(MappedKvTest, CompactKvChainsAreWidenedAsReadAndExactToo) {
  for (KvStorage kv : {KvStorage::BF16, KvStorage::I8}) {
    recipe_ = Recipe{Arithmetic::F32, kv};
    const Digest a = capture(0, 37, std::nullopt);
    const Digest b = capture(37, 70, a);
    expect_exact(b);
    expect_exact(capture(0, 64, std::nullopt));  // a chain ending on a block boundary
  }
}

TEST_F(MappedKvTest, AChainOfAnotherKvStorageIsRefusedByName) {
  recipe_ = Recipe{Arithmetic::F32, KvStorage::I8};
  const Digest compact = capture(0, 40, std::nullopt);
  Session f32(model_, EngineOptions{});
  try {
    graft_mapped(f32, compact, path_of(), tokens_);
    FAIL() << "an i8 chain was mapped into an f32 session";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("i8"), std::string::npos) << e.what();
  }
  EXPECT_EQ(f32.mapped_end(), 0);
}

TEST_F(MappedKvTest, ContextBeyondTheKvBudgetRunsMappedAndStaysExact) {
  const Digest a = capture(0, 45, std::nullopt);
  const Digest leaf = capture(45, 80, a);
  EngineOptions bounded;
  const int64_t per_position = Session(model_, bounded).kv_cache().bytes_for(1);
  // Room for the 40 positions after the chain, not for the 120 of the context.
  bounded.max_kv_bytes = 40 * per_position;
  bounded.kv_limit_name = "--max-kv-memory";
  {
    Session resident(model_, bounded);
    try {
      graft(resident, leaf, memory_.opener(), tokens_);
      FAIL() << "a resident graft beyond the budget was not refused";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::OutOfRange);
      EXPECT_NE(std::string(e.what()).find("above --max-kv-memory"), std::string::npos) << e.what();
    }
    Session whole(model_, bounded);
    EXPECT_THROW(whole.prefill(tokens_, 0, LogitsFor::None, nullptr), Error);
  }
  Session mapped(model_, bounded);
  graft_mapped(mapped, leaf, path_of(), tokens_);
  const std::vector<float> logits = continue_prompt(mapped);
  EXPECT_LE(mapped.kv_cache().held_bytes(), bounded.max_kv_bytes);
  EXPECT_TRUE(same_bytes(logits, recompute(80, EngineOptions{})));
  // One position more than the budget's 40 is refused, mapped or not.
  EXPECT_THROW(mapped.forward(std::span<const int32_t>(tokens_.data(), 1), LogitsFor::None, nullptr), Error);
}

TEST_F(MappedKvTest, ACaptureContinuesTheMappedChain) {
  const Digest root = capture(0, 50, std::nullopt);
  Session mapped(model_, EngineOptions{});
  graft_mapped(mapped, root, path_of(), tokens_);
  mapped.prefill(std::span<const int32_t>(tokens_.data() + 50, 30), 0, LogitsFor::None, nullptr);
  // Positions below the mapped end are not the session's to capture or drop.
  MemorySink sink;
  try {
    kvg::capture(mapped, 40, 80, root, sink);
    FAIL() << "a capture of mapped positions was not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mapped"), std::string::npos) << e.what();
  }
  EXPECT_THROW(mapped.truncate(49), Error);
  const Digest link = memory_.capture_from(mapped, 50, 80, root);
  // The link the mapped session wrote is the one a resident session writes.
  Session resident(model_, EngineOptions{});
  graft(resident, root, memory_.opener(), tokens_);
  resident.prefill(std::span<const int32_t>(tokens_.data() + 50, 30), 0, LogitsFor::None, nullptr);
  MemorySink again;
  EXPECT_EQ(kvg::capture(resident, 50, 80, root, again), link);
}

TEST_F(MappedKvTest, DamagedOrForeignArtifactsAreRefusedBeforeUse) {
  const Digest root = capture(0, 40, std::nullopt);
  const Digest leaf = capture(40, 60, root);
  // A flipped payload byte in the root's file: the hash check names it.
  FileStore damaged = copies_of("mapped_kv_damaged", {root, leaf});
  flip_middle_byte(damaged.path_of(root));
  Session session(model_, EngineOptions{});
  try {
    graft_mapped(session, leaf, [&](const Digest& id) { return damaged.path_of(id); }, tokens_);
    FAIL() << "a damaged artifact was mapped";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Corrupt);
    EXPECT_NE(std::string(e.what()).find("hash mismatch"), std::string::npos) << e.what();
  }
  EXPECT_EQ(session.n_past(), 0);
  EXPECT_EQ(session.mapped_end(), 0);
  // Another model's session refuses the chain by its fingerprint.
  SynthOptions other = test::small_synth_options();
  other.seed = 99;
  Session foreign(test::load_synth(other, "mapped_kv_other"), EngineOptions{});
  try {
    graft_mapped(foreign, leaf, path_of());
    FAIL() << "another model's artifact was mapped";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::ModelMismatch);
  }
  // A prompt that diverges from the chain, and a session that is not empty.
  std::vector<int32_t> wrong = tokens_;
  wrong[10] = wrong[10] == 5 ? 6 : 5;
  EXPECT_THROW(graft_mapped(session, leaf, path_of(), wrong), Error);
  session.prefill(std::span<const int32_t>(tokens_.data(), 1), 0, LogitsFor::None, nullptr);
  EXPECT_THROW(graft_mapped(session, leaf, path_of()), Error);
}

TEST_F(MappedKvTest, AFileTruncatedWhileMappedFailsTheCallInsteadOfSigbus) {
  const Digest root = capture(0, 64, std::nullopt);
  // A copy of the store's file, so the store itself stays whole.
  FileStore copy = copies_of("mapped_kv_truncated", {root});
  Session session(model_, EngineOptions{});
  graft_mapped(session, root, [&](const Digest& id) { return copy.path_of(id); }, tokens_);
  ASSERT_EQ(::truncate(copy.path_of(root).c_str(), 100), 0);
  try {
    session.forward(std::span<const int32_t>(tokens_.data() + 64, 1), LogitsFor::Last, nullptr);
    FAIL() << "a forward pass over a truncated mapping did not fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Io);
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

// --- the files a server maps chains from ---

TEST_F(MappedKvTest, KvFilesAreAskedForOnceThenMappedWithTheSameBits) {
  const Digest root = capture(0, 40, std::nullopt);
  const Digest leaf = capture(40, 70, root);
  const std::vector<Digest> chain = {root, leaf};
  MappedKvFiles files(test::temp_dir("mapped_kv_files"), int64_t{1} << 30);
  EXPECT_EQ(files.missing(chain), chain);
  for (const Digest& id : chain) files.put(id, memory_.bytes.at(id), chain);
  EXPECT_TRUE(files.missing(chain).empty());
  EXPECT_EQ(files.files(), 2u);
  EXPECT_EQ(files.bytes(), int64_t(memory_.bytes.at(root).size() + memory_.bytes.at(leaf).size()));
  Session mapped(model_, EngineOptions{});
  graft_mapped(mapped, leaf, [&](const Digest& id) { return files.path_of(id); }, tokens_, files.vouched());
  Session resident(model_, EngineOptions{});
  graft(resident, leaf, memory_.opener(), tokens_);
  EXPECT_TRUE(same_bytes(continue_prompt(mapped), continue_prompt(resident)));
  // Bytes that do not hash to the name they are supplied for are refused.
  EXPECT_THROW(files.put(root, memory_.bytes.at(leaf), chain), Error);
}

TEST_F(MappedKvTest, AVouchedFileIsNotHashedAgainAndAnUnvouchedOneIs) {
  const Digest root = capture(0, 40, std::nullopt);
  FileStore copy = copies_of("mapped_kv_vouched", {root});
  flip_middle_byte(copy.path_of(root));
  const ArtifactPathOf path_of = [&](const Digest& id) { return copy.path_of(id); };
  // Whoever vouches answers for the bytes: the hash is skipped (the format
  // checks are not), so a file a cache vouched for wrongly is not caught.
  Session trusting(model_, EngineOptions{});
  EXPECT_NO_THROW(graft_mapped(trusting, root, path_of, tokens_, [](const Digest&, const FileIdentity&) { return true; }));
  Session checking(model_, EngineOptions{});
  EXPECT_THROW(graft_mapped(checking, root, path_of, tokens_, [](const Digest&, const FileIdentity&) { return false; }),
               Error);
}

TEST_F(MappedKvTest, KvFilesDamagedOrDeletedAreRebuiltNeverServed) {
  const Digest root = capture(0, 40, std::nullopt);
  const Digest leaf = capture(40, 70, root);
  const std::vector<Digest> chain = {root, leaf};
  const std::string dir = test::temp_dir("mapped_kv_files_damage");
  {
    MappedKvFiles files(dir, int64_t{1} << 30);
    for (const Digest& id : chain) files.put(id, memory_.bytes.at(id), chain);
    // A flipped byte changes the file's identity: hashed again, removed, asked for.
    flip_middle_byte(files.path_of(root));
    EXPECT_EQ(files.missing(chain), std::vector<Digest>{root});
    EXPECT_NE(::access(files.path_of(root).c_str(), F_OK), 0);
    files.put(root, memory_.bytes.at(root), chain);
    // A deleted file is asked for again.
    ASSERT_EQ(::unlink(files.path_of(leaf).c_str()), 0);
    EXPECT_EQ(files.missing(chain), std::vector<Digest>{leaf});
    files.put(leaf, memory_.bytes.at(leaf), chain);
    EXPECT_TRUE(files.missing(chain).empty());
  }
  // A new process finds the files unverified: it hashes each once, and
  // removes a damaged one.
  flip_middle_byte(FileStore(dir).path_of(leaf));
  MappedKvFiles again(dir, int64_t{1} << 30);
  EXPECT_EQ(again.files(), 2u);
  EXPECT_EQ(again.missing(chain), std::vector<Digest>{leaf});
  again.put(leaf, memory_.bytes.at(leaf), chain);
  Session mapped(model_, EngineOptions{});
  graft_mapped(mapped, leaf, [&](const Digest& id) { return again.path_of(id); }, tokens_, again.vouched());
  EXPECT_TRUE(same_bytes(continue_prompt(mapped), recompute(70, EngineOptions{})));
}

TEST_F(MappedKvTest, KvFilesStayWithinTheirBoundSparingTheChainInHand) {
  const Digest a = capture(0, 40, std::nullopt);
  const Digest b = capture(0, 50, std::nullopt);
  const int64_t one = int64_t(memory_.bytes.at(b).size());
  MappedKvFiles files(test::temp_dir("mapped_kv_files_bound"), one + one / 2);
  files.put(a, memory_.bytes.at(a), std::vector<Digest>{a});
  files.put(b, memory_.bytes.at(b), std::vector<Digest>{b});  // a, used least recently, goes
  EXPECT_EQ(files.files(), 1u);
  EXPECT_EQ(files.missing(std::vector<Digest>{a, b}), std::vector<Digest>{a});
  // A chain larger than the bound is kept whole while it is in hand.
  const std::vector<Digest> both = {a, b};
  files.put(a, memory_.bytes.at(a), both);
  EXPECT_EQ(files.files(), 2u);
  EXPECT_GT(files.bytes(), one + one / 2);
}

}  // namespace
}  // namespace kvg
