// The engine worker: one background worker per server that runs the
// generations of every SQL session (kvg.engine = worker) in shared forward
// passes: at each step one batched pass carries every running sequence's
// next decode row and the next chunk of each pending prefill, so the weights
// are read once per step for all of them instead of once per backend.
// Batching changes no bit (engine/generate.hpp: step_together), so an answer
// is the same bytes in either mode.
//
// A backend does everything that needs the caller's rights and transaction
// itself (reading the prompt's artifacts, prefix search, the audit row); it
// hands the worker a request (protocol/engine_messages.hpp) through a
// dynamic shared memory segment and a slot of kvg's shared memory
// (protocol/request_slot.hpp), and reads the tokens back from a small queue. A cancel, statement_timeout or exit of the
// caller abandons its slot and the worker drops the sequence at its next
// step; a caller that stops reading fills its queue and only its own sequence
// waits. The worker is started by the postmaster and restarted by it when it
// exits with an error; calls it held fail (57V02) and the next ones run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/generate.hpp"
#include "extension/src/workers/protocol/engine_messages.hpp"
#include "storage/verified_bytes.hpp"

namespace kvg::pg::engine_worker {

using GenerationRequest = worker_protocol::GenerationRequest;
using Done = worker_protocol::DoneReply;

// The options the worker generates with: the request's, as kvg_generate's
// (prompt_logits, where the rows go, is the worker's to set).
GenerateOptions generate_options(const GenerationRequest& request);

// From _PG_init under shared_preload_libraries: the worker's registration
// and its shared memory.
void setup_at_preload();
// From _PG_init: kvg.engine and the worker's limits.
void define_settings();

// kvg.engine = worker (the default when preloaded): generations run in the worker.
bool in_use();
// The worker's limits (read by the worker on SIGHUP).
int threads();             // kvg.engine_threads (0: kvg.max_threads)
int max_batch();           // kvg.engine_max_batch: sequences in one pass
int pass_tokens();         // kvg.engine_pass_tokens: tokens in one pass (0: no bound)
int64_t kv_memory_bytes(); // kvg.engine_kv_memory: KV all running sequences may reserve
uint64_t cache_bytes();    // kvg.engine_cache_memory: the worker's verified-artifact cache (0: off)
int64_t kv_files_bytes();  // kvg.engine_kv_files: the worker's KV files on disk (0: off)

// The worker's KV files (engine/mapped_kv_files.hpp), in the data directory:
// named pgsql_tmp* so that base backups leave them out (they are derived from
// the large objects, and rebuilt when missing or damaged).
inline constexpr const char* kKvFilesDir = "pgsql_tmp_kvg_kv";
std::string kv_files_dir();
// Whether the worker attends the request's chain in place from its KV files
// (on the CPU): kvg.engine_kv_files is on and the prompt goes on after the
// chain. Then only the positions after the chain count against the KV
// bounds. (A chain that is the whole prompt is copied: its last position is
// evaluated again for its logits, engine/generate.cpp, which a read-only
// mapping cannot give up.)
bool maps_chain_of(const GenerationRequest& request);

// Why the worker refuses a generation whose KV (`need_bytes`: what it
// reserves for the prompt and max_new_tokens) could never fit
// kvg.engine_kv_memory (53200). A backend refuses such a call with it before
// queueing it; the worker, should one reach it, the same way.
std::string never_fits_message(int64_t need_bytes);

struct WorkerGeneration {
  GenerateResult result;
  Done done;
  std::vector<std::vector<uint8_t>> links;  // request.capture_ends' links, in order
  std::vector<float> prompt_logits;          // request.prompt_logits_from's rows, in order
};

// The verified bytes of the artifacts the worker lacks (a Need), read with
// the caller's rights.
using Supply = std::function<std::vector<std::pair<Digest, VerifiedBytes::Bytes>>(const std::vector<Digest>& ids)>;

// What a waiting call hears of its generations: the worker admitted one of
// them into its passes (the first time only: the call is no longer queued),
// and the tokens the generation at `index` (of the requests handed over) has
// decoded so far, each time one arrives.
struct Progress {
  std::function<void()> started;
  // `done` of the `total` prompt tokens generation `index` computes.
  std::function<void(size_t index, int64_t done, int64_t total)> prefilled;
  std::function<void(size_t index, int64_t decoded)> decoded;
};

// Runs `request` in the worker and waits, interruptibly, for its end.
// Raises 57V02 when the worker is not running or stops while it holds the
// call, and the worker's error (its SQLSTATE) when it refused or failed it.
WorkerGeneration generate(const GenerationRequest& request, const Supply& supply, const Progress& progress = {});

// The generations of a set-based call (kvg_answers), handed over as one
// call: the worker runs each as a sequence of its own, admitted and batched
// like any other, so they share its passes. Results in the requests' order;
// the first failure fails the call, as generate() raises it, and the worker
// drops the rest.
std::vector<WorkerGeneration> generate_together(const std::vector<GenerationRequest>& requests, const Supply& supply,
                                                const Progress& progress = {});

}  // namespace kvg::pg::engine_worker
