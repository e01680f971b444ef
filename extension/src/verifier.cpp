#include "extension/src/verifier.hpp"

#include <regex>

#include "common/error.hpp"
#include "extension/src/spi.hpp"
#include "extension/src/sql_raise.hpp"

namespace kvg::pg {

namespace {

constexpr const char* kForms =
    "A verifier is contains, exact:<answer>, regex:<pattern>, or the name of a function (question text, answer "
    "text) returning boolean.";

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// [schema.]name, each part an identifier or a double-quoted identifier:
// checked here so that to_regprocedure never sees anything else.
bool is_qualified_name(const std::string& s) {
  static const std::regex name(
      R"re(^("([^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*)(\.("([^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*))?$)re");
  return std::regex_match(s, name);
}

}  // namespace

Verifier parse_verifier(Spi& spi, const std::string& text) {
  if (text == "contains") return {Verifier::Kind::Contains, text};
  if (starts_with(text, "exact:")) {
    const auto words = spi.run("SELECT kvg.answer_words($1)", {text.substr(6)});
    if (words.at(0).at(0).value_or("").empty())
      raise_sqlstate("22023", "verifier exact: needs an answer with at least one letter or digit", kForms);
    return {Verifier::Kind::Exact, text};
  }
  if (starts_with(text, "regex:")) {
    spi.run("SELECT '' ~ $1", {text.substr(6)});  // an invalid pattern raises 2201B here
    return {Verifier::Kind::Regex, text};
  }
  if (!is_qualified_name(text))
    raise_sqlstate("22023", "verifier \"" + text.substr(0, 200) + "\" is not one of the verifier forms", kForms);
  // Resolved with the caller's search_path, stored qualified: a later check
  // must not depend on whoever's search_path is current then.
  const auto rows = spi.run(
      "SELECT format('%I.%I', n.nspname, p.proname), p.prorettype = 'boolean'::regtype, "
      "n.oid = pg_catalog.pg_my_temp_schema() "
      "FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace "
      "WHERE p.oid = pg_catalog.to_regprocedure($1 || '(text, text)')",
      {text});
  if (rows.empty()) raise_sqlstate("42883", "verifier function " + text + "(text, text) does not exist", kForms);
  if (rows[0].at(1) != SqlValue("t"))
    raise_sqlstate("42804", "verifier function " + text + "(text, text) does not return boolean", kForms);
  // The library outlives the session; its verifiers must too.
  if (rows[0].at(2) == SqlValue("t"))
    raise_sqlstate("22023", "verifier function " + text + " is temporary: it would vanish before the entry does",
                   "Create the verifier in a permanent schema.");
  return {Verifier::Kind::Function, rows[0].at(0).value()};
}

bool passes(Spi& spi, const std::string& verifier, const std::string& question, const std::string& candidate,
            const std::optional<std::string>& reference) {
  const auto rows = spi.run("SELECT kvg.verify($1, $2, $3, $4)", {verifier, question, candidate, reference});
  return rows.at(0).at(0) == SqlValue("t");
}

std::string evidence(const Verifier& verifier, const std::string& answer) {
  switch (verifier.kind) {
    case Verifier::Kind::Contains:
      return "the solution contains the answer \"" + answer + "\"";
    case Verifier::Kind::Exact:
      return "the answer has the words of \"" + verifier.spec.substr(6) + "\"";
    case Verifier::Kind::Regex:
      return "the answer matches the regular expression " + verifier.spec.substr(6);
    case Verifier::Kind::Function:
      return verifier.spec + "(question, answer) returned true";
  }
  throw Error(ErrorCode::Internal, "unknown verifier kind");
}

}  // namespace kvg::pg
