#!/usr/bin/env bash
# `kvg template` end to end: a model's knowledge template shown and set on a
# copy (every other pair and every tensor as the input has them, the input's
# alignment kept, the math unchanged), the refused cases, a malformed key
# refused at load, and `kvg eval` saying which template it used and where it
# came from. Usage: template_test.sh KVG DATA_DIR. Exits 77 (ctest: skipped)
# when a model is missing, or 1 under CI=true.
set -u
kvg=$1
data=${KVG_TEST_DATA:-$2}
story=$data/models/stories260K.gguf
reader=$data/models/digit-rule-reader.gguf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check_lib.sh"
need_files "$story" "$reader"

# A GGUF reader of our own (Python's standard library only), so the copy is
# checked against the input without kvg's reader.
cat >"$tmp/gguf.py" <<'PY'
import struct, sys
SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
BLOCKS = {0: (1, 4), 1: (1, 2), 8: (32, 34), 30: (1, 2)}  # f32, f16, q8_0, bf16

def parse(path):
    b = open(path, "rb").read()
    version, n_tensors, n_kv = struct.unpack_from("<IQQ", b, 4)
    p = 24
    def string(p):
        n, = struct.unpack_from("<Q", b, p)
        return b[p + 8:p + 8 + n], p + 8 + n
    kvs = []
    for _ in range(n_kv):
        key, p = string(p)
        t, = struct.unpack_from("<I", b, p)
        p += 4
        start = p
        if t == 8:
            _, p = string(p)
        elif t == 9:
            et, n = struct.unpack_from("<IQ", b, p)
            p += 12
            if et == 8:
                for _ in range(n):
                    _, p = string(p)
            else:
                p += n * SIZES[et]
        else:
            p += SIZES[t]
        kvs.append((key.decode(), t, b[start:p]))
    align = 32
    for k, t, v in kvs:
        if k == "general.alignment":
            align, = struct.unpack_from("<I", v)
    infos = []
    for _ in range(n_tensors):
        name, p = string(p)
        nd, = struct.unpack_from("<I", b, p)
        ne = struct.unpack_from("<%dQ" % nd, b, p + 4)
        t, off = struct.unpack_from("<IQ", b, p + 4 + 8 * nd)
        p += 4 + 8 * nd + 12
        infos.append((name.decode(), ne, t, off))
    data = (p + align - 1) // align * align
    tensors = []
    for name, ne, t, off in infos:
        n = 1
        for d in ne:
            n *= d
        el, by = BLOCKS[t]
        tensors.append((name, ne, t, off, b[data + off:data + off + n // el * by]))
    return dict(version=version, kvs=kvs, align=align, data=data, tensors=tensors, size=len(b))

def string_kv(key, text):
    raw = text.encode()
    return (key, 8, struct.pack("<Q", len(raw)) + raw)

def write(path, version, kvs, tensors, align):
    out = bytearray(b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)))
    for k, t, v in kvs:
        out += struct.pack("<Q", len(k)) + k.encode() + struct.pack("<I", t) + v
    off = 0
    for name, ne, t, _, blob in tensors:
        out += struct.pack("<Q", len(name)) + name.encode() + struct.pack("<I", len(ne))
        out += struct.pack("<%dQ" % len(ne), *ne) + struct.pack("<IQ", t, off)
        off += (len(blob) + align - 1) // align * align
    out += b"\0" * (-len(out) % align)
    for *_, blob in tensors:
        out += blob + b"\0" * (-len(blob) % align)
    open(path, "wb").write(out)

cmd = sys.argv[1]
if cmd == "same-but-key":  # ORIGINAL COPY TEMPLATE: the copy is the original plus/with the key
    a, c = parse(sys.argv[2]), parse(sys.argv[3])
    want = [kv for kv in a["kvs"] if kv[0] != "kvg.knowledge_template"]
    key = string_kv("kvg.knowledge_template", sys.argv[4])
    if len(want) == len(a["kvs"]):
        want.append(key)
    else:
        want = [key if kv[0] == "kvg.knowledge_template" else kv for kv in a["kvs"]]
    ok = c["version"] == a["version"] and c["kvs"] == want and c["align"] == a["align"] and c["data"] % c["align"] == 0
    ok = ok and [t[:3] + t[4:] for t in c["tensors"]] == [t[:3] + t[4:] for t in a["tensors"]]
    ok = ok and all(t[3] % c["align"] == 0 for t in c["tensors"])
    sys.exit(0 if ok else 1)
if cmd == "same-bytes-as-trainer":  # ORIGINAL COPY TEMPLATE: what gguf_writer.py writes with the key last
    a = parse(sys.argv[2])
    write(sys.argv[3] + ".py", a["version"], a["kvs"] + [string_kv("kvg.knowledge_template", sys.argv[4])],
          a["tensors"], a["align"])
    sys.exit(0 if open(sys.argv[3] + ".py", "rb").read() == open(sys.argv[3], "rb").read() else 1)
if cmd == "realign":  # IN OUT ALIGNMENT: the same model with general.alignment = ALIGNMENT
    a = parse(sys.argv[2])
    align = int(sys.argv[4])
    kvs = a["kvs"] + [("general.alignment", 4, struct.pack("<I", align))]
    write(sys.argv[3], a["version"], kvs, a["tensors"], align)
    sys.exit(0)
if cmd == "corrupt-key":  # FILE OLD NEW: the key's text replaced in place (same length)
    b = bytearray(open(sys.argv[2], "rb").read())
    old, new = sys.argv[3].encode(), sys.argv[4].encode()
    assert len(old) == len(new) and b.count(old) == 1
    open(sys.argv[2], "wb").write(b.replace(old, new))
    sys.exit(0)
sys.exit(2)
PY
gguf() { python3 "$tmp/gguf.py" "$@"; }
layout=$'{solution}\n{question}'
gen() {  # gen MODEL: greedy text and tokens as JSON
  "$kvg" generate --model "$1" --text 'Once upon a time' -n 24 --no-perf --json
}

# Show.
check "a model without the key: says so, exit 0" bash -c "
  '$kvg' template --model '$story' >'$tmp/o' && grep -q 'no kvg.knowledge_template' '$tmp/o'"
check "the reader carries its layout (the one it was trained on)" bash -c "
  [ \"\$('$kvg' template -m '$reader')\" = 'kvg.knowledge_template = \"{solution}\\n{question}\"' ]"

# Set on a copy: escapes on the command line, or the text itself.
check "--set writes a copy and prints the key" bash -c "
  '$kvg' template --model '$story' --set '{solution}\\n{question}' --out '$tmp/s1.gguf' >'$tmp/o' &&
  grep -qF 'kvg.knowledge_template = \"{solution}\\n{question}\"' '$tmp/o'"
check "the copy shows its template" bash -c "
  [ \"\$('$kvg' template --model '$tmp/s1.gguf')\" = 'kvg.knowledge_template = \"{solution}\\n{question}\"' ]"
check "the copy: every other pair and every tensor as the input has them, the key last" \
  gguf same-but-key "$story" "$tmp/s1.gguf" "$layout"
check "the copy is the bytes the reader's trainer writes with the key last" \
  gguf same-bytes-as-trainer "$story" "$tmp/s1.gguf" "$layout"
check "a real newline in --set is the same template" bash -c "
  '$kvg' template --model '$story' --set \"\$(printf '{solution}\\n{question}')\" --out '$tmp/s1b.gguf' >/dev/null &&
  cmp -s '$tmp/s1.gguf' '$tmp/s1b.gguf'"
check "the copy generates exactly what the original does (the key does not change the math)" bash -c "
  gen() { '$kvg' generate --model \"\$1\" --text 'Once upon a time' -n 24 --no-perf --json | python3 -c 'import json, sys; d = json.load(sys.stdin); print(d[\"tokens\"], d[\"text\"])'; }
  a=\$(gen '$story') && b=\$(gen '$tmp/s1.gguf') && [ -n \"\$a\" ] && [ \"\$a\" = \"\$b\" ]"
check "the copy's logits are the original's bytes" bash -c "
  a=\$('$kvg' logits --model '$story' --tokens 1,403,407,261,378 --out '$tmp/l1') &&
  b=\$('$kvg' logits --model '$tmp/s1.gguf' --tokens 1,403,407,261,378 --out '$tmp/l2') && cmp -s '$tmp/l1' '$tmp/l2'"
check "setting it again replaces the key where it was" bash -c "
  '$kvg' template --model '$tmp/s1.gguf' --set 'Facts: {solution}\\tQ: {question} A:' --out '$tmp/s2.gguf' >/dev/null &&
  python3 '$tmp/gguf.py' same-but-key '$tmp/s1.gguf' '$tmp/s2.gguf' \"\$(printf 'Facts: {solution}\\tQ: {question} A:')\" &&
  [ \"\$('$kvg' template --model '$tmp/s2.gguf')\" = 'kvg.knowledge_template = \"Facts: {solution}\\tQ: {question} A:\"' ]"
check "a quantized model's copy (q8_0) keeps its tensors too" bash -c "
  '$kvg' synth --out '$tmp/q.gguf' --type q8_0 --n-embd 64 --n-layer 1 --vocab 300 --n-ctx 64 >/dev/null &&
  '$kvg' template --model '$tmp/q.gguf' --set '{solution} {question}' --out '$tmp/q2.gguf' >/dev/null &&
  python3 '$tmp/gguf.py' same-but-key '$tmp/q.gguf' '$tmp/q2.gguf' '{solution} {question}'"
check "the input's general.alignment (64) is kept for the tensor data" bash -c "
  python3 '$tmp/gguf.py' realign '$story' '$tmp/a64.gguf' 64 &&
  '$kvg' template --model '$tmp/a64.gguf' --set '{solution} {question}' --out '$tmp/a64b.gguf' >/dev/null &&
  python3 '$tmp/gguf.py' same-but-key '$tmp/a64.gguf' '$tmp/a64b.gguf' '{solution} {question}' &&
  '$kvg' logits --model '$tmp/a64b.gguf' --tokens 1,403,407,261,378 --out '$tmp/l3' >/dev/null && cmp -s '$tmp/l1' '$tmp/l3'"

# Refused: nothing is written.
refused() {  # refused WANT ARGS...: exit 2, WANT on stderr
  local want=$1
  shift
  "$kvg" template "$@" >"$tmp/r.out" 2>"$tmp/r.err"
  local rc=$?
  [ $rc = 2 ] && grep -qF -- "$want" "$tmp/r.err"
}
cp "$story" "$tmp/in.gguf"
check "--out the input itself is refused" refused "--out is the input model" --model "$tmp/in.gguf" --set "$layout" --out "$tmp/in.gguf"
check "--out the input by another spelling is refused" refused "--out is the input model" --model "$tmp/in.gguf" --set "$layout" --out "$tmp/./in.gguf"
ln -s "$tmp/in.gguf" "$tmp/link.gguf"
check "--out a link to the input is refused" refused "--out is the input model" --model "$tmp/in.gguf" --set "$layout" --out "$tmp/link.gguf"
check "the input is untouched" cmp -s "$story" "$tmp/in.gguf"
check "a template with the question first is refused" refused "must put {solution} before {question}" --model "$story" --set '{question} {solution}' --out "$tmp/x.gguf"
check "a template without {question} is refused" refused "must contain {question}" --model "$story" --set '{solution}' --out "$tmp/x.gguf"
check "an unknown escape is refused" refused "is not an escape" --model "$story" --set '{solution}\q{question}' --out "$tmp/x.gguf"
check "--set without --out is refused" refused "--set needs --out" --model "$story" --set "$layout"
check "--out without --set is refused" refused "--out needs --set" --model "$story" --out "$tmp/x.gguf"
check "nothing was written by a refused command" bash -c "[ ! -e '$tmp/x.gguf' ]"
check "a file that is not GGUF is refused" bash -c "echo hello >'$tmp/t.txt'; ! '$kvg' template --model '$tmp/t.txt' 2>/dev/null"

# A malformed key (written by another tool) is refused at load, by name.
cp "$tmp/s1.gguf" "$tmp/bad.gguf"
gguf corrupt-key "$tmp/bad.gguf" "{solution}" "{solutiom}"
check "a malformed key: the model is refused at load, naming the key" bash -c "
  ! '$kvg' generate --model '$tmp/bad.gguf' --text a -n 1 2>'$tmp/e' && grep -q \"kvg.knowledge_template' is not a knowledge template\" '$tmp/e'"
check "a malformed key: kvg template shows it and exits 1" bash -c "
  '$kvg' template --model '$tmp/bad.gguf' >'$tmp/o'; [ \$? = 1 ] && grep -q 'not a knowledge template' '$tmp/o'"

# kvg eval: which template, and where it came from.
cat >"$tmp/q.jsonl" <<'JSONL'
{"question": "Lily had a", "answer": "red", "solution": "Lily had a red ball."}
{"question": "Tom had a", "answer": "blue", "solution": "Tom had a blue kite."}
JSONL
source_of() {  # source_of WANT_SOURCE WANT_TEMPLATE MODEL [FLAGS...]
  local want=$1 text=$2 model=$3
  shift 3
  "$kvg" eval --model "$model" --questions "$tmp/q.jsonl" --learn 1 --max-tokens 2 --check 0 --json "$@" \
    2>/dev/null >"$tmp/e.json" &&
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if (d["template_source"], d["template"]) == (sys.argv[2], sys.argv[3]) else 1)' \
      "$tmp/e.json" "$want" "$text"
}
check "eval without --template on a model without the key: the default" \
  source_of default $'{solution}\nQuestion: {question}\nAnswer:' "$story"
check "eval without --template on a model with the key: the model's" source_of model "$layout" "$tmp/s1.gguf"
check "eval --template wins over the model's" source_of flag '{solution} {question}' "$tmp/s1.gguf" --template '{solution} {question}'
"$kvg" synth --out "$tmp/chat.gguf" --chat-template chatml --vocab 300 --n-embd 32 --n-layer 1 --n-head 2 --n-ctx 512 >/dev/null
check "eval on a chat model without the key: its chat format" bash -c "
  '$kvg' eval --model '$tmp/chat.gguf' --questions '$tmp/q.jsonl' --learn 1 --max-tokens 2 --check 0 --json 2>/dev/null |
    python3 -c 'import json, sys; d = json.load(sys.stdin); sys.exit(0 if d[\"template_source\"] == \"chat format\" and \"<|im_start|>\" in d[\"template\"] else 1)'"
check "eval's table names the template and where it came from" bash -c "
  '$kvg' eval --model '$tmp/s1.gguf' --questions '$tmp/q.jsonl' --learn 1 --max-tokens 2 --check 0 2>/dev/null |
    grep -qxF 'template: \"{solution}\\n{question}\" (from the model)'"

finish template_test
