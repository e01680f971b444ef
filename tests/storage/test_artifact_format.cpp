// Artifact format v1: round trips, every validation rule, damage detection at
// every byte, the pinned golden hash, and bounded memory when streaming.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "kernels/cpu/kv_rounding.hpp"
#include "storage/artifact_format.hpp"
#include "storage/little_endian.hpp"

// Counts live heap bytes so the streaming test can bound what the codec holds.
namespace {
std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};
constexpr size_t kPrefix = 16;  // keeps malloc's alignment for the caller

void* counted_alloc(size_t n) {
  auto* p = static_cast<unsigned char*>(std::malloc(n + kPrefix));
  if (!p) throw std::bad_alloc();
  std::memcpy(p, &n, sizeof n);
  int64_t live = g_live.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
  int64_t peak = g_peak.load();
  while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
  }
  return p + kPrefix;
}

void counted_free(void* q) {
  if (!q) return;
  auto* p = static_cast<unsigned char*>(q) - kPrefix;
  size_t n;
  std::memcpy(&n, p, sizeof n);
  g_live.fetch_sub(static_cast<int64_t>(n));
  std::free(p);
}
}  // namespace

void* operator new(size_t n) { return counted_alloc(n); }
void* operator new[](size_t n) { return counted_alloc(n); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, size_t) noexcept { counted_free(p); }
void operator delete[](void* p, size_t) noexcept { counted_free(p); }

namespace kvg {
namespace {

Digest fingerprint() { return sha256(std::string_view("kvgraft test model")); }

ArtifactHeader small_header(bool with_parent, uint32_t kv_dtype = kKvDtypeF32) {
  ArtifactHeader h;
  h.model_fingerprint = fingerprint();
  h.recipe = "f32-portable-v1";
  h.kv_dtype = kv_dtype;
  h.n_layer = 2;
  h.n_head_kv = 2;
  h.head_dim = 3;
  h.tokens = {5, 6, 7};
  if (with_parent) {
    h.parent = sha256(std::string_view("the parent artifact"));
    h.position_start = 4;
    std::vector<uint32_t> chain = {1, 2, 3, 4, 5, 6, 7};
    h.chain_tokens_sha256 = hash_token_ids(chain);
  } else {
    h.chain_tokens_sha256 = hash_token_ids(h.tokens);
  }
  return h;
}

// A distinct, exactly representable value for every float of the payload.
float value_at(uint32_t layer, int kv, size_t i) { return static_cast<float>(layer * 1000 + kv * 500) + 0.25f * i; }

KvRowRounding rounding_for(uint32_t kv_dtype) {
  return kv_dtype == kKvDtypeBf16 ? KvRowRounding::Bf16 : kv_dtype == kKvDtypeI8 ? KvRowRounding::I8 : KvRowRounding::None;
}

// The K (kv 0) or V (kv 1) block of a layer: value_at, rounded to what the
// header's kv_dtype stores (as the forward pass rounds the KV cache).
std::vector<float> block_values(const ArtifactHeader& h, uint32_t layer, int kv) {
  std::vector<float> b(h.block_floats());
  for (size_t i = 0; i < b.size(); ++i) b[i] = value_at(layer, kv, i);
  round_kv_rows(rounding_for(h.kv_dtype), b.data(), int64_t(h.n_tokens()) * h.n_head_kv, int(h.head_dim));
  return b;
}

struct Written {
  std::vector<uint8_t> bytes;
  Digest identity;
};

Written write_artifact(const ArtifactHeader& h) {
  MemorySink sink;
  ArtifactWriter w(h, sink);
  for (uint32_t l = 0; l < h.n_layer; ++l) w.write_layer(l, block_values(h, l, 0).data(), block_values(h, l, 1).data());
  Digest id = w.finish();
  return {sink.bytes(), id};
}

// Reads everything through the streaming API, checking payload values.
Digest read_all(std::span<const uint8_t> bytes, ArtifactHeader* out = nullptr) {
  MemorySource src(bytes);
  ArtifactReader r(src);
  const ArtifactHeader& h = r.header();
  std::vector<float> K(h.block_floats()), V(h.block_floats());
  for (uint32_t l = 0; l < h.n_layer; ++l) r.read_layer(l, K.data(), V.data());
  Digest id = r.finish();
  if (out) *out = h;
  return id;
}

struct OverlappedRead {
  Digest identity;
  double hashed_behind_s;
};

// As a graft reads: hashing overlapped with the reads, every layer into
// blocks of its own left untouched until finish(); 64-byte reads, so a
// payload of a few hundred bytes is several chunks and the hasher starts.
// The values read are checked against what was written.
OverlappedRead read_all_overlapped(std::span<const uint8_t> bytes) {
  MemorySource src(bytes);
  ArtifactReader r(src, 64);
  r.overlap_hashing();
  const ArtifactHeader& h = r.header();
  std::vector<std::vector<float>> blocks(2 * h.n_layer, std::vector<float>(h.block_floats()));
  for (uint32_t l = 0; l < h.n_layer; ++l) r.read_layer(l, blocks[2 * l].data(), blocks[2 * l + 1].data());
  const Digest id = r.finish();
  for (uint32_t l = 0; l < h.n_layer; ++l)
    for (int kv = 0; kv < 2; ++kv) EXPECT_EQ(blocks[2 * l + kv], block_values(h, l, kv)) << "layer " << l;
  return {id, r.overlapped_hash_seconds()};
}

// Both ways of reading; each must throw.
void read_both_ways(std::span<const uint8_t> bytes, bool overlapped) {
  if (overlapped)
    read_all_overlapped(bytes);
  else
    read_all(bytes);
}

// Offset of the first byte after the recipe string (kv_dtype).
size_t middle(const ArtifactHeader& h) { return kHeaderFixedPrefix + h.recipe.size(); }

void expect_error(const std::vector<uint8_t>& bytes, ErrorCode code, const std::string& needle) {
  try {
    read_all(bytes);
    ADD_FAILURE() << "no error; expected " << error_code_name(code) << " containing \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

void patch_u32(std::vector<uint8_t>& b, size_t off, uint32_t v) { store_u32_le(b.data() + off, v); }

// The tests that hold for every kv_dtype, run under each.
class ArtifactFormatKv : public ::testing::TestWithParam<uint32_t> {
 protected:
  uint32_t dtype() const { return GetParam(); }
};

TEST_P(ArtifactFormatKv, RoundTripWithoutParent) {
  ArtifactHeader h = small_header(false, dtype());
  Written w = write_artifact(h);
  EXPECT_EQ(w.identity, sha256(w.bytes));
  ArtifactHeader back;
  EXPECT_EQ(read_all(w.bytes, &back), w.identity);
  EXPECT_EQ(back.version, 1u);
  EXPECT_FALSE(back.parent);
  EXPECT_EQ(back.model_fingerprint, h.model_fingerprint);
  EXPECT_EQ(back.recipe, h.recipe);
  EXPECT_EQ(back.tokens, h.tokens);
  EXPECT_EQ(back.chain_tokens_sha256, h.chain_tokens_sha256);
  EXPECT_EQ(back.n_layer, 2u);
  EXPECT_EQ(back.n_head_kv, 2u);
  EXPECT_EQ(back.head_dim, 3u);
  EXPECT_EQ(back.position_start, 0u);
  EXPECT_EQ(back.kv_dtype, dtype());

  // The payload comes back bit for bit.
  MemorySource src(w.bytes);
  ArtifactReader r(src);
  std::vector<float> K(h.block_floats()), V(h.block_floats());
  for (uint32_t l = 0; l < h.n_layer; ++l) {
    r.read_layer(l, K.data(), V.data());
    ASSERT_EQ(0, std::memcmp(K.data(), block_values(h, l, 0).data(), K.size() * 4)) << l;
    ASSERT_EQ(0, std::memcmp(V.data(), block_values(h, l, 1).data(), V.size() * 4)) << l;
    if (dtype() == kKvDtypeF32) {
      for (size_t i = 0; i < K.size(); ++i) ASSERT_EQ(K[i], value_at(l, 0, i));
    }
  }
  EXPECT_EQ(r.finish(), w.identity);
}

TEST_P(ArtifactFormatKv, RoundTripWithParent) {
  ArtifactHeader h = small_header(true, dtype());
  Written w = write_artifact(h);
  ArtifactHeader back;
  EXPECT_EQ(read_all(w.bytes, &back), w.identity);
  ASSERT_TRUE(back.parent);
  EXPECT_EQ(*back.parent, *h.parent);
  EXPECT_EQ(back.position_start, 4u);
  EXPECT_EQ(back.position_end(), 7u);
  EXPECT_EQ(back.chain_tokens_sha256, h.chain_tokens_sha256);
  EXPECT_EQ(load_u32_le(w.bytes.data() + 12), kFlagHasParent);
  EXPECT_EQ(std::memcmp(w.bytes.data() + 48, h.parent->data(), 32), 0);
}

TEST_P(ArtifactFormatKv, ExactByteLengthAndLayout) {
  ArtifactHeader h = small_header(false, dtype());
  Written w = write_artifact(h);
  // 140 + 15 (recipe) + 3*4 (tokens) = 167, padded to 192; payload 2 layers *
  // (K+V) * 3 tokens * 2 heads, each head's row of 3 dims 3 * 4 bytes (f32),
  // 3 * 2 (bf16) or 1 + 3 (i8): 288, 144 or 96 bytes; trailer 32.
  const size_t payload = dtype() == kKvDtypeF32 ? 288 : dtype() == kKvDtypeBf16 ? 144 : 96;
  EXPECT_EQ(h.header_bytes(), 192u);
  EXPECT_EQ(h.payload_bytes(), payload);
  EXPECT_EQ(h.total_bytes(), 192 + payload + 32);
  EXPECT_EQ(h.row_floats(), 6u);
  ASSERT_EQ(w.bytes.size(), h.total_bytes());
  EXPECT_EQ(load_u32_le(w.bytes.data() + 140 + 15 - 56), dtype());  // kv_dtype right after the recipe
  EXPECT_EQ(std::memcmp(w.bytes.data(), "KVGA", 4), 0);
  EXPECT_EQ(load_u32_le(w.bytes.data() + 4), 1u);
  EXPECT_EQ(load_u32_le(w.bytes.data() + 8), 192u);
  EXPECT_EQ(load_u32_le(w.bytes.data() + 80), 15u);
  EXPECT_EQ(load_u32_le(w.bytes.data() + 140 + 15), 5u);  // first token id
  for (size_t i = 167; i < 192; ++i) EXPECT_EQ(w.bytes[i], 0) << i;
  const size_t end = h.total_bytes() - 32;
  if (dtype() == kKvDtypeF32) {
    // Payload starts with layer 0's K, element 0, little-endian.
    float k0;
    std::memcpy(&k0, w.bytes.data() + 192, 4);
    EXPECT_EQ(k0, value_at(0, 0, 0));
    float v1_last;  // last V float of layer 1, just before the trailer
    std::memcpy(&v1_last, w.bytes.data() + end - 4, 4);
    EXPECT_EQ(v1_last, value_at(1, 1, h.block_floats() - 1));
  } else if (dtype() == kKvDtypeBf16) {
    // u16 LE high halves: layer 0 K element 1 is 0.25 (0x3e80), layer 1 V's
    // last is 1504.25, rounded to 1504 (0x44bc; the bf16 step there is 8).
    EXPECT_EQ(w.bytes[194] | w.bytes[195] << 8, 0x3e80);
    EXPECT_EQ(w.bytes[end - 2] | w.bytes[end - 1] << 8, 0x44bc);
  } else {
    // Row = exponent byte, then 3 int8. Layer 0 K head 0 is {0, 0.25, 0.5}:
    // e = -7 (127 * 2^-7 >= 0.5 > 127 * 2^-8), q = {0, 32, 64}. Layer 1 V's
    // last row is {1503.75, 1504, 1504.25}: e = 4 (127 * 16 = 2032 >= 1504.25
    // > 127 * 8), q = rne(93.98, 94, 94.02) = 94.
    const uint8_t first[] = {uint8_t(int8_t(-7)), 0, 32, 64}, last[] = {4, 94, 94, 94};
    EXPECT_EQ(0, std::memcmp(w.bytes.data() + 192, first, 4));
    EXPECT_EQ(0, std::memcmp(w.bytes.data() + end - 4, last, 4));
  }
  // Trailer: SHA-256 of everything before it.
  Digest trailer;
  std::memcpy(trailer.data(), w.bytes.data() + end, 32);
  EXPECT_EQ(trailer, sha256(std::span(w.bytes).first(end)));
}

TEST_P(ArtifactFormatKv, EncodeHeaderMatchesWriterPrefixAndParses) {
  ArtifactHeader h = small_header(true, dtype());
  Written w = write_artifact(h);
  std::vector<uint8_t> header = encode_header(h);
  ASSERT_EQ(header.size(), h.header_bytes());
  EXPECT_TRUE(std::equal(header.begin(), header.end(), w.bytes.begin()));
  ArtifactHeader a = parse_header(header);
  ArtifactHeader b = parse_header(w.bytes);
  EXPECT_EQ(a.tokens, h.tokens);
  EXPECT_EQ(b.parent, h.parent);
  VerifiedArtifact v = verify_artifact(std::span<const uint8_t>(w.bytes));
  EXPECT_EQ(v.identity, w.identity);
  EXPECT_EQ(v.header.recipe, h.recipe);
}

TEST_P(ArtifactFormatKv, FlippingAnyByteIsDetected) {
  for (bool parent : {false, true}) {
    Written w = write_artifact(small_header(parent, dtype()));
    for (size_t i = 0; i < w.bytes.size(); ++i) {
      for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xff}}) {
        std::vector<uint8_t> bad = w.bytes;
        bad[i] ^= mask;
        for (bool overlapped : {false, true}) {
          try {
            read_both_ways(bad, overlapped);
            ADD_FAILURE() << "flip of byte " << i << " with mask " << int(mask) << " went unnoticed"
                          << (overlapped ? " (hashing overlapped)" : "");
          } catch (const Error& e) {
            EXPECT_TRUE(e.code() == ErrorCode::Corrupt || e.code() == ErrorCode::Unsupported)
                << "byte " << i << ": " << e.what();
          }
        }
        EXPECT_THROW(verify_artifact(std::span<const uint8_t>(bad)), Error) << i;
      }
    }
  }
}

TEST_P(ArtifactFormatKv, TruncationAtEveryLengthIsDetected) {
  Written w = write_artifact(small_header(false, dtype()));
  for (size_t n = 0; n < w.bytes.size(); ++n) {
    std::vector<uint8_t> cut(w.bytes.begin(), w.bytes.begin() + n);
    for (bool overlapped : {false, true}) try {
      read_both_ways(cut, overlapped);
      ADD_FAILURE() << "truncation to " << n << " bytes went unnoticed" << (overlapped ? " (hashing overlapped)" : "");
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Corrupt) << n;
      EXPECT_EQ(std::string(e.what()).rfind("artifact truncated: expected ", 0), 0u) << n << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("got " + std::to_string(n)), std::string::npos) << e.what();
      // Once the geometry is known the message names the full size.
      if (n >= 192) {
        EXPECT_EQ(std::string(e.what()),
                  "artifact truncated: expected " + std::to_string(w.bytes.size()) + " bytes, got " + std::to_string(n));
      }
    }
  }
}

// A graft's way of reading gives the same identity and values, and for fp32
// (read in place) really hashes on the hasher's thread; compact dtypes decode
// through a reused buffer, so they hash inline.
TEST_P(ArtifactFormatKv, OverlappedHashingReadsTheSame) {
  for (bool parent : {false, true}) {
    Written w = write_artifact(small_header(parent, dtype()));
    const OverlappedRead got = read_all_overlapped(w.bytes);
    EXPECT_EQ(got.identity, w.identity);
    if (dtype() == kKvDtypeF32)
      EXPECT_GT(got.hashed_behind_s, 0.0) << "the payload was not hashed behind the reads";
    else
      EXPECT_EQ(got.hashed_behind_s, 0.0);
  }
}

TEST(ArtifactFormat, EmptyInput) {
  expect_error({}, ErrorCode::Corrupt, "artifact truncated: expected 4 bytes, got 0");
  EXPECT_THROW(parse_header({}), Error);
}

TEST(ArtifactFormat, WrongMagic) {
  Written w = write_artifact(small_header(false));
  w.bytes[3] = 'B';
  expect_error(w.bytes, ErrorCode::Corrupt, "bad magic");
  std::vector<uint8_t> text = {'h', 'e', 'l', 'l', 'o'};
  expect_error(text, ErrorCode::Corrupt, "bad magic");
}

TEST(ArtifactFormat, UnknownVersionIsUnsupported) {
  Written w = write_artifact(small_header(false));
  patch_u32(w.bytes, 4, 2);
  expect_error(w.bytes, ErrorCode::Unsupported, "version 2");
  ArtifactHeader h = small_header(false);
  h.version = 2;
  try {
    encode_header(h);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Unsupported);
  }
}

TEST(ArtifactFormat, NonzeroPadding) {
  Written w = write_artifact(small_header(false));
  w.bytes[191] = 1;
  expect_error(w.bytes, ErrorCode::Corrupt, "nonzero padding byte at offset 191");
}

TEST(ArtifactFormat, ExtraTrailingBytes) {
  Written w = write_artifact(small_header(false));
  w.bytes.push_back(0);
  expect_error(w.bytes, ErrorCode::Corrupt, "extra data after its trailer");
}

TEST_P(ArtifactFormatKv, TrailerMismatchMessage) {
  Written w = write_artifact(small_header(false, dtype()));
  // A payload byte whose flip keeps the row canonical: an f32 bit, a bf16
  // mantissa bit, an i8 row's lowest q bit (the row's largest |q| is kept).
  w.bytes[dtype() == kKvDtypeF32 ? 300 : 194] ^= 1;
  expect_error(w.bytes, ErrorCode::Corrupt, "artifact trailer hash mismatch (damaged or truncated)");
}

TEST(ArtifactFormat, ReaderRejectsFieldsOutOfRange) {
  const ArtifactHeader h = small_header(false);
  const Written w = write_artifact(h);
  const size_t m = middle(h);
  struct Case {
    size_t offset;
    uint32_t value;
    ErrorCode code;
    const char* needle;
  };
  const Case cases[] = {
      {m + 0, 3, ErrorCode::Unsupported, "kv_dtype 3"},
      {m + 4, 0, ErrorCode::Corrupt, "n_layer 0 out of range"},
      {m + 4, 1025, ErrorCode::Corrupt, "n_layer 1025 out of range"},
      {m + 8, 0, ErrorCode::Corrupt, "n_head_kv 0"},
      {m + 8, 1025, ErrorCode::Corrupt, "n_head_kv 1025"},
      {m + 12, 0, ErrorCode::Corrupt, "head_dim 0"},
      {m + 12, 4097, ErrorCode::Corrupt, "head_dim 4097"},
      {m + 16, 0x7fffffff, ErrorCode::Corrupt, "exceeds 2^31"},
      {m + 20, 0, ErrorCode::Corrupt, "n_tokens is 0"},
      {m + 20, 20, ErrorCode::Corrupt, "does not match recipe length"},
      {m + 20, 0xffffffff, ErrorCode::Corrupt, "exceeds 2^31"},
      {8, 128, ErrorCode::Corrupt, "header_bytes 128"},
      {8, 193, ErrorCode::Corrupt, "header_bytes 193"},
      {8, 256, ErrorCode::Corrupt, "does not match recipe length"},
      {12, 2, ErrorCode::Corrupt, "reserved flag bits"},
      {12, 1, ErrorCode::Corrupt, "has-parent flag set but parent_sha256 is all zero"},
      {80, 0, ErrorCode::Corrupt, "recipe length 0"},
      {80, 65, ErrorCode::Corrupt, "recipe length 65"},
      {m + 16, 3, ErrorCode::Corrupt, "without a parent (must be 0)"},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> bad = w.bytes;
    patch_u32(bad, c.offset, c.value);
    SCOPED_TRACE(c.needle);
    expect_error(bad, c.code, c.needle);
  }
  std::vector<uint8_t> bad = w.bytes;
  bad[50] = 7;  // parent bytes without the flag
  expect_error(bad, ErrorCode::Corrupt, "parent_sha256 is nonzero but the has-parent flag is clear");
  bad = w.bytes;
  bad[m + 24] ^= 1;  // chain hash of a root no longer matches its tokens
  expect_error(bad, ErrorCode::Corrupt, "chain_tokens_sha256 does not match");
  bad = w.bytes;
  bad[84] = 0x01;  // control character in the recipe
  expect_error(bad, ErrorCode::Corrupt, "not clean UTF-8");
  bad = w.bytes;
  std::memset(bad.data() + 16, 0, 32);
  expect_error(bad, ErrorCode::Corrupt, "model_fingerprint is all zero");
}

TEST(ArtifactFormat, WriterRejectsInvalidHeaders) {
  auto expect_invalid = [](ArtifactHeader h, const char* needle) {
    SCOPED_TRACE(needle);
    MemorySink sink;
    try {
      ArtifactWriter w(h, sink);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_TRUE(sink.bytes().empty());
  };
  ArtifactHeader h = small_header(false);
  h.n_layer = 1025;
  expect_invalid(h, "n_layer 1025");
  h = small_header(false);
  h.tokens.clear();
  h.chain_tokens_sha256 = hash_token_ids(h.tokens);
  expect_invalid(h, "n_tokens is 0");
  h = small_header(false);
  h.recipe = std::string(65, 'x');
  expect_invalid(h, "recipe length 65");
  h = small_header(false);
  h.recipe = "";
  expect_invalid(h, "recipe length 0");
  h = small_header(false);
  h.recipe = "bad\xff";
  expect_invalid(h, "UTF-8");
  h = small_header(true);
  h.position_start = (1u << 31) - 2;
  expect_invalid(h, "exceeds 2^31");
  h = small_header(true);
  h.position_start = 0;
  expect_invalid(h, "position_start >= 1");
  h = small_header(true);
  h.parent = Digest{};
  expect_invalid(h, "parent_sha256 is all zero");
  h = small_header(false);
  h.chain_tokens_sha256 = Digest{};
  expect_invalid(h, "chain_tokens_sha256");
  h = small_header(false);
  h.model_fingerprint = Digest{};
  expect_invalid(h, "model_fingerprint");
}

TEST_P(ArtifactFormatKv, WriterEnforcesOrderAndCompleteness) {
  ArtifactHeader h = small_header(false, dtype());
  std::vector<float> K(h.block_floats()), V(h.block_floats());
  MemorySink sink;
  ArtifactWriter w(h, sink);
  EXPECT_THROW(w.write_layer(1, K.data(), V.data()), Error);
  w.write_layer(0, K.data(), V.data());
  EXPECT_THROW(w.write_layer(0, K.data(), V.data()), Error);
  EXPECT_THROW(w.finish(), Error);  // layer 1 missing
  std::vector<uint8_t> too_much(h.layer_bytes() + 1);
  EXPECT_THROW(w.write_payload(too_much), Error);
  w.write_layer(1, K.data(), V.data());
  EXPECT_NO_THROW(w.finish());
  EXPECT_THROW(w.finish(), Error);
}

TEST_P(ArtifactFormatKv, ReaderEnforcesOrder) {
  Written w = write_artifact(small_header(false, dtype()));
  MemorySource src(w.bytes);
  ArtifactReader r(src);
  std::vector<float> K(r.header().block_floats()), V(K.size());
  EXPECT_THROW(r.read_layer(1, K.data(), V.data()), Error);
  r.read_layer(0, K.data(), V.data());
  EXPECT_EQ(r.finish(), w.identity);  // finish drains the unread layer
}

TEST_P(ArtifactFormatKv, RawPayloadCopyReproducesTheArtifact) {
  Written w = write_artifact(small_header(true, dtype()));
  MemorySource src(w.bytes);
  ArtifactReader r(src, 64);  // tiny chunks exercise the bounded loop
  MemorySink sink;
  ArtifactWriter copy(r.header(), sink);
  uint8_t buf[7];
  while (size_t n = r.read_payload(buf)) copy.write_payload({buf, n});
  EXPECT_EQ(r.finish(), w.identity);
  EXPECT_EQ(copy.finish(), w.identity);
  EXPECT_EQ(sink.bytes(), w.bytes);
}

// Returns at most `max` bytes per read, to prove nothing assumes full reads.
class DribbleSource final : public ByteSource {
 public:
  DribbleSource(std::span<const uint8_t> bytes, size_t max) : inner_(bytes), max_(max) {}
  size_t read(uint8_t* buf, size_t n) override { return inner_.read(buf, std::min(n, max_)); }

 private:
  MemorySource inner_;
  size_t max_;
};

TEST_P(ArtifactFormatKv, ShortReadsAreFine) {
  Written w = write_artifact(small_header(true, dtype()));
  for (size_t max : {1, 3, 64}) {
    DribbleSource src(w.bytes, max);
    EXPECT_EQ(verify_artifact(src).identity, w.identity);
  }
}

// Rewrites the trailer after a payload edit, so that only the canonical-form
// rule can reject the bytes.
void refresh_trailer(std::vector<uint8_t>& b) {
  const Digest t = sha256(std::span<const uint8_t>(b).first(b.size() - 32));
  std::memcpy(b.data() + b.size() - 32, t.data(), 32);
}

// The canonical form makes each KV's encoding unique (so its identity): every
// other encoding of the same values is refused by the reader, by
// verify_artifact and by the writer's raw path.
TEST(ArtifactFormatCanonical, NonCanonicalRowsAreRefusedEverywhere) {
  struct Case {
    uint32_t dtype;
    size_t offset;  // within the payload
    std::vector<uint8_t> bytes;
    const char* needle;
  };
  // Layer 0 K, token 0, head 0 starts the payload: {0, 0.25, 0.5}, i8 row {-7, 0, 32, 64}.
  const Case cases[] = {
      {kKvDtypeI8, 0, {uint8_t(int8_t(-6)), 0, 16, 32}, "largest |q| is 32 < 64 with exponent -6"},  // same values, e + 1
      {kKvDtypeI8, 4, {0x00, 0, 0, 0}, "largest |q| is 0 < 64 with exponent 0"},  // a zero row must use e = -128
      {kKvDtypeI8, 0, {uint8_t(int8_t(-7)), 0x80, 32, 64}, "element 0 is -128"},
      {kKvDtypeI8, 0, {122, 0, 32, 64}, "exponent 122 is above 121"},
      {kKvDtypeBf16, 2, {0xc1, 0x7f}, "a NaN other than the canonical 0x7fc0"},
      {kKvDtypeBf16, 2, {0xc0, 0xff}, "a NaN other than the canonical 0x7fc0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.needle);
    const ArtifactHeader h = small_header(false, c.dtype);
    std::vector<uint8_t> bad = write_artifact(h).bytes;
    std::memcpy(bad.data() + h.header_bytes() + c.offset, c.bytes.data(), c.bytes.size());
    refresh_trailer(bad);
    const std::string place = c.offset == 4 ? "layer 0 K, token 0, head 1: " : "layer 0 K, token 0, head 0: ";
    expect_error(bad, ErrorCode::Corrupt, "artifact has a non-canonical KV row, " + place);
    expect_error(bad, ErrorCode::Corrupt, c.needle);
    EXPECT_THROW(verify_artifact(std::span<const uint8_t>(bad)), Error);
    MemorySink sink;
    ArtifactWriter copy(h, sink);
    try {
      copy.write_payload(std::span<const uint8_t>(bad).subspan(h.header_bytes(), h.payload_bytes()));
      ADD_FAILURE() << "the writer copied a non-canonical payload";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(c.needle), std::string::npos) << e.what();
    }
  }
}

// Capture of a cache that was not rounded for its storage is a bug: the
// writer names the first row whose values are not what the dtype stores.
TEST(ArtifactFormatCanonical, WriterRefusesValuesThatAreNotRounded) {
  for (uint32_t dtype : {kKvDtypeBf16, kKvDtypeI8}) {
    const ArtifactHeader h = small_header(false, dtype);
    MemorySink sink;
    ArtifactWriter w(h, sink);
    w.write_layer(0, block_values(h, 0, 0).data(), block_values(h, 0, 1).data());
    std::vector<float> V = block_values(h, 1, 1);
    V[V.size() - 2] = 1504.0f + (dtype == kKvDtypeBf16 ? 0.5f : 1.0f);  // token 2, head 1: between two steps
    try {
      w.write_layer(1, block_values(h, 1, 0).data(), V.data());
      ADD_FAILURE() << "unrounded values were written as " << kv_dtype_name(dtype);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("KV row layer 1 V, token 2, head 1 is not what kv_dtype " +
                                           kv_dtype_name(dtype) + " stores"),
                std::string::npos)
          << e.what();
    }
  }
}

// Artifact size = header + n_layer * 2 * n_tokens * n_head_kv * row bytes,
// with row bytes 4 * head_dim, 2 * head_dim or 1 + head_dim.
TEST(ArtifactFormatCanonical, SizesFollowTheDtype) {
  ArtifactHeader h = small_header(false);
  h.n_layer = 5;
  h.n_head_kv = 4;
  h.head_dim = 64;
  h.tokens.assign(512, 9);
  h.chain_tokens_sha256 = hash_token_ids(h.tokens);
  const size_t header = 2240;  // roundup(140 + 15 + 4 * 512, 64)
  const struct {
    uint32_t dtype;
    size_t payload;
  } expected[] = {{kKvDtypeF32, 5 * 2 * 512 * 4 * 256}, {kKvDtypeBf16, 5 * 2 * 512 * 4 * 128}, {kKvDtypeI8, 5 * 2 * 512 * 4 * 65}};
  for (const auto& e : expected) {
    h.kv_dtype = e.dtype;
    EXPECT_EQ(h.header_bytes(), header);
    EXPECT_EQ(h.payload_bytes(), e.payload);
    EXPECT_EQ(write_artifact(h).bytes.size(), header + e.payload + 32) << kv_dtype_name(e.dtype);
  }
}

TEST(ArtifactFormat, TokenHasherMatchesLittleEndianBytes) {
  std::vector<uint32_t> ids = {0, 1, 0x01020304, 0xffffffff};
  std::vector<uint8_t> le(ids.size() * 4);
  for (size_t i = 0; i < ids.size(); ++i) store_u32_le(le.data() + 4 * i, ids[i]);
  EXPECT_EQ(hash_token_ids(ids), sha256(le));
  TokenHasher t;
  t.update(std::span(ids).first(1));
  t.update(std::span(ids).subspan(1));
  EXPECT_EQ(t.finish(), sha256(le));
}

TEST(ArtifactFormat, JsonNamesEveryField) {
  ArtifactHeader h = small_header(true);
  Written w = write_artifact(h);
  std::string json = header_to_json(h, w.identity);
  for (const char* key : {"\"identity\": \"", "\"format_version\": 1", "\"model_fingerprint\"", "\"parent\": \"",
                          "\"recipe\": \"f32-portable-v1\"", "\"kv_dtype\": \"f32\"", "\"n_layer\": 2",
                          "\"n_head_kv\": 2", "\"head_dim\": 3", "\"position_start\": 4", "\"position_end\": 7",
                          "\"n_tokens\": 3", "\"chain_tokens_sha256\"", "\"total_bytes\": 512",
                          "\"tokens\": [5,6,7]"})
    EXPECT_NE(json.find(key), std::string::npos) << key << "\n" << json;
  EXPECT_NE(json.find(to_hex(w.identity)), std::string::npos);
  EXPECT_NE(header_to_json(small_header(false), w.identity).find("\"parent\": null"), std::string::npos);
  EXPECT_NE(header_to_json(small_header(false, kKvDtypeBf16), w.identity).find("\"kv_dtype\": \"bf16\""), std::string::npos);
  EXPECT_NE(header_to_json(small_header(false, kKvDtypeI8), w.identity).find("\"kv_dtype\": \"i8\""), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(KvDtypes, ArtifactFormatKv, ::testing::Values(kKvDtypeF32, kKvDtypeBf16, kKvDtypeI8),
                         [](const auto& info) { return kv_dtype_name(info.param); });

// The tiny artifact annotated in docs/artifact-format.md. Its hash is pinned:
// if this test fails, the format changed and the version must change with it.
constexpr const char* GOLDEN_TRAILER = "a793223d5a632e53670f4925f817544fa64bfaf9706d46b3aa1259c46b14afc1";
constexpr const char* GOLDEN_IDENTITY = "2d8004a91f8940232c57bdc9f02d4e59b30c270d0daaac98b87327ef534eb4c2";
constexpr const char* GOLDEN_IDENTITY_BF16 = "56dde9d76ee27bd349f4dc04760578c7e733d9ab80dfefe670ca1a3a8544cdc5";
constexpr const char* GOLDEN_IDENTITY_I8 = "6f3caa9f4037f0d48be89b4ed9f8efdd47e87ab264da9527642658983cc68e98";

ArtifactHeader golden_header() {
  ArtifactHeader h;
  h.model_fingerprint = sha256(std::string_view("kvgraft example model"));
  h.recipe = "f32-portable-v1";
  h.n_layer = 1;
  h.n_head_kv = 1;
  h.head_dim = 2;
  h.tokens = {1, 2};
  h.chain_tokens_sha256 = hash_token_ids(h.tokens);
  return h;
}

TEST(ArtifactFormat, GoldenTinyArtifact) {
  ArtifactHeader h = golden_header();
  MemorySink sink;
  ArtifactWriter w(h, sink);
  const float K[] = {1.0f, 2.0f, 3.0f, 4.0f};
  const float V[] = {-1.0f, -2.0f, -3.0f, -4.0f};
  w.write_layer(0, K, V);
  Digest id = w.finish();
  ASSERT_EQ(sink.bytes().size(), 256u);
  EXPECT_EQ(to_hex(sha256(std::span(sink.bytes()).first(224))), GOLDEN_TRAILER);
  EXPECT_EQ(to_hex(id), GOLDEN_IDENTITY);
}

// The same example under the compact dtypes (docs/artifact-format.md,
// section 7): every value is exact in both, so the payload bytes are known by
// hand, and the identities are pinned like the f32 one.
TEST(ArtifactFormat, GoldenTinyArtifactCompact) {
  const struct {
    uint32_t dtype;
    std::vector<uint8_t> payload;
    const char* identity;
  } cases[] = {
      {kKvDtypeBf16,
       {0x80, 0x3f, 0x00, 0x40, 0x40, 0x40, 0x80, 0x40, 0x80, 0xbf, 0x00, 0xc0, 0x40, 0xc0, 0x80, 0xc0},
       GOLDEN_IDENTITY_BF16},
      // {1, 2}: e = -5, q = {32, 64}; {3, 4}: e = -4, q = {48, 64}; V negated.
      {kKvDtypeI8, {0xfb, 0x20, 0x40, 0xfc, 0x30, 0x40, 0xfb, 0xe0, 0xc0, 0xfc, 0xd0, 0xc0}, GOLDEN_IDENTITY_I8},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(kv_dtype_name(c.dtype));
    ArtifactHeader h = golden_header();
    h.kv_dtype = c.dtype;
    MemorySink sink;
    ArtifactWriter w(h, sink);
    const float K[] = {1.0f, 2.0f, 3.0f, 4.0f};
    const float V[] = {-1.0f, -2.0f, -3.0f, -4.0f};
    w.write_layer(0, K, V);
    const Digest id = w.finish();
    ASSERT_EQ(sink.bytes().size(), 192 + c.payload.size() + 32);
    EXPECT_EQ(load_u32_le(sink.bytes().data() + 0x63), c.dtype);
    EXPECT_TRUE(std::equal(c.payload.begin(), c.payload.end(), sink.bytes().begin() + 192));
    EXPECT_EQ(to_hex(id), c.identity);
  }
}

float generated_float(uint64_t i) { return static_cast<float>(i % 1000003) * 0.5f; }

// Yields a synthetic artifact without ever holding it: header, then payload
// floats computed from their index, then the trailer of what it produced. It
// shares no code with ArtifactWriter beyond encode_header.
class GeneratingSource final : public ByteSource {
 public:
  explicit GeneratingSource(const ArtifactHeader& h) : header_(encode_header(h)), payload_(h.payload_bytes()) {}
  size_t read(uint8_t* buf, size_t n) override {
    max_request = std::max(max_request, n);
    size_t done = 0;
    while (done < n) {
      if (pos_ < header_.size()) {
        buf[done++] = header_[pos_++];
      } else if (pos_ < header_.size() + payload_) {
        uint64_t off = pos_ - header_.size();
        size_t k = std::min<uint64_t>({n - done, header_.size() + payload_ - pos_, 4 - off % 4});
        float f = generated_float(off / 4);
        uint8_t le[4];
        store_u32_le(le, std::bit_cast<uint32_t>(f));
        std::memcpy(buf + done, le + off % 4, k);
        done += k, pos_ += k;
      } else {
        if (!trailer_) {
          trailer_ = sha_.finish();
          sha_.reset();
        }
        uint64_t off = pos_ - header_.size() - payload_;
        if (off >= 32) break;
        size_t k = std::min<uint64_t>(n - done, 32 - off);
        std::memcpy(buf + done, trailer_->data() + off, k);
        done += k, pos_ += k;
        continue;
      }
    }
    // Only bytes before the trailer feed the trailer hash.
    uint64_t before = pos_ - done;
    uint64_t limit = header_.size() + payload_;
    if (before < limit) sha_.update(buf, std::min<uint64_t>(done, limit - before));
    return done;
  }
  size_t max_request = 0;

 private:
  std::vector<uint8_t> header_;
  uint64_t payload_;
  uint64_t pos_ = 0;
  Sha256 sha_;
  std::optional<Digest> trailer_;
};

// Hashes and counts, keeps nothing.
class HashingSink final : public ByteSink {
 public:
  void write(const uint8_t* data, size_t n) override {
    sha.update(data, n);
    count += n;
  }
  Sha256 sha;
  uint64_t count = 0;
};

TEST(ArtifactFormat, Streams64MiBInBoundedMemory) {
  ArtifactHeader h;
  h.model_fingerprint = fingerprint();
  h.recipe = "f32-portable-v1";
  h.n_layer = 32;
  h.n_head_kv = 4;
  h.head_dim = 64;
  h.tokens.resize(1024);
  for (size_t i = 0; i < h.tokens.size(); ++i) h.tokens[i] = static_cast<uint32_t>(i * 7);
  h.chain_tokens_sha256 = hash_token_ids(h.tokens);
  ASSERT_EQ(h.payload_bytes(), size_t{64} << 20);

  // The caller's per-layer buffers (allocated before the baseline) are the
  // only payload-sized memory allowed.
  std::vector<float> K(h.block_floats()), V(h.block_floats());
  const int64_t allowance = int64_t{1} << 20;  // header, hash contexts, bookkeeping

  int64_t base = g_live.load();
  g_peak.store(base);
  HashingSink sink;
  Digest written;
  {
    ArtifactWriter w(h, sink);
    for (uint32_t l = 0; l < h.n_layer; ++l) {
      uint64_t first = uint64_t{l} * 2 * h.block_floats();
      for (size_t i = 0; i < K.size(); ++i) {
        K[i] = generated_float(first + i);
        V[i] = generated_float(first + K.size() + i);
      }
      w.write_layer(l, K.data(), V.data());
    }
    written = w.finish();
  }
  EXPECT_EQ(sink.count, h.total_bytes());
  EXPECT_EQ(sink.sha.finish(), written);
  EXPECT_LT(g_peak.load() - base, allowance) << "writer held payload-sized memory";

  base = g_live.load();
  g_peak.store(base);
  GeneratingSource src(h);
  Digest read;
  {
    ArtifactReader r(src);
    ASSERT_EQ(r.header().n_tokens(), 1024u);
    for (uint32_t l = 0; l < h.n_layer; ++l) {
      r.read_layer(l, K.data(), V.data());
      uint64_t first = uint64_t{l} * 2 * h.block_floats();
      ASSERT_EQ(K[7], generated_float(first + 7));
      ASSERT_EQ(V[K.size() - 1], generated_float(first + 2 * K.size() - 1));
    }
    read = r.finish();
  }
  EXPECT_EQ(read, written);
  EXPECT_LE(src.max_request, ArtifactReader::kDefaultChunkBytes);
  EXPECT_LT(g_peak.load() - base, allowance) << "reader held payload-sized memory";

  // verify_artifact streams too: the whole 64 MiB with no caller buffers.
  base = g_live.load();
  g_peak.store(base);
  GeneratingSource again(h);
  EXPECT_EQ(verify_artifact(again).identity, written);
  EXPECT_LT(g_peak.load() - base, int64_t{ArtifactReader::kDefaultChunkBytes} + allowance);
}

}  // namespace
}  // namespace kvg
