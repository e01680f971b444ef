#!/usr/bin/env python3
"""Checks a kvg manifest (SELECT kvg_manifest(...)) without kvg or a database.

    kvg-manifest-check.py MANIFEST [--answers KEY.json] [--expect-head HASH]

MANIFEST is either one JSON document (kvg_manifest()) or JSON Lines
(kvg_manifest_lines(): a header line, then one line per audit row), which is
read one row at a time: a chain of any length is checked in constant memory.

For every audit row in the manifest it recomputes

  * the row hash, from the row's fields, by the canonical encoding of
    docs/audit-chain.md the row names (kvg-audit-v4, the one encoding);
  * the chain link: rows follow each other in chain order (seq 1, 2, ...),
    each row's prev_hash is the previous row's row_hash (and 64 zeros for
    the chain's first row), and the head, when the manifest reaches it,
    names the last row;
  * the output: output_sha256 is the SHA-256 of the raw output bytes
    (output_bytes, hexadecimal, when the model's bytes were not valid text;
    otherwise output_text's UTF-8), and output_text is those bytes with each
    ill-formed UTF-8 subpart and NUL replaced by U+FFFD (docs/output-bytes.md);
  * a positional composition (mode 'positional', not exact) has
    kv_proven = false; such rows are counted and said to be NOT exact
    (docs/composition.md).

With --answers it also re-scores the answers: KEY.json maps a question to its
right answer; an 'answer' row whose input_sha256 is the SHA-256 of a key's
question is right when the answer's words contain the key's words (the rule of
the 'contains' verifier, docs/flywheel.md). It prints the score per mode.

When the chain holds it prints the row_hash it ends on (the head to record
somewhere you trust); with --expect-head HASH the chain must end on that hash (a head
recorded earlier, when the manifest stops there).

Exits 0 when every hash and link holds, 1 on any mismatch (each one is printed
to stderr), 2 when the file cannot be read. Standard library only.
"""
import argparse
import hashlib
import json
import re
import sys

ZERO_HASH = "0" * 64
# The fields of each row encoding, in order (docs/audit-chain.md). A row
# names its encoding, so that a later one can be added beside this one.
ENCODINGS = {
    "kvg-audit-v4": ["id", "seq", "at", "role", "operation", "model_fingerprint", "recipe", "input_sha256",
                     "artifact_sha256", "output_sha256", "logits_sha256", "tokens_in", "tokens_out",
                     "tokens_grafted", "mode", "knowledge_id", "verified", "output_text", "graft_us",
                     "prefill_us", "decode_us", "kv_proven", "output_bytes", "caller_xid", "session_role",
                     "temperature", "top_p", "seed", "max_tokens", "stop_reason", "prompt_tokens_sha256",
                     "template_sha256", "artifact_chain", "prev_hash"],
}


def field_text(value):
    """A column value as the canonical encoding writes it (None is SQL NULL)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    raise ValueError(f"unexpected value {value!r}")


def row_hash(entry, encoding):
    text = encoding + "\n"
    for name in ENCODINGS[encoding]:
        value = field_text(entry.get(name))
        text += "-\n" if value is None else f"{len(value.encode('utf-8'))}:{value}\n"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_text(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def output_problem(entry):
    """What is wrong with a row's output fields, or None."""
    text, raw_hex = entry.get("output_text"), entry.get("output_bytes")
    if raw_hex is None:
        if text is not None and sha256_text(text) != entry.get("output_sha256"):
            return "output_sha256 is not the SHA-256 of output_text"
        return None
    try:
        raw = bytes.fromhex(raw_hex)
    except ValueError:
        return "output_bytes is not hexadecimal"
    if hashlib.sha256(raw).hexdigest() != entry.get("output_sha256"):
        return "output_sha256 is not the SHA-256 of output_bytes"
    if text != raw.decode("utf-8", "replace").replace("\0", "\ufffd"):
        return "output_text is not output_bytes with invalid UTF-8 replaced by U+FFFD"
    return None


def words(text):
    """kvg.answer_words: ASCII letters lower-cased, other ASCII non-alphanumerics separate words."""
    lowered = "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in text)
    return re.sub(r"[\x01-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]+", " ", lowered).strip(" ")


def contains(candidate, reference):
    ref = words(reference)
    return ref != "" and f" {ref} " in f" {words(candidate)} "


class ChainCheck:
    """The checks above, fed one row at a time in chain order."""

    def __init__(self, key=None):
        self.problems = []  # (id, message)
        self.previous = None
        self.rows = 0
        self.outputs = 0
        self.positional = 0
        self.by_hash = {sha256_text(q): a for q, a in key.items()} if key is not None else None
        self.scores = {}  # {mode: [right, total]} over 'answer' rows whose question is in the key

    def feed(self, entry):
        problems, previous = self.problems, self.previous
        rid = entry.get("id")
        encoding = entry.get("row_encoding")
        seq = entry.get("seq")
        if encoding not in ENCODINGS:
            problems.append((rid, f"unknown row encoding {encoding!r}"))
        elif row_hash(entry, encoding) != entry.get("row_hash"):
            problems.append((rid, "row_hash does not match the row's fields"))
        if previous is not None and entry.get("prev_hash") != previous.get("row_hash"):
            problems.append((rid, "prev_hash is not the previous row's row_hash"))
        if previous is not None and seq != previous.get("seq") + 1:
            problems.append((rid, "a row of the chain is missing before this one (seq)"))
        if previous is None and seq == 1 and entry.get("prev_hash") != ZERO_HASH:
            problems.append((rid, "the first audit row does not link to 64 zeros"))
        problem = output_problem(entry)
        if problem:
            problems.append((rid, problem))
        # A positional composition is never exact (docs/composition.md): a row
        # that says so and claims its KV is the engine's own is inconsistent.
        if entry.get("mode") == "positional":
            self.positional += 1
            if entry.get("kv_proven") is not False:
                problems.append((rid, "a positional composition (not exact) must have kv_proven = false"))
        self.rows += 1
        self.outputs += entry.get("output_text") is not None
        self.rescore(entry)
        # Only what the next row's checks need is kept.
        self.previous = {"id": rid, "seq": seq, "row_hash": entry.get("row_hash")}

    def rescore(self, entry):
        if self.by_hash is None or entry.get("operation") != "answer" or entry.get("input_sha256") not in self.by_hash:
            return
        right = contains(entry.get("output_text") or "", self.by_hash[entry["input_sha256"]])
        score = self.scores.setdefault(entry.get("mode"), [0, 0])
        score[0] += right
        score[1] += 1

    def finish(self, head, expect_head):
        last = self.previous
        if last is not None and head and head.get("last_id") == last.get("id") \
                and head.get("last_hash") != last.get("row_hash"):
            self.problems.append((last.get("id"), "the chain head does not name the last row"))
        if expect_head is not None and (last is None or last.get("row_hash") != expect_head.lower()):
            self.problems.append((last.get("id") if last else None,
                                  f"the chain ends on {last.get('row_hash') if last else 'no row'}, not on the "
                                  f"expected head {expect_head}"))


def read_manifest(f, check):
    """Feeds every row of the manifest file to check; returns the manifest's head (or None)."""
    first = f.readline()
    try:
        header = json.loads(first)
    except ValueError:
        header = {}  # the first line of a document spread over lines
    if isinstance(header, dict) and header.get("format") == "kvg-manifest-lines-v1":
        for line in f:
            if line.strip():
                check.feed(json.loads(line))
        return header.get("head")
    manifest = json.loads(first + f.read())  # one JSON document
    for entry in manifest.get("entries", []):
        check.feed(entry)
    return manifest.get("head")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("manifest")
    parser.add_argument("--answers", help="JSON object: question -> right answer")
    parser.add_argument("--expect-head", metavar="HASH",
                        help="the row_hash the chain must end on: a head recorded outside the database")
    args = parser.parse_args()
    try:
        key = None
        if args.answers:
            with open(args.answers, encoding="utf-8") as f:
                key = json.load(f)
        check = ChainCheck(key)
        with open(args.manifest, encoding="utf-8") as f:
            head = read_manifest(f, check)
    except (OSError, ValueError) as e:
        print(f"cannot read: {e}", file=sys.stderr)
        return 2

    check.finish(head, args.expect_head)
    for rid, message in check.problems:
        print(f"audit row {rid}: {message}", file=sys.stderr)
    if check.problems:
        print(f"manifest REJECTED: {len(check.problems)} problem(s) in {check.rows} rows")
    else:
        print(f"manifest ok: {check.rows} rows, every row hash and chain link holds, {check.outputs} outputs "
              f"re-hashed")
        if check.previous is not None:
            # What to record outside the database, and compare with next time.
            print(f"ends at seq {check.previous.get('seq')}: head {check.previous.get('row_hash')}")
    if check.positional:
        print(f"{check.positional} row(s) NOT exact: positional compositions (mode 'positional', "
              f"docs/composition.md)")
    if key is not None:
        for mode, (right, total) in sorted(check.scores.items(), key=lambda kv: str(kv[0])):
            print(f"re-scored {mode}: {right}/{total} right")
    return 1 if check.problems else 0


if __name__ == "__main__":
    sys.exit(main())
