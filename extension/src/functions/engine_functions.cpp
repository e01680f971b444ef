// SQL functions that run the engine: capture, generate, graft check, model
// info. Each inference call appends one audit row in the caller's transaction.
// The engine polls for cancellation between prefill chunks and decode steps;
// artifacts are read from and written to the large-object store.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/device.hpp"
#include "engine/generate.hpp"
#include "engine/graft.hpp"
#include "engine/output_text.hpp"
#include "engine/prompt.hpp"
#include "engine/request_limits.hpp"
#include "extension/src/artifacts/artifact_access.hpp"
#include "extension/src/artifacts/artifact_cache.hpp"
#include "extension/src/audit/audit.hpp"
#include "extension/src/calls/engine_call.hpp"
#include "extension/src/runs/graft_check_run.hpp"
#include "extension/src/model/engine_context.hpp"
#include "extension/src/workers/engine/engine_worker.hpp"
#include "extension/src/runs/generation_run.hpp"
#include "extension/src/artifacts/lo_store.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/calls/prefix_reuse.hpp"
#include "extension/src/calls/prompt_arg.hpp"
#include "extension/src/spi/sql_values.hpp"
#include "extension/src/roles/standby.hpp"
#include "extension/src/pg/postgres.hpp"

using namespace kvg;
using namespace kvg::pg;

namespace {

// The whole prompt when the artifact chain ending in `leaf` precedes `text`,
// and that chain, as where prefix reuse starts.
struct ChainPrompt {
  std::vector<int32_t> tokens;
  StoredPrefix chain;
};

ChainPrompt prompt_after_artifact(const EngineCall& call, const Digest& leaf, const PromptArg& text) {
  const std::vector<int32_t> chain = chain_tokens(leaf, call.open);
  return {text.after(*call.model, chain), StoredPrefix{leaf, int64_t(chain.size())}};
}

// An optional artifact argument: NULL or blank is none.
std::optional<Digest> optional_artifact_arg(FunctionCallInfo fcinfo, int n) {
  if (arg_is_blank(fcinfo, n)) return std::nullopt;
  return digest_arg(fcinfo, n, "artifact");
}

// Said whenever a call grafts a chain it asked for by name that is not known
// to be this engine's own computation: its output is then not proven to be
// what recomputing the prompt would give.
void warn_unproven(const Grafted& grafted) {
  if (grafted.proven || !grafted.leaf) return;
  warning("artifact " + to_hex(*grafted.leaf) +
              " is not known to be what this engine computes for its tokens (an unverified import, or built on one): "
              "the output is not proven equal to a recomputation",
          "Import it with verification (kvg_import(data)) to prove it; the audit row records kv_proven = false.");
}

}  // namespace

// kvg_capture(prefix text | integer[], artifact text default null) returns
// text: the KV of `prefix` (continuing the artifact's chain when given)
// stored as an artifact. NULL for a NULL or blank prefix (docs/sql.md).
KVG_SQL_FUNCTION(kvg_capture) {
  if (PromptArg::blank(fcinfo, 0)) PG_RETURN_NULL();
  refuse_on_standby("kvg_capture", "it stores an artifact");
  EngineCall call;
  const PromptArg prefix(fcinfo, 0, *call.model, "prefix");
  const std::optional<Digest> parent = optional_artifact_arg(fcinfo, 1);
  if (parent) require_readable(call.spi, *parent);
  const ChainPrompt prompt =
      parent ? prompt_after_artifact(call, *parent, prefix) : ChainPrompt{prefix.fresh(*call.model), {}};
  const int64_t from = prompt.chain.end;
  if (int64_t(prompt.tokens.size()) <= from)
    throw Error(ErrorCode::InvalidArgument, "nothing to capture: the prefix adds no tokens after the artifact");
  // A prefill that decodes nothing, in this backend or in the engine worker
  // (kvg.engine), storing one link that continues the artifact named.
  GenerateOptions options;
  options.max_new_tokens = 0;
  options.prefill_chunk = kPrefillChunk;
  options.check = kCheckInterrupts;
  options.prefill_report = progress_notices("capture: prefilled");
  GenerationAsks asks;
  asks.link_ends = {int64_t(prompt.tokens.size())};
  asks.graft_exactly = true;
  const GenerationRun run = run_generation(call, prompt.tokens, prompt.chain, options, asks);
  warn_unproven(run.grafted);
  const Digest stored = *run.store_links(call);

  AuditRecord audit = call.audit("capture");
  audit.input_sha256 = prefix.sha256();
  audit.artifact_sha256 = to_hex(stored);
  audit.kv_proven = run.grafted.proven;
  audit.tokens_in = int32_t(prompt.tokens.size());
  audit.tokens_grafted = int32_t(from);
  audit.prefill_us = to_micros(run.result.prefill_seconds);
  audit_append(call.spi, audit);
  return text_result(to_hex(stored));
}

// kvg_generate(prompt text | integer[], max_tokens int default 32, artifact
// text default null, seed bigint default null, temperature float8 default 0)
// returns text.
// With an artifact, `prompt` is the text that follows the artifact's. With
// kvg.prefix_reuse on, the longest stored chain that begins the prompt (and
// continues the artifact, when given) is grafted: the output is the same.
// The text is always valid: bytes that are not UTF-8 become U+FFFD, and
// kvg_generate_bytes (same arguments) returns the raw bytes; the audit row
// keeps them either way (docs/output-bytes.md). NULL for a NULL prompt,
// max_tokens or temperature, and for a blank prompt without an artifact
// (after an artifact an empty prompt continues it): docs/sql.md.
namespace {

std::optional<std::string> generate_raw(FunctionCallInfo fcinfo) {
  if (arg_is_null(fcinfo, 0) || arg_is_null(fcinfo, 1) || arg_is_null(fcinfo, 4)) return std::nullopt;
  const std::optional<Digest> artifact = optional_artifact_arg(fcinfo, 2);
  if (!artifact && PromptArg::blank(fcinfo, 0)) return std::nullopt;
  const int32 max_tokens = PG_GETARG_INT32(1);
  const uint64_t seed = arg_is_null(fcinfo, 3) ? 0 : uint64_t(PG_GETARG_INT64(3));
  const double temperature = PG_GETARG_FLOAT8(4);
  check_max_tokens(max_tokens);
  check_temperature(temperature, "temperature");  // the CLI's rule too (engine/request_limits.hpp)

  EngineCall call;
  if (artifact) require_readable(call.spi, *artifact);
  const PromptArg text(fcinfo, 0, *call.model, "prompt");
  const ChainPrompt prompt =
      artifact ? prompt_after_artifact(call, *artifact, text) : ChainPrompt{text.fresh(*call.model), {}};
  GenerateOptions options;
  options.max_new_tokens = max_tokens;
  options.sampling.temperature = float(temperature);
  options.sampling.seed = seed;
  options.prefill_chunk = kPrefillChunk;
  options.check = kCheckInterrupts;
  options.prefill_report = progress_notices("generate: prefilled");
  options.decode_report = progress_notices("generate: decoded");
  // In this backend or in the engine worker (kvg.engine): the same tokens.
  const GenerationRun run = run_generation(call, prompt.tokens, prompt.chain, options);
  const Grafted& grafted = run.grafted;
  const GenerateResult& result = run.result;
  warn_unproven(grafted);
  const std::string output = call.model->tokenizer().decode(result.tokens);

  AuditRecord audit = call.audit("generate");
  audit.input_sha256 = text.sha256();
  audit.set_output(output);
  audit_generation(audit, call, grafted, prompt.tokens, options, result);
  audit_append(call.spi, audit);
  return output;
}

}  // namespace

KVG_SQL_FUNCTION(kvg_generate) {
  const std::optional<std::string> raw = generate_raw(fcinfo);
  if (!raw) PG_RETURN_NULL();
  return text_result(output_text(*raw));
}

// kvg_generate_bytes(...) returns bytea: kvg_generate's output as the model
// produced it, byte for byte (its SHA-256 is the audit row's output_sha256).
KVG_SQL_FUNCTION(kvg_generate_bytes) {
  const std::optional<std::string> raw = generate_raw(fcinfo);
  if (!raw) PG_RETURN_NULL();
  uint8_t* data = nullptr;
  const Datum d = bytea_result(raw->size(), &data);
  std::copy(raw->begin(), raw->end(), data);
  return d;
}

// kvg_graft_check(artifact text, continuation text | integer[], samples int
// default 1)
// returns table(graft_logits_sha256, recompute_logits_sha256, kl_max,
// argmax_agreement, exact): the artifact grafted and the continuation
// evaluated, against one monolithic prefill of the whole prompt; in worker
// mode both run in the engine worker (graft_check_run.hpp). STRICT; a
// blank artifact or continuation gives no row (docs/sql.md).
KVG_SQL_FUNCTION(kvg_graft_check) {
  if (arg_is_blank(fcinfo, 0) || PromptArg::blank(fcinfo, 1)) {
    return_rows(fcinfo, {});
    return Datum(0);
  }
  const Digest artifact = digest_arg(fcinfo, 0, "artifact");
  const int32 samples = PG_GETARG_INT32(2);
  if (samples < 0 || samples > 1000) throw Error(ErrorCode::InvalidArgument, "samples must be in 0..1000");

  EngineCall call;
  require_readable(call.spi, artifact);
  const PromptArg continuation(fcinfo, 1, *call.model, "continuation");
  const ChainPrompt whole = prompt_after_artifact(call, artifact, continuation);
  const std::vector<int32_t>& prompt = whole.tokens;
  GraftCheckOptions options;
  options.samples = samples;
  const GraftCheckResult r = run_graft_check(call, whole.chain, prompt, options);

  AuditRecord audit = call.audit("graft_check");
  audit.input_sha256 = continuation.sha256();
  audit.artifact_sha256 = to_hex(artifact);
  audit.logits_sha256 = r.graft_logits_sha256;
  audit.tokens_in = int32_t(prompt.size());
  audit.tokens_grafted = int32_t(r.grafted_tokens);
  // The check itself compares against a recomputation; the audit still says
  // whether the artifact was known to be genuine beforehand.
  audit.kv_proven = call.store.chain_trusted(artifact);
  audit_append(call.spi, audit);

  return_single_row(fcinfo, {text_result(r.graft_logits_sha256), text_result(r.recompute_logits_sha256),
                             Float8GetDatum(r.kl_max), Float8GetDatum(r.argmax_agreement), BoolGetDatum(r.exact)});
  return Datum(0);
}

// kvg_tokenize(text text, artifact text default null) returns integer[]: the
// token ids a call would use for `text` (with nothing before it, BOS first
// when the model adds one; after the artifact, its continuation: only the
// new tokens). Pass them, or a slice of a whole text's, where a prompt or a
// continuation is taken. NULL for NULL text. Informational: no audit row.
KVG_SQL_FUNCTION(kvg_tokenize) {
  if (arg_is_null(fcinfo, 0)) PG_RETURN_NULL();
  const std::optional<Digest> artifact = optional_artifact_arg(fcinfo, 1);
  const auto model = current_model(generations_use());
  const PromptArg text(fcinfo, 0, *model, "text");
  std::vector<int32_t> ids;
  if (artifact) {
    Spi spi;
    LoStore store(spi);
    require_readable(spi, *artifact);
    const std::vector<int32_t> chain =
        chain_tokens(*artifact, [&store](const Digest& id) { return open_through_cache(store, id); });
    ids = text.after(*model, chain);
    ids.erase(ids.begin(), ids.begin() + std::ptrdiff_t(chain.size()));
  } else {
    ids = text.fresh(*model);
  }
  return int4_array_result(ids);
}

// kvg_model_info() returns jsonb: what kvg.model is and how this backend runs
// it. 'device' is where a call really runs (cpu or cuda), and null when
// kvg.device = cuda has no usable GPU, so calls are refused; 'device_detail'
// names the GPU or says why none is used; 'gpu_weight_uploads' counts how
// many times this backend has copied a model's weights to the GPU (once per
// kvg.model while it stays loaded, however many calls run there).
// 'engine' is where generations run (kvg.engine: backend, or worker, whose
// own figures kvg_engine_worker() shows). Informational: no audit row.
KVG_SQL_FUNCTION(kvg_model_info) {
  const auto model = current_model(generations_use());
  const EngineOptions options = current_engine_options();
  const DeviceChoice device = current_device();
  const ModelConfig& c = model->config();
  Spi spi;
  // jsonb_build_object does the JSON encoding (escaping included).
  const auto rows = spi.run(
      "SELECT pg_catalog.jsonb_build_object("
      "'path', $1, 'fingerprint', $2, 'architecture', $3, 'name', $4, 'n_layer', $5::int, 'n_embd', $6::int, "
      "'n_head', $7::int, 'n_head_kv', $8::int, 'head_dim', $9::int, 'n_ff', $10::int, 'n_vocab', $11::int, "
      "'n_ctx', $12::int, 'parameters', $13::bigint, 'weight_bytes', $14::bigint, 'recipe', $15, "
      "'device', $16, 'cuda_compiled', $17::boolean, 'threads', $18::int, 'isa', $19, "
      "'device_requested', $20, 'device_detail', $21, 'gpu_weight_uploads', $22::bigint, 'engine', $23)::text",
      {model->path(), model->fingerprint_hex(), c.architecture, c.name, std::to_string(c.n_layer),
       std::to_string(c.n_embd), std::to_string(c.n_head), std::to_string(c.n_head_kv), std::to_string(c.head_dim),
       std::to_string(c.n_ff), std::to_string(c.n_vocab), std::to_string(c.n_ctx),
       std::to_string(model->parameter_count()), std::to_string(model->weight_bytes()), options.recipe.name(),
       device.runs_on ? SqlValue(device_name(*device.runs_on)) : SqlValue(),
       std::string(device_compiled(Device::Cuda) ? "true" : "false"), std::to_string(options.threads),
       std::string(isa_name(options.isa)), std::string(device_name(options.device)),
       device.detail.empty() ? SqlValue() : SqlValue(device.detail), std::to_string(CudaForward::weight_uploads()),
       std::string(engine_worker::in_use() ? "worker" : "backend")});
  return jsonb_result(rows.at(0).at(0).value());
}
