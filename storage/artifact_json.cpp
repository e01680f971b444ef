// JSON rendering of a verified header, for `kvg verify` and humans.
#include <cstdio>

#include "storage/artifact_format.hpp"

namespace kvg {

namespace {

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<uint8_t>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;  // UTF-8 passes through; validation rejected malformed recipes
    }
  }
  return out + "\"";
}

// Appends `"name": value` lines; values arrive already rendered as JSON.
class ObjectWriter {
 public:
  void raw(const char* name, const std::string& json) {
    out_ += first_ ? "{\n  \"" : ",\n  \"";
    first_ = false;
    out_ += name;
    out_ += "\": ";
    out_ += json;
  }
  void str(const char* name, std::string_view value) { raw(name, quoted(value)); }
  void num(const char* name, uint64_t value) { raw(name, std::to_string(value)); }
  std::string done() { return out_ + "\n}\n"; }

 private:
  std::string out_;
  bool first_ = true;
};

}  // namespace

std::string header_to_json(const ArtifactHeader& h, const Digest& identity) {
  std::string tokens = "[";
  for (size_t i = 0; i < h.tokens.size(); ++i) {
    if (i) tokens += ",";
    tokens += std::to_string(h.tokens[i]);
  }
  tokens += "]";

  ObjectWriter o;
  o.str("identity", to_hex(identity));
  o.num("format_version", h.version);
  o.str("model_fingerprint", to_hex(h.model_fingerprint));
  o.raw("parent", h.parent ? quoted(to_hex(*h.parent)) : "null");
  o.str("recipe", h.recipe);
  o.str("kv_dtype", kv_dtype_name(h.kv_dtype));
  o.num("n_layer", h.n_layer);
  o.num("n_head_kv", h.n_head_kv);
  o.num("head_dim", h.head_dim);
  o.num("position_start", h.position_start);
  o.num("position_end", h.position_end());
  o.num("n_tokens", h.n_tokens());
  o.str("chain_tokens_sha256", to_hex(h.chain_tokens_sha256));
  o.num("header_bytes", h.header_bytes());
  o.num("payload_bytes", h.payload_bytes());
  o.num("total_bytes", h.total_bytes());
  o.raw("tokens", tokens);
  return o.done();
}

}  // namespace kvg
