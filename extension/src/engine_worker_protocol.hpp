// What a backend and the engine worker (engine_worker.hpp) say to each other,
// as bytes: one request, written into the call's shared memory segment, and
// the replies the worker streams back over the call's queue (a token each,
// then one end). Plain C++: no PostgreSQL here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "engine/generate.hpp"
#include "storage/sha256.hpp"

namespace kvg::pg::engine_worker {

// One generation: what kvg_generate would run in its backend, with the
// artifact chain to graft named by identity. The worker grafts each link from
// its verified-artifact cache; for those it lacks it replies Need, and the
// backend sends their bytes, read with the caller's rights and checked
// against their names (engine_worker.hpp).
struct GenerationRequest {
  std::string model_path;
  Digest model_fingerprint{};  // the model the backend tokenized for
  std::string recipe;          // kvg.recipe's name
  Device device = Device::Cpu; // the caller's kvg.device
  uint64_t gpu_staging_bytes = 0;
  int64_t max_kv_bytes = 0;    // the caller's kvg.max_kv_memory
  std::vector<int32_t> prompt;
  std::optional<Digest> leaf;  // the chain to graft, when any
  uint32_t database = 0;       // where the chain's rows are
  struct Link {
    Digest id{};
    uint32_t loid = 0;  // its large object: with the database, the cache's key (artifact_cache.hpp)
  };
  std::vector<Link> links;  // every link of that chain, root first
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

  GenerateOptions generate_options() const;
};

std::string encode(const GenerationRequest& request);
// Throws kvg::Error(Corrupt) for bytes that are not a whole request.
GenerationRequest decode_request(std::string_view bytes);

// The replies, each one message on the call's queue.
enum class ReplyKind : uint8_t {
  Need = 'N',    // the identities of links the worker lacks: send their bytes
  Token = 'T',   // a token decoded
  Link = 'L',    // a chain link captured (GenerationRequest::capture_ends)
  Done = 'D',    // the end
  Failed = 'F',  // the end, refused or failed
};

struct Done {
  bool stopped_at_eos = false;
  double prefill_seconds = 0, decode_seconds = 0;
  int64_t grafted_tokens = 0;  // positions the graft filled
  int64_t graft_micros = 0;
  int32_t batch_peak = 0;      // the most sequences that shared a pass with this one
};

struct Failed {
  // A kvg::Error's code: the backend throws it again, and its boundary
  // reports it as it reports its own (SQLSTATE and hint, error_map.cpp).
  std::optional<ErrorCode> code;
  char sqlstate[6] = "XX000";  // otherwise
  std::string message;
};

std::string encode_need(const std::vector<Digest>& ids);
std::string encode_token(int32_t token);
std::string encode_link(const std::vector<uint8_t>& artifact);
std::string encode_done(const Done& done);
std::string encode_failed(const char* sqlstate, std::string_view message);
std::string encode_failed(const Error& error);

struct Reply {
  ReplyKind kind = ReplyKind::Failed;
  int32_t token = 0;
  std::vector<Digest> need;
  std::vector<uint8_t> link;  // an artifact's bytes
  Done done;
  Failed failed;
};
// Throws kvg::Error(Corrupt) for a message that is none of them.
Reply decode_reply(std::string_view bytes);

// The bytes a backend sends for a Need, in one shared memory segment of
// their own: a count, then per artifact its identity, length and bytes.
size_t supplied_bytes(const std::vector<std::pair<Digest, const std::vector<uint8_t>*>>& artifacts);
void write_supplied(const std::vector<std::pair<Digest, const std::vector<uint8_t>*>>& artifacts, char* out);
// Throws kvg::Error(Corrupt) for a segment that is not that.
std::vector<std::pair<Digest, std::vector<uint8_t>>> read_supplied(std::string_view segment);

}  // namespace kvg::pg::engine_worker
