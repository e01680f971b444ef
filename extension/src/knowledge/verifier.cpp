#include "extension/src/knowledge/verifier.hpp"

#include <regex>

#include "common/error.hpp"
#include "extension/src/roles/owner_rights.hpp"
#include "extension/src/spi/spi.hpp"
#include "extension/src/pg/sql_raise.hpp"
#include "extension/src/roles/trusted_roles.hpp"
#include "extension/src/workers/verifier/verifier_worker.hpp"

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

bool is_function(const std::string& spec) {
  return spec != "contains" && !starts_with(spec, "exact:") && !starts_with(spec, "regex:");
}

// Refuses, by name, a function whose reach holds what a verifier may not
// (kvg.verifier_reach: code that cannot be followed, a table, another user's
// operator, type or text-search configuration, SECURITY DEFINER, ...). Read
// with the owner's rights: the answer must not depend on what the caller may
// see (and kvg.verifier_reach fixes every setting its text depends on).
void require_freezable(Spi& spi, const std::string& qualified) {
  OwnerRights owner;
  const auto refused = spi.run(
      "SELECT string_agg(object, ', ' ORDER BY object) "
      "FROM kvg.verifier_reach(pg_catalog.to_regprocedure($1 || '(text, text)')) WHERE NOT allowed",
      {qualified});
  if (const auto& names = refused.at(0).at(0))
    raise_sqlstate("42P13",
                   "verifier function " + qualified + " reaches what a verifier may not: " + names->substr(0, 1000),
                   "A verifier is a pure function of question and answer: it and every function it reaches must be "
                   "LANGUAGE sql with a BEGIN ATOMIC or RETURN body, neither SECURITY DEFINER nor SET anything, or "
                   "built in; it reads no table, uses only built-in operators, types and text-search "
                   "configurations, and runs no dynamic SQL (docs/security.md).");
}

// Copies it into kvg_frozen, in the verifier worker's own committed
// transaction (verifier_worker.hpp): the copy is what every check runs.
Verifier frozen_function(const std::string& qualified) {
  const verifier_worker::Outcome made = verifier_worker::freeze(qualified);
  if (made.refusal)
    raise_sqlstate("42P13", "verifier function " + qualified + " could not be frozen: " + *made.refusal,
                   "A verifier is frozen at deposit: the function and every function it reaches are copied into "
                   "kvg_frozen (docs/security.md).");
  Verifier verifier;
  verifier.kind = Verifier::Kind::Function;
  verifier.spec = qualified;
  verifier.pin = made.pin;
  verifier.frozen = made.frozen;
  return verifier;
}

}  // namespace

Verifier parse_verifier(Spi& spi, const std::string& text) {
  const auto builtin = [&text](Verifier::Kind kind) {
    Verifier verifier;
    verifier.kind = kind;
    verifier.spec = text;
    return verifier;
  };
  if (text == "contains") return builtin(Verifier::Kind::Contains);
  if (starts_with(text, "exact:")) {
    const auto words = spi.run("SELECT kvg.answer_words($1)", {text.substr(6)});
    if (words.at(0).at(0).value_or("").empty())
      raise_sqlstate("22023", "verifier exact: needs an answer with at least one letter or digit", kForms);
    return builtin(Verifier::Kind::Exact);
  }
  if (starts_with(text, "regex:")) {
    spi.run("SELECT '' ~ $1", {text.substr(6)});  // an invalid pattern raises 2201B here
    return builtin(Verifier::Kind::Regex);
  }
  if (!is_qualified_name(text))
    raise_sqlstate("22023", "verifier \"" + text.substr(0, 200) + "\" is not one of the verifier forms", kForms);
  require_author(spi, "a function verifier",
                 "Other users' answers run a function verifier with the depositor's rights; a superuser grants "
                 "kvg_author to the roles trusted to write them (docs/security.md).");
  // Resolved with the caller's search_path, stored qualified: a later check
  // must not depend on whoever's search_path is current then.
  const auto rows = spi.run_in_callers_path(
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
  const std::string qualified = rows[0].at(0).value();
  require_freezable(spi, qualified);
  return frozen_function(qualified);
}

Verdict check(Spi& spi, const StoredVerifier& verifier, const std::string& question, const std::string& candidate,
              const std::optional<std::string>& reference) {
  if (!is_function(verifier.spec)) {
    const auto rows = spi.run("SELECT kvg.verify($1, $2, $3, $4)", {verifier.spec, question, candidate, reference});
    return {rows.at(0).at(0) == SqlValue("t"), std::nullopt};
  }
  const auto closed = [&](const std::string& why) {
    return Verdict{false, "verifier " + verifier.spec + " was not run: " + why};
  };
  if (!verifier.pin || !verifier.frozen)
    return closed("the entry was deposited before verifiers were frozen; learn it again");
  // Pin, call and verdict all happen in the worker's own session.
  const verifier_worker::Outcome outcome = verifier_worker::run(*verifier.frozen, *verifier.pin, question, candidate);
  if (outcome.refusal) return closed(*outcome.refusal);
  return {outcome.passed, std::nullopt};
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
