#include "extension/src/verifier.hpp"

#include <regex>

#include "common/error.hpp"
#include "extension/src/owner_rights.hpp"
#include "extension/src/spi.hpp"
#include "extension/src/sql_raise.hpp"
#include "extension/src/trusted_roles.hpp"

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

// kvg.function_pin of the function `qualified`(text, text) as it is now, or
// nullopt when it does not exist. Read with the owner's rights: the pin must
// not depend on what the caller may see.
std::optional<std::string> current_pin(Spi& spi, const std::string& qualified) {
  OwnerRights owner;
  const auto rows =
      spi.run("SELECT kvg.function_pin(pg_catalog.to_regprocedure($1 || '(text, text)'))", {qualified});
  return rows.at(0).at(0);
}

}  // namespace

Verifier parse_verifier(Spi& spi, const std::string& text) {
  if (text == "contains") return {Verifier::Kind::Contains, text};
  if (starts_with(text, "exact:")) {
    const auto words = spi.run("SELECT kvg.answer_words($1)", {text.substr(6)});
    if (words.at(0).at(0).value_or("").empty())
      raise_sqlstate("22023", "verifier exact: needs an answer with at least one letter or digit", kForms);
    return {Verifier::Kind::Exact, text, std::nullopt};
  }
  if (starts_with(text, "regex:")) {
    spi.run("SELECT '' ~ $1", {text.substr(6)});  // an invalid pattern raises 2201B here
    return {Verifier::Kind::Regex, text, std::nullopt};
  }
  if (!is_qualified_name(text))
    raise_sqlstate("22023", "verifier \"" + text.substr(0, 200) + "\" is not one of the verifier forms", kForms);
  require_author(spi, "a function verifier",
                 "Other users' answers run a function verifier with the depositor's rights; a superuser grants "
                 "kvg_author to the roles trusted to write them (docs/security.md).");
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
  const std::string qualified = rows[0].at(0).value();
  return {Verifier::Kind::Function, qualified, current_pin(spi, qualified)};
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
  if (!verifier.pin) return closed("the entry was deposited before verifiers were pinned; learn it again");
  const std::optional<std::string> pin = current_pin(spi, verifier.spec);
  if (!pin) return closed("the function no longer exists");
  if (*pin != *verifier.pin) return closed("the function changed since the entry was deposited");
  const std::optional<unsigned> depositor = role_oid(verifier.depositor);
  if (!depositor) return closed("its depositor, role " + verifier.depositor + ", no longer exists");
  {
    OwnerRights owner;
    const auto allowed = spi.run(
        "SELECT pg_catalog.has_function_privilege($1::name, pg_catalog.to_regprocedure($2 || '(text, text)'), "
        "'EXECUTE')",
        {verifier.depositor, verifier.spec});
    if (allowed.at(0).at(0) != SqlValue("t")) return closed("its depositor may no longer execute it");
  }
  RunAs depositor_rights(*depositor, true);
  // spec is a quoted, qualified name (format('%I.%I')): safe to splice.
  const auto rows = spi.run(("SELECT " + verifier.spec + "($1, $2)").c_str(), {question, candidate});
  return {rows.at(0).at(0) == SqlValue("t"), std::nullopt};
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
