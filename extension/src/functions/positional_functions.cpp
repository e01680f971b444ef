// kvg_generate_positional: the paper's positional composition as an explicit
// SQL option (engine/positional_compose.hpp, docs/composition.md). Blocks
// captured on their own are placed one after another and the prompt is
// evaluated after them; nothing is recomputed, so it is cheap and NOT exact.
// The result says exact = false, and so does the audit row (mode
// 'positional', kv_proven = false: its KV is not what this engine computes
// for those tokens). Refused while kvg.require_exact is on.
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/generate.hpp"
#include "engine/output_text.hpp"
#include "engine/positional_compose.hpp"
#include "extension/src/artifacts/artifact_access.hpp"
#include "extension/src/audit/audit.hpp"
#include "extension/src/calls/engine_call.hpp"
#include "extension/src/runs/positional_run.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/model/model_settings.hpp"
#include "extension/src/spi/sql_values.hpp"
#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "catalog/pg_type_d.h"
#include "utils/array.h"
}

using namespace kvg;
using namespace kvg::pg;

namespace {

// The most blocks one composition may name: more than any window of the
// models kvg runs holds, and a bound on the work before it starts.
constexpr size_t kMaxBlocks = 1024;

std::vector<Digest> block_list_arg(FunctionCallInfo fcinfo, int n) {
  const std::vector<std::optional<std::string>> items = text_array_arg(fcinfo, n, kMaxBlocks, "artifacts");
  std::vector<Digest> out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i]) throw Error(ErrorCode::InvalidArgument, "artifacts[" + std::to_string(i + 1) + "] is NULL");
    out.push_back(parse_digest(*items[i], ("artifacts[" + std::to_string(i + 1) + "]").c_str()));
  }
  return out;
}

}  // namespace

// kvg_generate_positional(artifacts text[], prompt text, max_tokens int
// default 32) returns table(output, exact, tokens_composed,
// tokens_prefilled, tokens_decoded, compose_ms, decode_ms): greedy decoding
// after the artifacts placed positionally and `prompt` (which continues
// their tokens). No row for NULL or no artifacts, a NULL or blank prompt, a
// NULL max_tokens (docs/sql.md).
KVG_SQL_FUNCTION(kvg_generate_positional) {
  if (arg_is_null(fcinfo, 0) || arg_is_blank(fcinfo, 1) || arg_is_null(fcinfo, 2)) {
    return_rows(fcinfo, {});
    return Datum(0);
  }
  if (settings::require_exact())
    throw Error(ErrorCode::Unsupported,
                "kvg.require_exact is on: a positional composition is not exact, so it is refused (use an exact "
                "chain: kvg_capture continuing an artifact, or kvg_answer's transfer compositions)");
  const std::vector<Digest> blocks = block_list_arg(fcinfo, 0);
  if (blocks.empty()) {
    return_rows(fcinfo, {});
    return Datum(0);
  }
  const int32 max_tokens = PG_GETARG_INT32(2);
  check_max_tokens(max_tokens);

  EngineCall call;  // in worker mode the worker composes and decodes
  for (const Digest& block : blocks) require_readable(call.spi, block);
  const std::string text = prompt_text_arg(fcinfo, 1, *call.model, "prompt");
  GenerateOptions options;
  options.max_new_tokens = max_tokens;
  options.prefill_chunk = kPrefillChunk;
  options.check = kCheckInterrupts;
  options.prefill_report = progress_notices("generate_positional: prefilled");
  const PositionalRun run = run_positional(call, blocks, text, options);
  const GenerateResult& result = run.result;
  const std::string output = call.model->tokenizer().decode(result.tokens);

  // Which blocks, in which order, and the prompt: one line each.
  std::string input;
  for (const Digest& d : blocks) input += to_hex(d) + "\n";
  input += text;
  AuditRecord audit = call.audit("generate");
  audit.mode = "positional";
  audit.kv_proven = false;  // never what this engine computes for these tokens
  audit.input_sha256 = text_sha256(input);
  audit.artifact_sha256 = to_hex(blocks.back());
  audit.set_output(output);
  audit.tokens_in = int32_t(run.prompt.size());
  audit.tokens_out = int32_t(result.tokens.size());
  audit.tokens_grafted = int32_t(run.composed);
  audit.graft_us = run.compose_micros;
  audit.prefill_us = to_micros(result.prefill_seconds);
  audit.decode_us = to_micros(result.decode_seconds);
  // NULL only on a hot standby allowed to answer unaudited (docs/scale-out.md).
  const std::optional<int64_t> audit_id = audit_append(call.spi, audit);

  return_rows(fcinfo, {{text_result(output_text(output)), BoolGetDatum(PositionalComposition::exact),
                        Int32GetDatum(int32_t(run.composed)),
                        Int32GetDatum(int32_t(int64_t(run.prompt.size()) - run.composed)),
                        Int32GetDatum(int32_t(result.tokens.size())), Float8GetDatum(double(run.compose_micros) / 1e3),
                        Float8GetDatum((result.prefill_seconds + result.decode_seconds) * 1e3),
                        audit_id ? ResultValue(Int64GetDatum(*audit_id)) : std::nullopt}});
  return Datum(0);
}
