// Header encoding, parsing and the validation rules of docs/artifact-format.md.
#include "storage/artifact_header.hpp"

#include <cstring>

#include "common/error.hpp"
#include "storage/little_endian.hpp"

namespace kvg {

namespace {

using u128 = unsigned __int128;

// Field offsets inside the header; R = recipe length, N = n_tokens.
constexpr size_t kOffVersion = 4, kOffHeaderBytes = 8, kOffFlags = 12, kOffFingerprint = 16,
                 kOffParent = 48, kOffRecipeLen = 80, kOffRecipe = 84;
// Relative to the end of the recipe string.
constexpr size_t kRelKvDtype = 0, kRelNLayer = 4, kRelNHeadKv = 8, kRelHeadDim = 12,
                 kRelPositionStart = 16, kRelNTokens = 20, kRelChainHash = 24;

constexpr uint64_t round_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

uint64_t padded_header_bytes(uint64_t recipe_len, uint64_t n_tokens) {
  return round_up(kHeaderFixedPrefix + recipe_len + kHeaderFixedMiddle + 4 * n_tokens, kHeaderAlign);
}

struct Problem {
  ErrorCode code;
  std::string message;
};

// Well-formed UTF-8 (RFC 3629: no overlongs, no surrogates, <= U+10FFFF) with
// no control characters, so a recipe name prints and compares unambiguously.
bool is_clean_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) return false;
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp, min;
    if ((c & 0xe0) == 0xc0) len = 2, cp = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0) len = 3, cp = c & 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0) len = 4, cp = c & 0x07, min = 0x10000;
    else return false;
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      auto cc = static_cast<uint8_t>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = cp << 6 | (cc & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    if (cp >= 0x80 && cp < 0xa0) return false;  // C1 controls
    i += len;
  }
  return true;
}

std::optional<Problem> corrupt(std::string message) {
  return Problem{ErrorCode::Corrupt, "artifact header: " + std::move(message)};
}

std::string range_text(const char* field, uint64_t value, uint64_t lo, uint64_t hi) {
  return std::string(field) + " " + std::to_string(value) + " out of range [" + std::to_string(lo) + ", " +
         std::to_string(hi) + "]";
}

// Every rule that depends on the scalar fields only (no token ids), in the
// order the specification lists them. Shared by the parser, which runs it
// before reading (and allocating for) the token ids.
std::optional<Problem> check_scalars(uint32_t version, std::string_view recipe, uint32_t kv_dtype,
                                     uint32_t n_layer, uint32_t n_head_kv, uint32_t head_dim,
                                     uint32_t position_start, uint64_t n_tokens) {
  if (version != kArtifactVersion)
    return Problem{ErrorCode::Unsupported, "artifact format version " + std::to_string(version) +
                                               " is not supported (this build reads version " +
                                               std::to_string(kArtifactVersion) + ")"};
  if (recipe.empty() || recipe.size() > kMaxRecipeBytes)
    return corrupt(range_text("recipe length", recipe.size(), 1, kMaxRecipeBytes));
  if (!is_clean_utf8(recipe)) return corrupt("recipe name is not clean UTF-8 (malformed or control characters)");
  if (!is_known_kv_dtype(kv_dtype))
    return Problem{ErrorCode::Unsupported, "artifact kv_dtype " + std::to_string(kv_dtype) +
                                               " is not supported (v1 stores 0 = f32, 1 = bf16, 2 = i8)"};
  if (n_layer < 1 || n_layer > kMaxLayers) return corrupt(range_text("n_layer", n_layer, 1, kMaxLayers));
  if (n_head_kv < 1 || n_head_kv > kMaxHeadsKv)
    return corrupt(range_text("n_head_kv", n_head_kv, 1, kMaxHeadsKv));
  if (head_dim < 1 || head_dim > kMaxHeadDim) return corrupt(range_text("head_dim", head_dim, 1, kMaxHeadDim));
  if (n_tokens < 1) return corrupt("n_tokens is 0 (an artifact stores at least one token)");
  if (uint64_t{position_start} + n_tokens > kMaxPositionEnd)
    return corrupt("position_start " + std::to_string(position_start) + " + n_tokens " +
                   std::to_string(n_tokens) + " exceeds 2^31");
  uint64_t header = padded_header_bytes(recipe.size(), n_tokens);
  if (header > UINT32_MAX)
    return corrupt("n_tokens " + std::to_string(n_tokens) + " makes the header longer than 2^32-1 bytes");
  u128 total = u128{header} + u128{n_layer} * 2 * n_tokens * n_head_kv * kv_row_bytes(kv_dtype, head_dim) + kTrailerBytes;
  if (total > kMaxArtifactBytes) return corrupt("total artifact size exceeds 2^62 bytes");
  return std::nullopt;
}

std::optional<Problem> check_header(const ArtifactHeader& h) {
  if (auto p = check_scalars(h.version, h.recipe, h.kv_dtype, h.n_layer, h.n_head_kv, h.head_dim,
                             h.position_start, h.tokens.size()))
    return p;
  if (is_zero(h.model_fingerprint)) return corrupt("model_fingerprint is all zero");
  if (h.parent) {
    // All-zero parent bytes mean "no parent", so a zero digest cannot be a parent.
    if (is_zero(*h.parent)) return corrupt("parent_sha256 is all zero but the has-parent flag is set");
    if (h.position_start == 0) return corrupt("a chain link (with parent) must have position_start >= 1");
  } else {
    // A root's chain is exactly its own tokens, so its chain hash is checkable here.
    if (h.position_start != 0)
      return corrupt("position_start " + std::to_string(h.position_start) + " without a parent (must be 0)");
    if (hash_token_ids(h.tokens) != h.chain_tokens_sha256)
      return corrupt("chain_tokens_sha256 does not match the token ids of this root artifact");
  }
  return std::nullopt;
}

}  // namespace

size_t ArtifactHeader::header_bytes() const { return padded_header_bytes(recipe.size(), tokens.size()); }

void validate_header(const ArtifactHeader& header) {
  if (auto p = check_header(header)) throw Error(p->code, p->message);
}

std::vector<uint8_t> encode_header(const ArtifactHeader& h) {
  if (auto p = check_header(h)) {
    ErrorCode code = p->code == ErrorCode::Unsupported ? p->code : ErrorCode::InvalidArgument;
    throw Error(code, "cannot encode " + p->message);
  }
  const size_t R = h.recipe.size();
  std::vector<uint8_t> out(h.header_bytes(), 0);  // zero padding included
  uint8_t* p = out.data();
  std::memcpy(p, kArtifactMagic, 4);
  store_u32_le(p + kOffVersion, h.version);
  store_u32_le(p + kOffHeaderBytes, static_cast<uint32_t>(out.size()));
  store_u32_le(p + kOffFlags, h.parent ? kFlagHasParent : 0);
  std::memcpy(p + kOffFingerprint, h.model_fingerprint.data(), 32);
  if (h.parent) std::memcpy(p + kOffParent, h.parent->data(), 32);
  store_u32_le(p + kOffRecipeLen, static_cast<uint32_t>(R));
  std::memcpy(p + kOffRecipe, h.recipe.data(), R);
  uint8_t* m = p + kOffRecipe + R;
  store_u32_le(m + kRelKvDtype, h.kv_dtype);
  store_u32_le(m + kRelNLayer, h.n_layer);
  store_u32_le(m + kRelNHeadKv, h.n_head_kv);
  store_u32_le(m + kRelHeadDim, h.head_dim);
  store_u32_le(m + kRelPositionStart, h.position_start);
  store_u32_le(m + kRelNTokens, h.n_tokens());
  std::memcpy(m + kRelChainHash, h.chain_tokens_sha256.data(), 32);
  uint8_t* t = m + kHeaderFixedMiddle;
  for (size_t i = 0; i < h.tokens.size(); ++i) store_u32_le(t + 4 * i, h.tokens[i]);
  return out;
}

namespace detail {

void throw_truncated(uint64_t expected, uint64_t got) {
  throw Error(ErrorCode::Corrupt, "artifact truncated: expected " + std::to_string(expected) + " bytes, got " +
                                      std::to_string(got));
}

ArtifactHeader parse_header_from(HeaderBytes& in) {
  auto fail = [](const std::optional<Problem>& p) {
    if (p) throw Error(p->code, p->message);
  };
  const uint8_t* p = in.need(4);
  if (std::memcmp(p, kArtifactMagic, 4) != 0)
    throw Error(ErrorCode::Corrupt, "not a kvgraft artifact (bad magic; expected \"KVGA\")");
  p = in.need(8);
  ArtifactHeader h;
  h.version = load_u32_le(p + kOffVersion);
  if (h.version != kArtifactVersion) fail(check_scalars(h.version, "", 0, 0, 0, 0, 0, 0));

  p = in.need(kHeaderFixedPrefix);
  const uint32_t header_bytes = load_u32_le(p + kOffHeaderBytes);
  const uint32_t flags = load_u32_le(p + kOffFlags);
  std::memcpy(h.model_fingerprint.data(), p + kOffFingerprint, 32);
  Digest parent;
  std::memcpy(parent.data(), p + kOffParent, 32);
  const uint32_t R = load_u32_le(p + kOffRecipeLen);
  if (flags & ~kFlagHasParent) fail(corrupt("reserved flag bits set (flags = " + std::to_string(flags) + ")"));
  if (R < 1 || R > kMaxRecipeBytes) fail(corrupt(range_text("recipe length", R, 1, kMaxRecipeBytes)));
  // Cheap early bound before reading further: the padded length of the smallest
  // header this recipe allows.
  if (header_bytes % kHeaderAlign != 0 || header_bytes < padded_header_bytes(R, 1))
    fail(corrupt("header_bytes " + std::to_string(header_bytes) + " is not a valid padded header length"));

  p = in.need(kHeaderFixedPrefix + R + kHeaderFixedMiddle);
  h.recipe.assign(reinterpret_cast<const char*>(p + kOffRecipe), R);
  const uint8_t* m = p + kOffRecipe + R;
  h.kv_dtype = load_u32_le(m + kRelKvDtype);
  h.n_layer = load_u32_le(m + kRelNLayer);
  h.n_head_kv = load_u32_le(m + kRelNHeadKv);
  h.head_dim = load_u32_le(m + kRelHeadDim);
  h.position_start = load_u32_le(m + kRelPositionStart);
  const uint32_t n_tokens = load_u32_le(m + kRelNTokens);
  std::memcpy(h.chain_tokens_sha256.data(), m + kRelChainHash, 32);
  fail(check_scalars(h.version, h.recipe, h.kv_dtype, h.n_layer, h.n_head_kv, h.head_dim, h.position_start,
                     n_tokens));
  if (header_bytes != padded_header_bytes(R, n_tokens))
    fail(corrupt("header_bytes " + std::to_string(header_bytes) + " does not match recipe length " +
                 std::to_string(R) + " and n_tokens " + std::to_string(n_tokens) + " (expected " +
                 std::to_string(padded_header_bytes(R, n_tokens)) + ")"));
  const uint64_t payload = uint64_t{h.n_layer} * 2 * n_tokens * h.n_head_kv * kv_row_bytes(h.kv_dtype, h.head_dim);
  in.expect_total(header_bytes + payload + kTrailerBytes);

  p = in.need(header_bytes);
  const size_t tokens_at = kHeaderFixedPrefix + R + kHeaderFixedMiddle;
  h.tokens.resize(n_tokens);
  for (uint32_t i = 0; i < n_tokens; ++i) h.tokens[i] = load_u32_le(p + tokens_at + 4 * size_t{i});
  for (size_t i = tokens_at + 4 * size_t{n_tokens}; i < header_bytes; ++i)
    if (p[i] != 0) fail(corrupt("nonzero padding byte at offset " + std::to_string(i)));

  const bool has_parent = (flags & kFlagHasParent) != 0;
  if (has_parent != !is_zero(parent))
    fail(corrupt(has_parent ? "has-parent flag set but parent_sha256 is all zero"
                            : "parent_sha256 is nonzero but the has-parent flag is clear"));
  if (has_parent) h.parent = parent;
  fail(check_header(h));
  return h;
}

}  // namespace detail

namespace {

class SpanHeaderBytes final : public detail::HeaderBytes {
 public:
  explicit SpanHeaderBytes(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  const uint8_t* need(size_t n) override {
    if (bytes_.size() < n) detail::throw_truncated(std::max<uint64_t>(n, total_), bytes_.size());
    return bytes_.data();
  }
  void expect_total(uint64_t total) override { total_ = total; }

 private:
  std::span<const uint8_t> bytes_;
  uint64_t total_ = 0;
};

}  // namespace

ArtifactHeader parse_header(std::span<const uint8_t> bytes) {
  SpanHeaderBytes in(bytes);
  return detail::parse_header_from(in);
}

void TokenHasher::update(std::span<const uint32_t> tokens) {
  if constexpr (kHostLittleEndian) {
    sha_.update(tokens.data(), tokens.size_bytes());
  } else {
    uint8_t buf[4096];
    while (!tokens.empty()) {
      size_t n = std::min(tokens.size(), sizeof(buf) / 4);
      for (size_t i = 0; i < n; ++i) store_u32_le(buf + 4 * i, tokens[i]);
      sha_.update(buf, 4 * n);
      tokens = tokens.subspan(n);
    }
  }
}

Digest hash_token_ids(std::span<const uint32_t> tokens) {
  TokenHasher h;
  h.update(tokens);
  return h.finish();
}

}  // namespace kvg
