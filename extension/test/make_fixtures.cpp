// Writes the artifacts the extension's SQL tests import, with storage's own
// writer, so the tests never encode the format themselves and stay valid when
// it changes. Deterministic: the same files (and SHA-256s) on every run.
//
//   pg-fixtures-tool DIR   -> DIR/{root,child,orphan,large,dedup,dump}.kvga
#include <cstdio>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "storage/artifact_format.hpp"
#include "storage/byte_stream.hpp"
#include "storage/sha256.hpp"

namespace {

using kvg::ArtifactHeader;
using kvg::Digest;

struct Shape {
  uint32_t n_layer, n_head_kv, head_dim;
};

ArtifactHeader header_for(const Shape& s, std::vector<uint32_t> tokens, const std::vector<uint32_t>& chain,
                          std::optional<Digest> parent) {
  ArtifactHeader h;
  h.model_fingerprint = kvg::sha256(std::string_view("kvg regression-test model"));
  h.recipe = "f32-portable-v1";
  h.n_layer = s.n_layer;
  h.n_head_kv = s.n_head_kv;
  h.head_dim = s.head_dim;
  h.parent = parent;
  h.position_start = static_cast<uint32_t>(chain.size() - tokens.size());
  h.chain_tokens_sha256 = kvg::hash_token_ids(chain);
  h.tokens = std::move(tokens);
  return h;
}

// K/V values derived from (seed, layer, index): distinct per artifact.
Digest write(const std::string& path, const ArtifactHeader& h, uint32_t seed) {
  kvg::FileSink sink(path);
  kvg::ArtifactWriter writer(h, sink);
  std::vector<float> k(h.block_floats()), v(h.block_floats());
  for (uint32_t layer = 0; layer < h.n_layer; ++layer) {
    for (size_t i = 0; i < k.size(); ++i) {
      k[i] = static_cast<float>((seed * 131 + layer * 17 + i) % 1000) / 64.0f;
      v[i] = -k[i];
    }
    writer.write_layer(layer, k.data(), v.data());
  }
  Digest id = writer.finish();
  sink.close();
  return id;
}

std::vector<uint32_t> range(uint32_t from, uint32_t to) {
  std::vector<uint32_t> out;
  for (uint32_t t = from; t < to; ++t) out.push_back(t);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const Shape tiny{2, 2, 4};
  try {
    const std::vector<uint32_t> root_tokens{1, 2, 3};
    const Digest root = write(dir + "/root.kvga", header_for(tiny, root_tokens, root_tokens, std::nullopt), 1);
    write(dir + "/child.kvga", header_for(tiny, {4, 5}, {1, 2, 3, 4, 5}, root), 2);
    // A continuation of an artifact that is never stored.
    write(dir + "/orphan.kvga",
          header_for(tiny, {9}, {7, 8, 9}, kvg::sha256(std::string_view("an artifact nobody stored"))), 3);
    // 8.6 MB: more than two 4 MB large-object chunks, ending mid-chunk.
    const Shape wide{2, 4, 64};
    write(dir + "/large.kvga", header_for(wide, range(0, 2100), range(0, 2100), std::nullopt), 4);
    // Roots used only by tests that commit (deduplication, dump/restore).
    write(dir + "/dedup.kvga", header_for(tiny, {11, 12}, {11, 12}, std::nullopt), 5);
    write(dir + "/dump.kvga", header_for(tiny, {21, 22}, {21, 22}, std::nullopt), 6);
  } catch (const kvg::Error& e) {
    std::fprintf(stderr, "pg-fixtures-tool: %s\n", e.what());
    return 1;
  }
  return 0;
}
