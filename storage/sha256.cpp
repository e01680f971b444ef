#include "storage/sha256.hpp"

#include <openssl/evp.h>

#include "common/error.hpp"

namespace kvg {

namespace {

EVP_MD_CTX* new_context() {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (ctx == nullptr) throw Error(ErrorCode::Internal, "EVP_MD_CTX_new failed (out of memory?)");
  if (EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx);
    throw Error(ErrorCode::Internal, "EVP_DigestInit_ex(sha256) failed");
  }
  return ctx;
}

}  // namespace

Sha256::Sha256() : ctx_(new_context()) {}

Sha256::Sha256(const Sha256& other) : finished_(other.finished_) {
  ctx_ = EVP_MD_CTX_new();
  if (ctx_ == nullptr) throw Error(ErrorCode::Internal, "EVP_MD_CTX_new failed (out of memory?)");
  if (other.ctx_ != nullptr && EVP_MD_CTX_copy_ex(ctx_, other.ctx_) != 1) {
    EVP_MD_CTX_free(ctx_);
    throw Error(ErrorCode::Internal, "EVP_MD_CTX_copy_ex failed");
  }
}

Sha256& Sha256::operator=(const Sha256& other) {
  if (this != &other) {
    Sha256 copy(other);
    *this = std::move(copy);
  }
  return *this;
}

Sha256::Sha256(Sha256&& other) noexcept : ctx_(other.ctx_), finished_(other.finished_) {
  other.ctx_ = nullptr;
}

Sha256& Sha256::operator=(Sha256&& other) noexcept {
  if (this != &other) {
    EVP_MD_CTX_free(ctx_);
    ctx_ = other.ctx_;
    finished_ = other.finished_;
    other.ctx_ = nullptr;
  }
  return *this;
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::update(const void* data, size_t n) {
  if (ctx_ == nullptr || finished_) throw Error(ErrorCode::Internal, "Sha256::update after finish");
  if (n == 0) return;
  if (EVP_DigestUpdate(ctx_, data, n) != 1) throw Error(ErrorCode::Internal, "EVP_DigestUpdate failed");
}

void Sha256::update(std::span<const uint8_t> bytes) { update(bytes.data(), bytes.size()); }

Digest Sha256::finish() {
  if (ctx_ == nullptr || finished_) throw Error(ErrorCode::Internal, "Sha256::finish called twice");
  Digest out{};
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx_, out.data(), &len) != 1 || len != out.size())
    throw Error(ErrorCode::Internal, "EVP_DigestFinal_ex failed");
  finished_ = true;
  return out;
}

void Sha256::reset() {
  if (ctx_ == nullptr) {
    ctx_ = new_context();
  } else if (EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) != 1) {
    throw Error(ErrorCode::Internal, "EVP_DigestInit_ex(sha256) failed");
  }
  finished_ = false;
}

Digest sha256(std::span<const uint8_t> bytes) {
  Sha256 h;
  h.update(bytes);
  return h.finish();
}

Digest sha256(std::string_view text) {
  Sha256 h;
  h.update(text.data(), text.size());
  return h.finish();
}

std::string to_hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(bytes.size() * 2, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    out[2 * i] = kHex[b >> 4];
    out[2 * i + 1] = kHex[b & 0xf];
  }
  return out;
}

std::string to_hex(const Digest& digest) {
  return to_hex(std::string_view(reinterpret_cast<const char*>(digest.data()), digest.size()));
}

namespace {
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

std::optional<Digest> digest_from_hex(std::string_view hex) {
  Digest out{};
  if (hex.size() != out.size() * 2) return std::nullopt;
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = hex_value(hex[2 * i]);
    int lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return out;
}

bool is_zero(const Digest& digest) {
  for (uint8_t b : digest)
    if (b != 0) return false;
  return true;
}

}  // namespace kvg
