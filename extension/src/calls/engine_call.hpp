// What every SQL function that runs the engine needs: the model, the options,
// one SPI connection, the artifact store on it, and how the engine learns of
// a cancel. Shared by engine_functions.cpp, knowledge_functions.cpp and
// answer_functions.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/graft.hpp"
#include "engine/session.hpp"
#include "extension/src/artifacts/artifact_cache.hpp"
#include "extension/src/audit/audit.hpp"
#include "extension/src/model/engine_context.hpp"
#include "extension/src/artifacts/lo_store.hpp"
#include "extension/src/spi/spi.hpp"

struct FunctionCallInfoBaseData;  // fmgr.h

namespace kvg::pg {

// Tokens per prefill chunk: how often a long prompt checks for cancellation.
// Chunking never changes the bits (recipe rule 1).
inline constexpr int64_t kPrefillChunk = 128;

// Turns a pending cancel or statement_timeout into kvg::Error(Cancelled); the
// entry wrapper lets PostgreSQL report it.
extern const ProgressCheck kCheckInterrupts;

// How the model is needed where calls prepare their work: in worker mode
// (kvg.engine = worker) generations compute in the engine worker, and a
// backend only prepares them (ModelUse::Prepare: it maps no model file).
ModelUse generations_use();

struct EngineCall {
  // In worker mode every call's engine work runs in the engine worker
  // (extension/src/runs/): the model here is loaded without its weights.
  EngineCall() : model(current_model(generations_use())) {}

  // First, before the model loads: a standby that cannot reach the primary
  // to record the call's audit row refuses before any work (audit.hpp).
  AuditPreflight audit_preflight;
  std::shared_ptr<const Model> model;
  EngineOptions options = current_engine_options();
  Spi spi;
  LoStore store{spi};
  // graft() checks every link's identity itself: no second hash in the
  // store, and none at all for bytes this backend verified before
  // (artifact_cache.hpp).
  ArtifactOpener open = [this](const Digest& id) { return open_through_cache(store, id); };

  // An audit record naming this call's model and recipe.
  AuditRecord audit(const char* operation) const;
};

// A text argument that becomes (part of) a prompt, refused (54000) by its
// byte length before it is read when it cannot fit the model's context
// (engine/prompt.hpp, docs/security.md).
std::string prompt_text_arg(FunctionCallInfoBaseData* fcinfo, int n, const Model& model, const char* name);

// Progress of long work as NOTICEs when kvg.progress_notices is set, at most
// one per that interval: "kvg <what>: <done> of <total> tokens" with the rate
// and the time left as DETAIL. An empty function otherwise. (Other sessions
// see every call's progress in kvg.progress: call_progress.hpp.)
ProgressReport progress_notices(const char* what);

// Refuses a decode budget outside 1 .. kvg.max_new_tokens (22023 / 54000).
void check_max_tokens(int64_t max_tokens);

// Times as the audit records them: whole microseconds.
int64_t to_micros(double seconds);
int64_t micros_since(std::chrono::steady_clock::time_point start);

// Lowercase hex SHA-256 of the text's bytes (input and output hashes).
std::string text_sha256(const std::string& text);

}  // namespace kvg::pg
