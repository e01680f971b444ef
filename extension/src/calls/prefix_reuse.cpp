#include "extension/src/calls/prefix_reuse.hpp"

#include "common/error.hpp"
#include "extension/src/model/model_settings.hpp"
#include "storage/sha256.hpp"

namespace kvg::pg {

ChosenPrefix choose_stored_prefix(EngineCall& call, std::span<const int32_t> prompt, const StoredPrefix& start) {
  ChosenPrefix chosen{start, true};
  if (start.leaf) chosen.proven = call.store.chain_trusted(*start.leaf);
  if (settings::prefix_reuse() && chosen.proven) {
    const LinkLookup lookup = [&](const std::optional<Digest>& parent, std::span<const Digest> hashes) {
      return call.store.links(parent, hashes, call.model->fingerprint(), call.options.recipe.name());
    };
    chosen.chain = longest_stored_prefix(prompt, start, lookup);
  }
  return chosen;
}

ChosenPrefix exactly(EngineCall& call, const StoredPrefix& start) {
  return {start, !start.leaf || call.store.chain_trusted(*start.leaf)};
}

Grafted graft_stored_prefix(EngineCall& call, Session& session, std::span<const int32_t> prompt,
                            const StoredPrefix& start) {
  return graft_chosen(call, session, prompt, choose_stored_prefix(call, prompt, start));
}

Grafted graft_chosen(EngineCall& call, Session& session, std::span<const int32_t> prompt, const ChosenPrefix& chosen) {
  Grafted grafted;
  grafted.proven = chosen.proven;
  if (!chosen.chain.leaf) return grafted;
  const auto began = std::chrono::steady_clock::now();
  // graft() verifies every link against the prompt, the model and its bytes.
  grafted.tokens = graft(session, *chosen.chain.leaf, call.open, prompt).n_tokens;
  grafted.leaf = chosen.chain.leaf;
  grafted.micros = micros_since(began);
  return grafted;
}

int64_t grafted_tokens_used(const Grafted& grafted, int64_t prompt_tokens) {
  return grafted.tokens < prompt_tokens ? grafted.tokens : prompt_tokens - 1;
}

namespace {

// The links over `ends` continuing grafted.leaf, each made by
// link(from, end, parent), which returns its identity; the last one's.
template <class Link>
std::optional<Digest> walk_links(const Grafted& grafted, std::span<const int64_t> ends, Link link) {
  std::optional<Digest> parent = grafted.leaf;
  int64_t from = grafted.tokens;
  for (const int64_t end : ends) {
    if (end <= from) continue;
    parent = link(from, end, parent);
    from = end;
  }
  return parent;
}

}  // namespace

std::optional<Digest> store_segment_links(EngineCall& call, const Session& session, const Grafted& grafted,
                                          std::span<const int64_t> ends, int64_t library_end) {
  try {
    return walk_links(grafted, ends, [&](int64_t from, int64_t end, const std::optional<Digest>& parent) {
      auto sink = call.store.writer(end <= library_end ? Payer::Library : Payer::SessionUser);
      const Digest written = capture(session, from, end, parent, sink);
      const Digest stored = sink.commit(meta_from_header(capture_header(session, from, end, parent)),
                                        grafted.proven ? Provenance::Computed : Provenance::Derived);
      if (stored != written)
        throw Error(ErrorCode::Internal, "the store hashed different bytes than the writer wrote");
      return stored;
    });
  } catch (const LibraryQuotaExceeded&) {
    return std::nullopt;  // a continuation needs its parent: nothing after it is stored either
  }
}

std::optional<Digest> store_captured_links(EngineCall& call, const Grafted& grafted,
                                           std::span<const std::vector<uint8_t>> links, int64_t library_end) {
  std::optional<Digest> parent = grafted.leaf;
  for (const std::vector<uint8_t>& bytes : links) {
    MemorySource source(bytes);
    const ArtifactHeader header = ArtifactReader(source).header();
    if (header.parent != parent)
      throw Error(ErrorCode::Internal, "a chain link from the engine worker does not continue the chain before it");
    auto sink = call.store.writer(int64_t(header.position_end()) <= library_end ? Payer::Library : Payer::SessionUser);
    sink.write(bytes.data(), bytes.size());
    try {
      parent = sink.commit(meta_from_header(header), grafted.proven ? Provenance::Computed : Provenance::Derived);
    } catch (const LibraryQuotaExceeded&) {
      return std::nullopt;
    }
  }
  return parent;
}

std::optional<Digest> segment_links_leaf(const Session& session, const Grafted& grafted,
                                         std::span<const int64_t> ends) {
  return walk_links(grafted, ends, [&](int64_t from, int64_t end, const std::optional<Digest>& parent) {
    DiscardSink nothing;
    return capture(session, from, end, parent, nothing);
  });
}

std::string tokens_sha256(std::span<const int32_t> tokens) {
  std::vector<uint8_t> bytes;
  bytes.reserve(tokens.size() * 4);
  for (const int32_t t : tokens)
    for (int shift = 0; shift < 32; shift += 8) bytes.push_back(uint8_t(uint32_t(t) >> shift));
  return to_hex(sha256(std::span<const uint8_t>(bytes)));
}

std::string chain_text(const Digest& leaf, LoStore& store) {
  std::string text;
  for (const StoredArtifact& row : store.chain(leaf)) text += (text.empty() ? "" : ",") + to_hex(row.id);
  return text;
}

void audit_generation(AuditRecord& audit, EngineCall& call, const Grafted& grafted,
                      std::span<const int32_t> prompt, const GenerateOptions& options, const GenerateResult& result) {
  const int64_t prompt_tokens = int64_t(prompt.size());
  if (grafted.leaf) {
    audit.artifact_sha256 = to_hex(*grafted.leaf);
    audit.artifact_chain = chain_text(*grafted.leaf, call.store);
  }
  audit.tokens_in = int32_t(prompt_tokens);
  audit.tokens_out = int32_t(result.tokens.size());
  audit.tokens_grafted = int32_t(grafted_tokens_used(grafted, prompt_tokens));
  audit.graft_us = grafted.micros;
  audit.prefill_us = to_micros(result.prefill_seconds);
  audit.decode_us = to_micros(result.decode_seconds);
  audit.kv_proven = grafted.proven;
  audit.prompt_tokens_sha256 = tokens_sha256(prompt);
  audit.temperature = options.sampling.temperature;
  audit.top_p = options.sampling.top_p;
  audit.seed = int64_t(options.sampling.seed);
  audit.max_tokens = int32_t(options.max_new_tokens);
  // eos: an end-of-text or end-of-turn token; stop: a stop token or the
  // caller's own end (an answer's line); max_tokens: the budget ran out.
  audit.stop_reason = result.stopped_at_eos                                          ? "eos"
                      : int64_t(result.tokens.size()) >= options.max_new_tokens ? "max_tokens"
                                                                                  : "stop";
}

}  // namespace kvg::pg
