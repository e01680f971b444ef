// What a backend and the engine worker (workers/engine/engine_worker.hpp)
// say to each other: one GenerationRequest in the call's segment, then the
// worker's replies on the call's queue (a Need, Started, prefill progress,
// logits rows when asked, tokens, chain links, then Done or Failed), the backend's answers to a Need
// (SuppliedArtifacts in a segment of their own, its handle sent as a
// SupplyNotice). Each message's
// fields are listed once, in fields(); wire.hpp encodes and decodes them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/error.hpp"
#include "extension/src/workers/protocol/wire.hpp"

namespace kvg {
// engine/device.hpp's: the protocol carries its value and knows none of
// them (the engine worker checks it before use).
enum class Device;
}  // namespace kvg

namespace kvg::worker_protocol {

// storage/sha256.hpp's Digest: the same type, named without the storage layer.
using Sha256 = std::array<uint8_t, 32>;

// One generation: what kvg_generate would run in its backend, with the
// artifact chain to graft named by identity. The worker grafts each link from
// its verified-artifact cache; for those it lacks it replies Need, and the
// backend sends their bytes, read with the caller's rights and checked
// against their names (engine_worker.hpp).
struct GenerationRequest {
  std::string model_path;
  Sha256 model_fingerprint{};  // the model the backend tokenized for
  // The file the backend loaded that model from, and the descriptor it holds
  // it open by (model/engine_context.hpp: held_file_of; fd -1: none). The
  // worker computes with that very file when another was renamed over
  // model_path since, as a backend that mapped it would.
  struct ModelFile {
    uint64_t device = 0, inode = 0;
    int64_t size = 0, mtime_ns = 0;
    int32_t fd = -1;
    template <class F> void fields(F& f) { f(device), f(inode), f(size), f(mtime_ns), f(fd); }
  };
  ModelFile model_file;
  std::string recipe;          // kvg.recipe's name
  Device device{};             // the caller's kvg.device
  uint64_t gpu_staging_bytes = 0;
  int64_t max_kv_bytes = 0;    // the caller's kvg.max_kv_memory
  int64_t context_limit = 0;   // the caller's kvg.max_context (0: the model's context_length)
  std::vector<int32_t> prompt;
  std::optional<Sha256> leaf;  // the chain to graft, when any
  uint32_t database = 0;       // where the chain's rows are
  struct Link {
    Sha256 id{};
    uint32_t loid = 0;  // its large object: with the database, the cache's key (artifact_cache.hpp)
    template <class F> void fields(F& f) { f(id), f(loid); }
  };
  std::vector<Link> links;  // every link of that chain, root first
  int64_t chain_tokens = 0;  // the positions that chain holds
  int64_t max_new_tokens = 0;
  float temperature = 0;
  int32_t top_k = 0;
  float top_p = 1;
  uint64_t seed = 0;
  bool stop_at_eos = true;
  std::vector<int32_t> stop_tokens;
  int64_t prefill_chunk = 0;
  // Stop once the answer line is complete (engine/answer_line.hpp), as
  // kvg_answer does.
  bool answer_line = false;
  // After the generation: the chain links over these prompt positions that
  // continue the grafted chain (prefix_reuse.hpp: store_segment_links), sent
  // back for the caller to store.
  std::vector<int64_t> capture_ends;
  // max_kv_bytes is this generation's share of the caller's
  // kvg.max_kv_memory (a set-based call's: kvg_answers), and a refusal
  // names it so (kKvShareLimitName).
  bool max_kv_is_share = false;
  // The caller's session user: the engine worker shares its passes and its
  // batch among roles equally.
  uint32_t role = 0;
  // A graft check's side (engine/graft_check.hpp): the prompt's continuations
  // to decode, each from its end (GenerateOptions::continuations), and the
  // prompt position from which its logits rows are sent back (LogitsReply;
  // negative: none).
  int32_t continuations = 1;
  int64_t prompt_logits_from = -1;
  // kvg_import's recomputation, which grafts nothing (no stored KV is
  // read): the links start at capture_from, the first naming capture_parent
  // (the stored chain the recomputed artifact continues) as its parent.
  // Without them the links continue the grafted chain.
  int64_t capture_from = 0;
  std::optional<Sha256> capture_parent;
  // kvg_generate_positional: these chains (each from position 0) placed one
  // after another, their keys turned to where they are placed
  // (engine/positional_compose.hpp), instead of a chain grafted (`leaf` is
  // then none); `links` holds every block's links, and the prompt begins
  // with the blocks' tokens.
  std::vector<Sha256> positional_blocks;

  template <class F>
  void fields(F& f) {
    f(model_path), f(model_fingerprint), f(model_file), f(recipe), f(device), f(gpu_staging_bytes), f(max_kv_bytes), f(context_limit);
    f(prompt);
    f(leaf), f(database), f(links), f(chain_tokens);
    f(max_new_tokens), f(temperature), f(top_k), f(top_p), f(seed), f(stop_at_eos), f(stop_tokens);
    f(prefill_chunk), f(answer_line), f(capture_ends), f(max_kv_is_share), f(role);
    f(continuations), f(prompt_logits_from), f(capture_from), f(capture_parent), f(positional_blocks);
  }
};

// The KV bound's names, as a refusal gives them (EngineOptions::kv_limit_name).
inline constexpr const char* kKvLimitName = "kvg.max_kv_memory";
inline constexpr const char* kKvShareLimitName = "kvg.max_kv_memory's share for each prompt of the call";

// The identities of links the worker lacks: send their bytes.
struct NeedReply {
  static constexpr uint8_t kTag = 'N';
  std::vector<Sha256> ids;
  template <class F> void fields(F& f) { f(ids); }
};

// The worker admitted the sequence into its passes: what came before was
// waiting (for room, or in line behind other roles' calls), not prefill.
struct StartedReply {
  static constexpr uint8_t kTag = 'S';
  template <class F> void fields(F&) {}
};

// Prefill progress, after each pass that evaluated some of the sequence's
// prompt: `done` of the `total` prompt tokens it computes (those after the
// graft). The caller's kvg.progress and progress notices follow it.
struct PrefilledReply {
  static constexpr uint8_t kTag = 'P';
  int64_t done = 0, total = 0;
  template <class F> void fields(F& f) { f(done), f(total); }
  void validate() const {
    if (done < 0 || total < done) throw ProtocolError("reports more prompt tokens done than the prompt has");
  }
};

// A token decoded.
struct TokenReply {
  static constexpr uint8_t kTag = 'T';
  int32_t token = 0;
  template <class F> void fields(F& f) { f(token); }
};

// Logits rows of prompt positions (GenerationRequest::prompt_logits_from),
// n_vocab floats each, in position order: one prefill chunk's.
struct LogitsReply {
  static constexpr uint8_t kTag = 'R';
  std::vector<float> rows;
  template <class F> void fields(F& f) { f(rows); }
};

// A chain link captured (GenerationRequest::capture_ends): an artifact's bytes.
struct LinkReply {
  static constexpr uint8_t kTag = 'L';
  std::vector<uint8_t> artifact;
  template <class F> void fields(F& f) { f(artifact); }
};

// The end.
struct DoneReply {
  static constexpr uint8_t kTag = 'D';
  bool stopped_at_eos = false;
  double prefill_seconds = 0, decode_seconds = 0;
  int64_t grafted_tokens = 0;  // positions the graft filled
  int64_t graft_micros = 0;
  int32_t batch_peak = 0;      // the most sequences that shared a pass with this one
  template <class F>
  void fields(F& f) {
    f(stopped_at_eos), f(prefill_seconds), f(decode_seconds), f(grafted_tokens), f(graft_micros), f(batch_peak);
  }
};

// The end, refused or failed: a kvg::Error's code, which the backend throws
// again so that its boundary reports it as its own (SQLSTATE and hint,
// error_map.cpp), or else a SQLSTATE to raise.
struct FailedReply {
  static constexpr uint8_t kTag = 'F';
  static constexpr size_t kMaxMessageBytes = 4000;
  int32_t error_code = -1;  // an ErrorCode, or -1: none (then sqlstate)
  std::string sqlstate = "XX000";
  std::string message;

  static FailedReply of(const Error& error);
  static FailedReply of(std::string_view sqlstate, std::string_view message);
  std::optional<ErrorCode> code() const;

  template <class F> void fields(F& f) { f(error_code), f(sqlstate), f(message); }
  void validate() const;
};

using EngineReply =
    std::variant<NeedReply, StartedReply, PrefilledReply, TokenReply, LogitsReply, LinkReply, DoneReply, FailedReply>;

// The bytes a backend sends for a Need, in a segment of their own.
struct SuppliedArtifacts {
  struct Artifact {
    Sha256 id{};
    std::shared_ptr<const std::vector<uint8_t>> bytes;  // verified by the backend
    template <class F> void fields(F& f) { f(id), f(bytes); }
  };
  std::vector<Artifact> artifacts;
  template <class F> void fields(F& f) { f(artifacts); }
};

// On the supply queue: the segment that holds a SuppliedArtifacts.
struct SupplyNotice {
  uint32_t segment = 0;  // its dsm_handle
  template <class F> void fields(F& f) { f(segment); }
};

}  // namespace kvg::worker_protocol
