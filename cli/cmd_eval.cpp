// `kvg eval`: does the flywheel help this model on these questions? Cold,
// recurring and transfer accuracy and cost, in one process and one library
// (cli/eval/eval_phases.hpp). Questions come from a JSONL file (--questions) or a
// built-in generator (--generator NAME --seed S --count N); --dump writes
// them as JSONL instead of evaluating (the reader model's training script
// takes its data this way).
#include <cstdio>
#include <fstream>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "cli/engine_flags.hpp"
#include "cli/eval/eval_generator.hpp"
#include "cli/eval/eval_report.hpp"
#include "common/error.hpp"
#include "engine/knowledge_prompt.hpp"

namespace kvg::cli {

namespace {

std::vector<EvalItem> eval_items(const Args& args, std::string* source) {
  if (args.has("questions") == args.has("generator"))
    throw Error(ErrorCode::InvalidArgument, "give exactly one of --questions FILE and --generator NAME");
  if (args.has("questions")) {
    *source = args.get("questions");
    return read_eval_items(*source);
  }
  const int64_t seed = args.get_int("seed", 1);
  if (seed < 0) throw Error(ErrorCode::InvalidArgument, "--seed must be >= 0");
  const bool training = args.has("training-split");
  *source = args.get("generator") + " seed " + std::to_string(seed) + (training ? " (training split)" : "");
  return generate_items(args.get("generator"), uint64_t(seed), args.get_int("count", 500),
                        training ? GeneratorSplit::Training : GeneratorSplit::Evaluation);
}

}  // namespace

int cmd_eval(const Args& args) {
  std::string source;
  const std::vector<EvalItem> items = eval_items(args, &source);
  if (args.has("dump")) {
    const std::string path = args.get("dump");
    const std::string text = eval_items_jsonl(items);
    if (path == "-") {
      std::fwrite(text.data(), 1, text.size(), stdout);
    } else {
      std::ofstream out(path, std::ios::binary);
      out << text;
      if (!out.flush()) throw Error(ErrorCode::Io, "cannot write " + path);
    }
    return 0;
  }
  if (args.has("training-split"))
    throw Error(ErrorCode::InvalidArgument, "--training-split only makes training data (with --dump)");

  auto model = load_model(args);
  const EngineOptions options = engine_options(args);
  const double min_similarity = args.get_double("min-similarity", 0.5);
  const int64_t entries = args.get_int("transfer-entries", 1);
  if (!(min_similarity > 0 && min_similarity <= 1)) throw Error(ErrorCode::InvalidArgument, "--min-similarity must be in (0, 1]");
  if (entries < 1 || entries > 16) throw Error(ErrorCode::InvalidArgument, "--transfer-entries must be 1..16");
  // No --template: the model's own (kvg.knowledge_template), else its chat
  // format, else the default (knowledge_template_for's precedence).
  const std::string setting = args.opt("template").value_or(kDefaultKnowledgeTemplate);
  const KnowledgeTemplate tmpl = knowledge_template_for(*model, setting);
  const KnowledgeTemplateSource from = knowledge_template_source(*model, setting);
  EvalLibrary library(model, options, tmpl, min_similarity, int(entries));
  EvalPlan plan;
  plan.learn = args.get_int("learn", int64_t(items.size() / 2));
  plan.max_tokens = args.get_int("max-tokens", 96);
  plan.checks = args.get_int("check", 8);
  if (plan.max_tokens < 1 || plan.max_tokens > 4096) throw Error(ErrorCode::InvalidArgument, "--max-tokens must be 1..4096");
  if (plan.checks < 0) throw Error(ErrorCode::InvalidArgument, "--check must be >= 0");
  const bool json = args.has("json");
  const EvalOutcome outcome = run_eval(library, items, plan, json ? nullptr : stderr);
  const EvalSummaryHeader header{args.get("model"),
                                 source,
                                 int64_t(items.size()),
                                 plan.learn,
                                 int64_t(items.size()) - plan.learn,
                                 tmpl.head + "{solution}" + tmpl.middle + "{question}" + tmpl.tail,
                                 from == KnowledgeTemplateSource::Setting
                                     ? std::string("flag")
                                     : std::string(knowledge_template_source_name(from))};
  const std::string text = json ? eval_json(header, outcome) : eval_table(header, outcome);
  std::fwrite(text.data(), 1, text.size(), stdout);
  // A sampled grafted answer whose logits differ from recomputation is a broken graft: fail.
  return outcome.checked_exact == outcome.checked ? 0 : 1;
}

}  // namespace kvg::cli
