#include "cli/eval/eval_report.hpp"

#include <cstdio>
#include <map>
#include <set>

#include "cli/args.hpp"

namespace kvg::cli {

namespace {

constexpr const char* kPhases[] = {"cold", "recurring", "transfer"};

struct Summary {
  int64_t questions = 0, correct = 0;
  double decoded = 0, prefilled = 0, grafted = 0, ms = 0, flops = 0;
  std::map<std::string, int64_t> modes;

  void add(const EvalRecord& r) {
    ++questions;
    correct += r.correct ? 1 : 0;
    decoded += double(r.decoded_tokens);
    prefilled += double(r.prompt_tokens - r.grafted_tokens);
    grafted += double(r.grafted_tokens);
    ms += r.ms;
    flops += r.flops;
    ++modes[r.mode];
  }
  double mean(double total) const { return questions ? total / double(questions) : 0; }
  double accuracy() const { return questions ? double(correct) / double(questions) : 0; }
};

Summary summarize(const EvalOutcome& o, const std::string& phase, const std::string* kind) {
  Summary s;
  for (const EvalRecord& r : o.records)
    if (r.phase == phase && (!kind || r.kind == *kind)) s.add(r);
  return s;
}

std::set<std::string> kinds(const EvalOutcome& o) {
  std::set<std::string> out;
  for (const EvalRecord& r : o.records)
    if (!r.kind.empty()) out.insert(r.kind);
  return out;
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string summary_json(const Summary& s) {
  std::string modes;
  for (const auto& [mode, n] : s.modes) modes += (modes.empty() ? "" : ", ") + ("\"" + mode + "\": " + std::to_string(n));
  return "{\"accuracy\": " + number(s.accuracy()) + ", \"questions\": " + std::to_string(s.questions) +
         ", \"correct\": " + std::to_string(s.correct) + ", \"decode_tokens_mean\": " + number(s.mean(s.decoded)) +
         ", \"prefill_tokens_mean\": " + number(s.mean(s.prefilled)) +
         ", \"grafted_tokens_mean\": " + number(s.mean(s.grafted)) + ", \"ms_mean\": " + number(s.mean(s.ms)) +
         ", \"flops_mean\": " + number(s.mean(s.flops)) + ", \"modes\": {" + modes + "}";
}

// A template on one line: newlines, tabs and backslashes escaped.
std::string escaped_text(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c == '\\') out += "\\\\";
    else out += c;
  }
  return out;
}

}  // namespace

std::string eval_json(const EvalSummaryHeader& h, const EvalOutcome& o) {
  std::string out = "{\"model\": \"" + json_escape(h.model) + "\", \"source\": \"" + json_escape(h.source) +
                    "\", \"questions\": " + std::to_string(h.questions) + ", \"learning\": " +
                    std::to_string(h.learning) + ", \"held_out\": " + std::to_string(h.held_out) +
                    ", \"deposited\": " + std::to_string(o.deposited) + ", \"template\": \"" +
                    json_escape(h.template_text) + "\", \"template_source\": \"" + json_escape(h.template_source) +
                    "\"";
  const std::set<std::string> all_kinds = kinds(o);
  for (const char* phase : kPhases) {
    out += ", \"" + std::string(phase) + "\": " + summary_json(summarize(o, phase, nullptr));
    if (!all_kinds.empty()) {
      out += ", \"by_kind\": {";
      bool first = true;
      for (const std::string& k : all_kinds) {
        out += (first ? "\"" : ", \"") + json_escape(k) + "\": " + summary_json(summarize(o, phase, &k)) + "}";
        first = false;
      }
      out += "}";
    }
    out += "}";
  }
  out += ", \"graft_check\": {\"checked\": " + std::to_string(o.checked) + ", \"exact\": " +
         std::to_string(o.checked_exact) + "}";
  out += ", \"flops_note\": \"an estimate: 2 x weights + attention per computed position, from the model's shape\"}\n";
  return out;
}

std::string eval_table(const EvalSummaryHeader& h, const EvalOutcome& o) {
  char line[256];
  std::string out = "kvg eval: " + h.model + " on " + h.source + ": " + std::to_string(h.questions) +
                    " questions, " + std::to_string(h.learning) + " learning (" + std::to_string(o.deposited) +
                    " deposited), " + std::to_string(h.held_out) + " held out\n";
  out += "template: \"" + escaped_text(h.template_text) + "\" (from the " + h.template_source + ")\n";
  std::snprintf(line, sizeof line, "%-22s %9s %9s %9s %9s %9s %9s %11s\n", "phase", "questions", "accuracy",
                "decoded", "prefilled", "grafted", "ms", "GFLOP(est)");
  out += line;
  const std::set<std::string> all_kinds = kinds(o);
  auto row = [&](const std::string& label, const Summary& s) {
    std::snprintf(line, sizeof line, "%-22s %9lld %8.1f%% %9.1f %9.1f %9.1f %9.2f %11.4f\n", label.c_str(),
                  (long long)s.questions, 100 * s.accuracy(), s.mean(s.decoded), s.mean(s.prefilled),
                  s.mean(s.grafted), s.mean(s.ms), s.mean(s.flops) / 1e9);
    out += line;
  };
  for (const char* phase : kPhases) {
    row(phase, summarize(o, phase, nullptr));
    for (const std::string& k : all_kinds) row(std::string("  ") + phase + "/" + k, summarize(o, phase, &k));
  }
  out += "graft_check: " + std::to_string(o.checked_exact) + " of " + std::to_string(o.checked) +
         " sampled grafted answers have logits bytes equal to recomputation\n";
  out += "(tokens and ms per answer; GFLOP: an estimate from the model's shape and the positions computed)\n";
  return out;
}

}  // namespace kvg::cli
