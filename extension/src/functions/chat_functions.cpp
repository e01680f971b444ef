// kvg_chat: a conversation answered as the model's assistant, laid out in
// its chat format (engine/chat_prompt.hpp, docs/chat.md), one audit row
// (operation "chat") whose input hash covers the laid-out prompt; and
// kvg_chat_prompt, which shows that layout without running the model.
#include <algorithm>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/chat_messages.hpp"
#include "engine/chat_prompt.hpp"
#include "engine/generate.hpp"
#include "engine/output_text.hpp"
#include "engine/prompt.hpp"
#include "engine/request_limits.hpp"
#include "extension/src/audit/audit.hpp"
#include "extension/src/calls/engine_call.hpp"
#include "extension/src/runs/generation_run.hpp"
#include "extension/src/model/model_settings.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/calls/prefix_reuse.hpp"
#include "extension/src/spi/sql_values.hpp"
#include "extension/src/pg/postgres.hpp"

using namespace kvg;
using namespace kvg::pg;

namespace {

// No conversation to answer: messages NULL or an empty array, or format NULL
// or blank. kvg_chat then returns NULL, kvg_chat_prompt no row (docs/sql.md).
bool no_conversation(FunctionCallInfo fcinfo, int format_arg) {
  if (arg_is_null(fcinfo, 0) || arg_is_blank(fcinfo, format_arg)) return true;
  // Only the empty array is no messages; anything else is parsed (and refused
  // when it is not a list of messages). An empty array's jsonb is a few bytes.
  if (arg_bytes(fcinfo, 0) > 64) return false;
  return jsonb_text_arg(fcinfo, 0) == "[]";
}

// The conversation of argument 0 (jsonb) laid out for the model in the
// format of argument `format_arg`, bounded before it is read: the text the
// context can hold, plus the JSON around each message.
ChatPrompt chat_prompt_args(FunctionCallInfo fcinfo, int format_arg, const Model& model) {
  const size_t bytes = arg_bytes(fcinfo, 0);
  if (bytes > max_prompt_bytes(model, settings::max_context()) + 64 * kMaxChatMessages)
    check_prompt_bytes(model, bytes, "messages", settings::max_context());
  const std::vector<ChatMessage> messages = parse_chat_messages(jsonb_text_arg(fcinfo, 0));
  const ChatStyle style = model_chat_style(model.tokenizer(), text_arg(fcinfo, format_arg));
  return chat_prompt(model, style, messages, kCheckInterrupts, settings::max_context());
}

}  // namespace

// kvg_chat_prompt(messages jsonb, format text default 'auto') returns
// table(format, prompt, tokens int[]): what kvg_chat would ask the model.
// Informational (tokenizing only): no audit row.
KVG_SQL_FUNCTION(kvg_chat_prompt) {
  if (no_conversation(fcinfo, 1)) {
    return_rows(fcinfo, {});
    return Datum(0);
  }
  const auto model = current_model(generations_use());
  const ChatPrompt prompt = chat_prompt_args(fcinfo, 1, *model);
  return_single_row(fcinfo, {text_result(chat_format_name(prompt.style.format)), text_result(prompt.text),
                             int4_array_result(prompt.tokens)});
  return Datum(0);
}

// kvg_chat(messages jsonb, max_tokens int default 32, format text default
// 'auto', seed bigint default null, temperature float8 default 0) returns
// text: the assistant's answer, without the token that ended its turn. NULL
// for no conversation, or a NULL max_tokens or temperature.
KVG_SQL_FUNCTION(kvg_chat) {
  if (no_conversation(fcinfo, 2) || arg_is_null(fcinfo, 1) || arg_is_null(fcinfo, 4)) PG_RETURN_NULL();
  const int32 max_tokens = PG_GETARG_INT32(1);
  check_max_tokens(max_tokens);
  const uint64_t seed = arg_is_null(fcinfo, 3) ? 0 : uint64_t(PG_GETARG_INT64(3));
  const double temperature = PG_GETARG_FLOAT8(4);
  check_temperature(temperature, "temperature");  // the CLI's rule too (engine/request_limits.hpp)

  EngineCall call;
  const ChatPrompt prompt = chat_prompt_args(fcinfo, 2, *call.model);

  GenerateOptions options;
  options.max_new_tokens = max_tokens;
  options.sampling.temperature = float(temperature);
  options.sampling.seed = seed;
  options.prefill_chunk = kPrefillChunk;
  options.stop_tokens = prompt.stop_tokens;
  options.check = kCheckInterrupts;
  options.prefill_report = progress_notices("chat: prefilled");
  options.decode_report = progress_notices("chat: decoded");
  // In this backend or in the engine worker (kvg.engine): the same tokens.
  const GenerationRun run = run_generation(call, prompt.tokens, {}, options);
  const Grafted& grafted = run.grafted;
  const GenerateResult& result = run.result;
  std::vector<int32_t> answer = result.tokens;
  if (result.stopped_at_eos) answer.pop_back();  // the end of the turn is not part of the answer
  const std::string output = call.model->tokenizer().decode(answer);

  AuditRecord audit = call.audit("chat");
  audit.input_sha256 = text_sha256(prompt.text);
  audit.set_output(output);
  audit_generation(audit, call, grafted, prompt.tokens, options, result);
  audit_append(call.spi, audit);
  return text_result(output_text(output));
}
