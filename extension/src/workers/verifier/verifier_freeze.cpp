// Freezing a function verifier (verifier_freeze.hpp).
#include "extension/src/pg/postgres.hpp"

extern "C" {
#include "access/htup_details.h"
#include "catalog/dependency.h"
#include "catalog/pg_authid.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_language.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "commands/extension.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "executor/spi.h"
#include "nodes/nodes.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
}

#include <cstdlib>
#include <cstring>

#include "extension/src/workers/verifier/verifier_freeze.hpp"

namespace kvg::pg::verifier_worker {

namespace {

// A verifier is a small function; this bounds the work of a freeze.
constexpr int kMaxFunctions = 256;
// The advisory lock that serializes freezes (classid, objid of
// pg_advisory_xact_lock(int4, int4)): "kvgF", 1.
constexpr int32 kFreezeLockKey = 0x6b766746;

constexpr const char* kChanged =
    "it changed while it was frozen into one a verifier may not be (learn it again to see why)";

// A function reached, its callees among those reached, and its copy.
struct Reached {
  Oid fn;
  Oid* callees;
  int n_callees;
  Oid copy;  // InvalidOid until made
};

bool is_builtin(Oid fn) {
  HeapTuple tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
  if (!HeapTupleIsValid(tup)) return false;
  const Form_pg_proc proc = reinterpret_cast<Form_pg_proc>(GETSTRUCT(tup));
  const bool builtin = proc->proowner == BOOTSTRAP_SUPERUSERID && proc->pronamespace == PG_CATALOG_NAMESPACE;
  ReleaseSysCache(tup);
  return builtin;
}

// kvg.verifier_copies(fn): what to copy. -1 when there is too much.
int read_reached(Oid fn, Reached** out) {
  Oid types[1] = {OIDOID};
  Datum values[1] = {ObjectIdGetDatum(fn)};
  if (SPI_execute_with_args("SELECT function, callees FROM kvg.verifier_copies($1)", 1, types, values, nullptr,
                            false, 0) != SPI_OK_SELECT)
    elog(ERROR, "kvg verifier: reading what to freeze failed");
  const int n = int(SPI_processed);
  if (n > kMaxFunctions) return -1;
  auto* reached = static_cast<Reached*>(palloc0(sizeof(Reached) * (n > 0 ? n : 1)));
  for (int i = 0; i < n; ++i) {
    bool isnull;
    reached[i].fn = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
    ArrayType* callees = DatumGetArrayTypeP(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
    Datum* elements;
    int count;
    deconstruct_array(callees, OIDOID, sizeof(Oid), true, TYPALIGN_INT, &elements, nullptr, &count);
    reached[i].callees = static_cast<Oid*>(palloc(sizeof(Oid) * (count > 0 ? count : 1)));
    for (int k = 0; k < count; ++k) reached[i].callees[k] = DatumGetObjectId(elements[k]);
    reached[i].n_callees = count;
  }
  *out = reached;
  return n;
}

int find(const Reached* reached, int n, Oid fn) {
  for (int i = 0; i < n; ++i)
    if (reached[i].fn == fn) return i;
  return -1;
}

bool ready(const Reached& r, const Reached* reached, int n) {
  for (int k = 0; k < r.n_callees; ++k) {
    const int i = find(reached, n, r.callees[k]);
    if (i < 0 || !OidIsValid(reached[i].copy)) return false;
  }
  return true;
}

// The body's node text with each call (":funcid N") of a reached function
// bound to its copy. The node text holds no string literal (a constant is
// printed as its bytes), so nothing else can read as a call. False when it
// calls a function neither reached nor built in: its body changed since
// kvg.verifier_copies read what it reaches.
bool bind_calls(const char* body, const Reached* reached, int n, StringInfo out) {
  static const char kCall[] = ":funcid ";
  const char* rest = body;
  while (const char* hit = std::strstr(rest, kCall)) {
    const char* number = hit + sizeof(kCall) - 1;
    appendBinaryStringInfo(out, rest, int(number - rest));
    char* end;
    const unsigned long id = std::strtoul(number, &end, 10);
    if (end == number) return false;
    Oid callee = Oid(id);
    if (const int i = find(reached, n, callee); i >= 0)
      callee = reached[i].copy;
    else if (!is_builtin(callee))
      return false;
    appendStringInfo(out, "%u", callee);
    rest = end;
  }
  appendStringInfoString(out, rest);
  return true;
}

void append_array(StringInfo out, const char* label, HeapTuple tup, AttrNumber column) {
  bool isnull;
  const Datum value = SysCacheGetAttr(PROCOID, tup, column, &isnull);
  appendStringInfo(out, "\n%s %s", label, isnull ? "-" : OidOutputFunctionCall(F_ARRAY_OUT, value));
}

// "v_" and the first 40 hex digits of the SHA-256 of what the copy is: its
// signature, attributes and body (as pg_proc stores it: a node tree's text).
void copy_name(HeapTuple tup, const char* bound_body, char name[NAMEDATALEN]) {
  const auto* proc = reinterpret_cast<Form_pg_proc>(GETSTRUCT(tup));
  StringInfoData what;
  initStringInfo(&what);
  appendStringInfo(&what, "kvg-frozen-v1\nreturns %u set %d strict %d volatility %c parallel %c cost %g rows %g\nargs",
                   proc->prorettype, int(proc->proretset), int(proc->proisstrict), proc->provolatile,
                   proc->proparallel, double(proc->procost), double(proc->prorows));
  for (int i = 0; i < proc->pronargs; ++i) appendStringInfo(&what, " %u", proc->proargtypes.values[i]);
  append_array(&what, "all", tup, Anum_pg_proc_proallargtypes);
  append_array(&what, "modes", tup, Anum_pg_proc_proargmodes);
  append_array(&what, "names", tup, Anum_pg_proc_proargnames);
  appendStringInfo(&what, "\nbody %s", bound_body);
  uint8 digest[PG_SHA256_DIGEST_LENGTH];
  pg_cryptohash_ctx* hash = pg_cryptohash_create(PG_SHA256);
  if (hash == nullptr || pg_cryptohash_init(hash) < 0 ||
      pg_cryptohash_update(hash, reinterpret_cast<const uint8*>(what.data), size_t(what.len)) < 0 ||
      pg_cryptohash_final(hash, digest, sizeof digest) < 0)
    elog(ERROR, "kvg verifier: could not hash a frozen copy");
  pg_cryptohash_free(hash);
  static const char kHex[] = "0123456789abcdef";
  std::strcpy(name, "v_");
  for (int i = 0; i < 20; ++i) {
    name[2 + 2 * i] = kHex[digest[i] >> 4];
    name[3 + 2 * i] = kHex[digest[i] & 15];
  }
  name[42] = '\0';
}

Datum attribute_or_null(HeapTuple tup, AttrNumber column) {
  bool isnull;
  const Datum value = SysCacheGetAttr(PROCOID, tup, column, &isnull);
  return isnull ? PointerGetDatum(nullptr) : value;
}

// The copy of reached[at] (whose callees are copied), or InvalidOid.
Oid copy_one(const Reached* reached, int n, int at, Oid frozen_schema, Oid owner, Oid extension) {
  HeapTuple tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(reached[at].fn));
  if (!HeapTupleIsValid(tup)) return InvalidOid;
  const auto* proc = reinterpret_cast<Form_pg_proc>(GETSTRUCT(tup));
  bool no_body, no_config, isnull;
  const Datum body = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosqlbody, &no_body);
  (void)SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_proconfig, &no_config);
  StringInfoData bound;
  initStringInfo(&bound);
  if (no_body || !no_config || proc->prolang != SQLlanguageId || proc->prokind != PROKIND_FUNCTION ||
      proc->prosecdef || OidIsValid(proc->prosupport) || !bind_calls(TextDatumGetCString(body), reached, n, &bound)) {
    ReleaseSysCache(tup);
    return InvalidOid;
  }
  // As pg_proc will store it (a node tree read back loses its locations), so
  // that the copy's name is the hash of what its row holds (frozen_intact).
  const char* stored = nodeToString(stringToNode(bound.data));
  char name[NAMEDATALEN];
  copy_name(tup, stored, name);
  Oid copy = GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid, CStringGetDatum(name),
                             PointerGetDatum(&proc->proargtypes), ObjectIdGetDatum(frozen_schema));
  // A copy of this name that is not what its name says (restored from a
  // dump, its body parsed anew; or changed by a superuser) is made so again.
  if (!OidIsValid(copy) || !frozen_intact(copy)) {
    const char* source = TextDatumGetCString(SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosrc, &isnull));
    const ObjectAddress made = ProcedureCreate(
        name, frozen_schema, OidIsValid(copy), proc->proretset, proc->prorettype, owner, SQLlanguageId, InvalidOid,
        source, nullptr, static_cast<Node*>(stringToNode(stored)), PROKIND_FUNCTION, false, false,
        proc->proisstrict, proc->provolatile, proc->proparallel, const_cast<oidvector*>(&proc->proargtypes),
        attribute_or_null(tup, Anum_pg_proc_proallargtypes), attribute_or_null(tup, Anum_pg_proc_proargmodes),
        attribute_or_null(tup, Anum_pg_proc_proargnames), NIL, PointerGetDatum(nullptr), PointerGetDatum(nullptr),
        InvalidOid, proc->procost, proc->prorows);
    // Gone with DROP EXTENSION kvg, without CASCADE; not a member, so
    // pg_dump keeps it (the entries that name it restore with it).
    ObjectAddress owning;
    ObjectAddressSet(owning, ExtensionRelationId, extension);
    recordDependencyOn(&made, &owning, DEPENDENCY_AUTO);
    CommandCounterIncrement();
    copy = made.objectId;
  }
  ReleaseSysCache(tup);
  return copy;
}

// Whether copy `fn` is what its name says, and so is every function of
// kvg_frozen its body calls; `seen` counts the copies checked.
bool intact(Oid fn, Oid frozen_schema, Oid* seen, int* n_seen) {
  for (int i = 0; i < *n_seen; ++i)
    if (seen[i] == fn) return true;
  if (*n_seen >= kMaxFunctions) return false;
  seen[(*n_seen)++] = fn;
  HeapTuple tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
  if (!HeapTupleIsValid(tup)) return false;
  const auto* proc = reinterpret_cast<Form_pg_proc>(GETSTRUCT(tup));
  bool no_body, no_config;
  const Datum body = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosqlbody, &no_body);
  (void)SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_proconfig, &no_config);
  bool ok = !no_body && no_config && proc->pronamespace == frozen_schema && proc->prolang == SQLlanguageId &&
            proc->prokind == PROKIND_FUNCTION && !proc->prosecdef && !OidIsValid(proc->prosupport);
  const char* node_text = nullptr;
  if (ok) {
    node_text = TextDatumGetCString(body);
    char name[NAMEDATALEN];
    copy_name(tup, node_text, name);
    ok = std::strcmp(name, NameStr(proc->proname)) == 0;
  }
  ReleaseSysCache(tup);
  // Its callees: copies (checked the same way) or built in.
  static const char kCall[] = ":funcid ";
  for (const char* hit = ok ? std::strstr(node_text, kCall) : nullptr; ok && hit; hit = std::strstr(hit + 1, kCall)) {
    const Oid callee = Oid(std::strtoul(hit + sizeof(kCall) - 1, nullptr, 10));
    ok = is_builtin(callee) || intact(callee, frozen_schema, seen, n_seen);
  }
  return ok;
}

}  // namespace

bool frozen_intact(Oid fn) {
  const Oid frozen_schema = get_namespace_oid("kvg_frozen", false);
  Oid seen[kMaxFunctions];
  int n_seen = 0;
  return intact(fn, frozen_schema, seen, &n_seen);
}

Oid freeze_function(Oid fn, const char** refusal) {
  Datum key[2] = {Int32GetDatum(kFreezeLockKey), Int32GetDatum(1)};
  Oid key_types[2] = {INT4OID, INT4OID};
  if (SPI_execute_with_args("SELECT pg_catalog.pg_advisory_xact_lock($1, $2)", 2, key_types, key, nullptr, false,
                            0) != SPI_OK_SELECT)
    elog(ERROR, "kvg verifier: taking the freeze lock failed");
  AcceptInvalidationMessages();  // a copy another freeze committed meanwhile is seen

  Reached* reached = nullptr;
  const int n = read_reached(fn, &reached);
  if (n < 0) {
    *refusal = "it reaches more than 256 functions";
    return InvalidOid;
  }
  const Oid frozen_schema = get_namespace_oid("kvg_frozen", false);
  HeapTuple schema = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(frozen_schema));
  if (!HeapTupleIsValid(schema)) elog(ERROR, "kvg verifier: schema kvg_frozen is gone");
  const Oid owner = reinterpret_cast<Form_pg_namespace>(GETSTRUCT(schema))->nspowner;
  ReleaseSysCache(schema);
  const Oid extension = get_extension_oid("kvg", false);

  // Callees first: each copy's body names its callees' copies.
  for (int made = 0; made < n;) {
    bool progress = false;
    for (int i = 0; i < n; ++i) {
      if (OidIsValid(reached[i].copy) || !ready(reached[i], reached, n)) continue;
      reached[i].copy = copy_one(reached, n, i, frozen_schema, owner, extension);
      if (!OidIsValid(reached[i].copy)) {
        *refusal = kChanged;
        return InvalidOid;
      }
      ++made;
      progress = true;
    }
    if (!progress) {
      *refusal = "it calls itself, directly or through other functions: a verifier must end";
      return InvalidOid;
    }
  }
  const int top = find(reached, n, fn);
  if (top < 0) {
    *refusal = kChanged;
    return InvalidOid;
  }
  return reached[top].copy;
}

}  // namespace kvg::pg::verifier_worker
