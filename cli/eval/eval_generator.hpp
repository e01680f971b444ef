// Built-in question families for `kvg eval --generator NAME`: every item is
// made from a seed alone, so anyone can regenerate an evaluation set, and the
// training script of the model that reads (tools/train-reader/train.py) takes
// its data from the same code (`kvg eval --generator NAME --dump`), so the
// task has one definition.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cli/eval/eval_items.hpp"

namespace kvg::cli {

// Which questions a set may hold. The question space is split once, by a hash
// of the question, into a part reserved for training and a part reserved for
// evaluation, so no evaluation seed can draw a question a model was trained on.
enum class GeneratorSplit { Evaluation, Training };

// The families `--generator` accepts, for --help and errors.
std::string generator_names();

// `count` items of family `name` drawn from `seed` (deterministic on every
// platform). Throws InvalidArgument for an unknown name or a count the
// family cannot supply.
std::vector<EvalItem> generate_items(std::string_view name, uint64_t seed, int64_t count,
                                     GeneratorSplit split = GeneratorSplit::Evaluation);

}  // namespace kvg::cli
