#!/usr/bin/env bash
# Exports an audit manifest with the artifacts its rows name, as a directory
# that `kvg reproduce --store DIR/store` reads (docs/audit-export.md):
#
#   scripts/kvg-audit-export.sh DIR [FROM_SEQ [TO_SEQ]]
#
#   DIR/manifest.jsonl   SELECT kvg_manifest_lines(FROM_SEQ, TO_SEQ): a header
#                        line, then one line per audit row (streamed by psql,
#                        FETCH_COUNT 10000)
#   DIR/store/XX/H.kvga  every artifact the rows name (artifact_sha256 and
#                        each hash of artifact_chain) and the parents those
#                        continue (kvg.artifacts.parent_sha256), each once, as
#                        kvg_export(H) returns its bytes; XX is H's first two
#                        hex digits (storage/file_store.cpp). Each file's
#                        SHA-256 is checked to equal its name.
#   DIR/templates/H.txt  the knowledge template each answer row names by its
#                        template_sha256 H (kvg.knowledge_templates), its exact
#                        text, checked to hash to H
#   DIR/missing.txt      only when some artifact is no longer stored (deleted):
#                        one line each, with the rows that name it. A missing
#                        artifact is not a failure of the export.
#
# The server and database are libpq's (PGHOST, PGPORT, PGUSER, PGDATABASE,
# ...). The role needs kvg_auditor (or superuser): it reads every row and
# every artifact. Each kvg_export is audited: the export appends one row
# (operation 'export') per artifact, after the manifest's rows. An artifact
# already in DIR/store whose bytes hash to its name is kept, not exported
# again. Writes nothing outside DIR. Exit 0 (missing artifacts included),
# 1 on an error (DIR unusable, psql or the server failing, a file that does
# not hash to its name), 2 on a usage error.
set -uo pipefail

usage() {
  echo "usage: $0 DIR [FROM_SEQ [TO_SEQ]]  (libpq environment variables select the server and database)" >&2
  exit 2
}
die() { echo "kvg-audit-export: $*" >&2; exit 1; }

if [ $# -lt 1 ] || [ $# -gt 3 ]; then usage; fi
dir=$1
from=${2:-}
to=${3:-}
for bound in "$from" "$to"; do
  [ -z "$bound" ] || [[ "$bound" =~ ^[0-9]+$ ]] || { echo "kvg-audit-export: FROM_SEQ and TO_SEQ are row numbers (seq), not '$bound'" >&2; usage; }
done

mkdir -p "$dir" || die "cannot create $dir"
work=$(mktemp -d "$dir/.export-XXXXXX") || die "cannot create a temporary directory in $dir"
trap 'rm -rf "$work"' EXIT

psql_() { psql -X -At -v ON_ERROR_STOP=1 "$@"; }

# 1. The manifest, streamed (constant memory in psql), renamed into place once
#    complete.
{ printf 'SELECT kvg_manifest_lines(%s::bigint, %s::bigint);\n' "${from:-NULL}" "${to:-NULL}"; } |
  psql_ -v FETCH_COUNT=10000 -o "$work/manifest.jsonl" 2>"$work/err" ||
  die "kvg_manifest_lines failed (the role needs kvg_auditor, the database the kvg extension): $(cat "$work/err")"
[ -s "$work/manifest.jsonl" ] || die "kvg_manifest_lines returned nothing"
mv "$work/manifest.jsonl" "$dir/manifest.jsonl" || die "cannot write $dir/manifest.jsonl"
mkdir -p "$dir/store" || die "cannot create $dir/store"

# 2. The hashes the rows name, and the rows naming each (for missing.txt), read
#    a line at a time. Prints a query (on stdout) listing those hashes and the
#    parents they continue, with whether each is stored; the row count and seq
#    range go to $work/rows, the naming rows to $work/named.
python3 - "$dir/manifest.jsonl" "$work" >"$work/query.sql" <<'PY' || die "cannot read the manifest's artifacts"
import json, re, sys
path, work = sys.argv[1], sys.argv[2]
hexre = re.compile(r"^[0-9a-f]{64}$")
named = {}  # hash -> [seq, ...] (the first few)
rows, first, last = 0, None, None
with open(path, encoding="utf-8") as f:
    header = json.loads(f.readline())
    if header.get("format") != "kvg-manifest-lines-v1":
        sys.exit(f"{path}: not a kvg_manifest_lines() export (format {header.get('format')!r})")
    for n, line in enumerate(f, 2):
        row = json.loads(line)
        rows += 1
        seq = row["seq"]
        first = seq if first is None else first
        last = seq
        hashes = []
        if row.get("artifact_sha256"):
            hashes.append(row["artifact_sha256"])
        if row.get("artifact_chain"):
            hashes += [h for h in re.split(r"[,\s]+", row["artifact_chain"]) if h]
        for h in hashes:
            if not hexre.match(h):
                sys.exit(f"{path}:{n}: row seq {seq} names '{h}', not a SHA-256")
            seqs = named.setdefault(h, [])
            if seq not in seqs:
                seqs.append(seq)
with open(f"{work}/rows", "w") as out:
    print(rows, first if first is not None else "-", last if last is not None else "-", file=out)
with open(f"{work}/named", "w") as out:
    for h, seqs in named.items():
        print(h, " ".join(map(str, seqs)), file=out)
# The closure over parents: a continuation's chain is grafted (and its tokens
# read by kvg reproduce) from the root up.
values = ",".join(f"('{h}')" for h in sorted(named)) or "(NULL)"
print(f"""WITH RECURSIVE named(sha256) AS (SELECT v FROM (VALUES {values}) t(v) WHERE v IS NOT NULL),
closure(sha256) AS (
  SELECT sha256 FROM named
  UNION
  SELECT a.parent_sha256 FROM closure c JOIN kvg.artifacts a ON a.sha256 = c.sha256 WHERE a.parent_sha256 IS NOT NULL)
SELECT c.sha256, a.sha256 IS NOT NULL FROM closure c LEFT JOIN kvg.artifacts a USING (sha256)
ORDER BY c.sha256;""")
PY
read -r nrows first_seq last_seq <"$work/rows"
psql_ -F ' ' -f "$work/query.sql" -o "$work/artifacts" 2>"$work/err" ||
  die "cannot list the artifacts in kvg.artifacts: $(cat "$work/err")"

# 3. Each artifact's bytes, hex-decoded, hashed and written by one Python
#    process per artifact (streaming: constant memory besides psql's result),
#    into a temporary file in the store renamed into place when it hashes to
#    its name.
decode='
import hashlib, os, sys
dest, expected = sys.argv[1], sys.argv[2]
tmp = dest + ".tmp"
sha, size, carry = hashlib.sha256(), 0, b""
with open(tmp, "wb") as out:
    while True:
        chunk = sys.stdin.buffer.read(1 << 20)
        if not chunk:
            break
        chunk = carry + chunk.strip()
        cut = len(chunk) - len(chunk) % 2
        data, carry = bytes.fromhex(chunk[:cut].decode("ascii")), chunk[cut:]
        sha.update(data)
        out.write(data)
        size += len(data)
    out.flush()
    os.fsync(out.fileno())
if carry or sha.hexdigest() != expected:
    os.unlink(tmp)
    sys.exit(f"the bytes exported for {expected} hash to {sha.hexdigest()} ({size} bytes), not to their name")
os.chmod(tmp, 0o644)
os.rename(tmp, dest)
print(size)
'
hashes_to() { [ "$(sha256sum <"$1" | cut -c1-64)" = "$2" ]; }
: >"$work/missing"
exported=0 kept=0 bytes=0 total=0
while read -r sha stored; do
  [ -n "$sha" ] || continue
  total=$((total + 1))
  dest=$dir/store/${sha:0:2}/$sha.kvga
  if [ "$stored" != t ]; then
    echo "$sha" >>"$work/missing"
    continue
  fi
  if [ -f "$dest" ] && hashes_to "$dest" "$sha"; then
    kept=$((kept + 1))
    bytes=$((bytes + $(stat -c %s "$dest")))
    continue
  fi
  mkdir -p "$dir/store/${sha:0:2}" || die "cannot create $dir/store/${sha:0:2}"
  psql_ -c "SELECT encode(kvg_export('$sha'), 'hex')" 2>"$work/err" | python3 -c "$decode" "$dest" "$sha" >"$work/size" 2>"$work/decode-err"
  status=("${PIPESTATUS[@]}")
  if [ "${status[0]}" != 0 ]; then
    # Deleted since it was listed? Then it is missing, not an error.
    gone=$(psql_ -c "SELECT count(*) = 0 FROM kvg.artifacts WHERE sha256 = '$sha'" 2>/dev/null)
    if [ "$gone" = t ]; then
      echo "$sha" >>"$work/missing"
      continue
    fi
    die "kvg_export('$sha') failed: $(cat "$work/err")"
  fi
  [ "${status[1]}" = 0 ] || die "artifact $sha was not written to $dest: $(cat "$work/decode-err")"
  exported=$((exported + 1))
  bytes=$((bytes + $(cat "$work/size")))
done <"$work/artifacts"

# 3b. The templates the answer rows were laid out from, each as its exact text.
mkdir -p "$dir/templates" || die "cannot create $dir/templates"
python3 - "$dir/manifest.jsonl" >"$work/templates" <<'PY' || die "cannot read the manifest's templates"
import json, sys
with open(sys.argv[1], encoding="utf-8") as f:
    f.readline()
    print("\n".join(sorted({h for h in (json.loads(l).get("template_sha256") for l in f) if h})))
PY
ntemplates=0
while read -r sha; do
  [ -n "$sha" ] || continue
  psql_ -c "SELECT encode(convert_to(template, 'UTF8'), 'hex') FROM kvg.knowledge_templates WHERE sha256 = '$sha'" \
    >"$work/template.hex" 2>"$work/err" || die "reading template $sha failed: $(cat "$work/err")"
  [ -s "$work/template.hex" ] || { echo "$sha" >>"$work/missing_templates"; continue; }
  python3 -c 'import sys; sys.stdout.buffer.write(bytes.fromhex(open(sys.argv[1]).read().strip()))' "$work/template.hex" \
    >"$work/template.txt" || die "cannot decode template $sha"
  [ "$(sha256sum <"$work/template.txt" | cut -d' ' -f1)" = "$sha" ] || die "template $sha does not hash to its name"
  mv "$work/template.txt" "$dir/templates/$sha.txt"
  ntemplates=$((ntemplates + 1))
done <"$work/templates"

# 4. missing.txt: one line per artifact no longer stored, with the rows that
#    name it (a parent found missing is named by no row: it was deleted while
#    the export ran).
rm -f "$dir/missing.txt"
nmissing=$(wc -l <"$work/missing")
if [ "$nmissing" -gt 0 ]; then
  while read -r sha; do
    seqs=$(awk -v h="$sha" '$1 == h { $1 = ""; sub(/^ /, ""); gsub(/ /, ", "); print }' "$work/named")
    echo "$sha: not stored (deleted: kvg_artifact_delete or kvg_vacuum); named by the rows seq ${seqs:-(none: a parent, deleted during the export)}; kvg reproduce cannot rebuild a prompt that continued it"
  done <"$work/missing" >"$dir/missing.txt"
fi

summary="kvg-audit-export: $nrows rows (seq ${first_seq}..${last_seq}) in $dir/manifest.jsonl; $total artifacts"
summary+=" ($exported exported, $kept already in $dir/store), $bytes bytes; $ntemplates templates; $nmissing missing"
[ "$nmissing" = 0 ] || summary+=" (listed in $dir/missing.txt)"
echo "$summary"
[ "$nmissing" = 0 ] || echo "kvg-audit-export: warning: $nmissing artifacts named by the manifest are no longer stored: see $dir/missing.txt" >&2
exit 0
