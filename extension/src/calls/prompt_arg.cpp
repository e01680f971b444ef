#include "extension/src/calls/prompt_arg.hpp"

#include "common/error.hpp"
#include "engine/prompt.hpp"
#include "extension/src/calls/engine_call.hpp"
#include "extension/src/model/model_settings.hpp"
#include "extension/src/pg/pg_boundary.hpp"
#include "extension/src/calls/prefix_reuse.hpp"
#include "extension/src/spi/sql_values.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
}

namespace kvg::pg {

namespace {

bool is_token_array(FunctionCallInfo fcinfo, int n) {
  return call([&] { return get_fn_expr_argtype(fcinfo->flinfo, n); }) == INT4ARRAYOID;
}

ArrayType* array_arg(FunctionCallInfo fcinfo, int n) {
  return call([&] { return DatumGetArrayTypeP(PG_GETARG_DATUM(n)); });
}

}  // namespace

bool PromptArg::blank(FunctionCallInfo fcinfo, int n) {
  if (arg_is_null(fcinfo, n)) return true;
  if (!is_token_array(fcinfo, n)) return arg_is_blank(fcinfo, n);
  ArrayType* a = array_arg(fcinfo, n);
  return call([&] { return ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a)); }) == 0;
}

PromptArg::PromptArg(FunctionCallInfo fcinfo, int n, const Model& model, const char* name) {
  if (!is_token_array(fcinfo, n)) {
    text_ = prompt_text_arg(fcinfo, n, model, name);
    return;
  }
  ArrayType* a = array_arg(fcinfo, n);
  if (ARR_NDIM(a) > 1)
    throw Error(ErrorCode::InvalidArgument, std::string(name) + " must be a one-dimensional array of token ids");
  const int count = call([&] { return ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a)); });
  check_prompt_tokens(model, size_t(count), settings::max_context());  // before a token is read
  Datum* items = nullptr;
  bool* nulls = nullptr;
  int got = 0;
  call([&] { deconstruct_array(a, INT4OID, 4, true, TYPALIGN_INT, &items, &nulls, &got); });
  const int64_t vocab = model.config().n_vocab;
  ids_.reserve(size_t(got));
  for (int i = 0; i < got; ++i) {
    if (nulls[i])
      throw Error(ErrorCode::InvalidArgument, std::string(name) + " holds a NULL token id at position " +
                                                  std::to_string(i + 1));
    const int32_t id = DatumGetInt32(items[i]);
    if (id < 0 || id >= vocab)
      throw Error(ErrorCode::InvalidArgument, std::string(name) + " holds token id " + std::to_string(id) +
                                                  " at position " + std::to_string(i + 1) +
                                                  ", outside this model's vocabulary of " + std::to_string(vocab));
    ids_.push_back(id);
  }
}

std::vector<int32_t> PromptArg::fresh(const Model& model) const {
  return text_ ? fresh_prompt(model, *text_, kCheckInterrupts, settings::max_context()) : ids_;
}

std::vector<int32_t> PromptArg::after(const Model& model, const std::vector<int32_t>& chain) const {
  if (text_) return prompt_after_chain(model, chain, *text_, kCheckInterrupts, settings::max_context());
  std::vector<int32_t> prompt = chain;
  prompt.insert(prompt.end(), ids_.begin(), ids_.end());
  check_prompt_tokens(model, prompt.size(), settings::max_context());
  return prompt;
}

std::string PromptArg::sha256() const {
  return text_ ? text_sha256(*text_) : tokens_sha256(ids_);
}

}  // namespace kvg::pg
