#!/usr/bin/env bash
# End-to-end checks of the `kvg` command's names, flags, outputs and exit
# statuses (other tools rely on them). Usage: cli_test.sh KVG DATA_DIR
# (DATA_DIR: tests/data, or $KVG_TEST_DATA when set). Exits 77 (ctest:
# skipped) when the models are missing, or 1 under CI=true.
set -u
kvg=$1
data=${KVG_TEST_DATA:-$2}
model=$data/models/stories260K.gguf
q8=$data/models/TinyStories-656K-Q8_0.gguf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check_lib.sh"

# Help: `kvg help`, `kvg help C` and `kvg C --help|-h` for every command; an
# unknown command lists the commands and exits 2. (No model needed.)
commands=$("$kvg" help | awk '/^  [a-z]/ { print $1 }')
check "help lists the commands" bash -c '[ "$(echo $1 | wc -w)" -ge 11 ] && echo "$1" | grep -qx bench-graft' _ "$commands"
for c in $commands; do
  check "$c --help prints its usage and flags, exit 0" bash -c "
    '$kvg' $c --help >'$tmp/h1' && grep -q '^usage: kvg $c' '$tmp/h1' &&
    ! awk '/^flags:/ { f = 1; next } f && !/^  (-[a-z], )?--[a-z0-9-]+( [^ ]+)?  +[^ ]/' '$tmp/h1' | grep -q ." 
  check "help $c and $c -h say the same as $c --help" bash -c "
    '$kvg' help $c | cmp -s - '$tmp/h1' && '$kvg' $c -h | cmp -s - '$tmp/h1'"
done
check "--help after other flags still helps" bash -c "'$kvg' capture --model x --help | grep -q -- '--parent HASH'"
check "generate --help lists -n and --top-p" bash -c "'$kvg' generate --help | grep -q -- '-n, --n N' && '$kvg' generate --help | grep -q -- '--top-p P'"
check "an unknown command exits 2 and lists the commands" bash -c "
  '$kvg' frobnicate 2>'$tmp/e'; [ \$? = 2 ] && grep -q \"unknown command 'frobnicate'\" '$tmp/e' && grep -q '^  bench-graft ' '$tmp/e'"
check "help of an unknown command exits 2" bash -c "'$kvg' help frobnicate 2>/dev/null; [ \$? = 2 ]"
check "kvg alone prints the list and exits 2" bash -c "'$kvg' 2>&1 | grep -q '^  capture '; '$kvg' 2>/dev/null; [ \$? = 2 ]"
check "a flag of another command is refused" fails "$kvg" tokenize --model x --text a --chunk 3

need_files "$model" "$q8"

check "info names the model" bash -c "'$kvg' info --model '$model' | grep -q 'fingerprint     270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d'"
check "info --json is one object" bash -c "'$kvg' info --model '$q8' --json | grep -q '\"kv_heads\":4,\"head_dim\":16'"
check "tokenize prints ids on one line" bash -c "[ \"\$('$kvg' tokenize --model '$model' --text 'Once upon a time')\" = '403 407 261 378' ]"
check "tokenize --bos prepends 1" bash -c "[ \"\$('$kvg' tokenize --model '$model' --text 'Once upon a time' --bos)\" = '1 403 407 261 378' ]"
# Tokenizing reads only the vocabulary: GPT-2's file names an architecture
# (gpt2) the engine cannot run, and still tokenizes.
gpt2_vocab=$data/tokenizer-vectors/ggml-vocab-gpt-2.gguf
check "tokenize works on a vocabulary-only file of any architecture" \
  bash -c "[ \"\$('$kvg' tokenize --model '$gpt2_vocab' --text 'Hello world')\" = '15496 995' ]"
check "tokenize --special matches control tokens, and only then" bash -c "
  [ \"\$('$kvg' tokenize --model '$gpt2_vocab' --text 'a<|endoftext|>' --special)\" = '64 50256' ] &&
  [ \"\$('$kvg' tokenize --model '$gpt2_vocab' --text 'a<|endoftext|>')\" != '64 50256' ]"
check "tokenize --bench reports tokens/s" bash -c "'$kvg' tokenize --model '$gpt2_vocab' --text 'Hello world' --bench | grep -q 'tokens/s'"

tokens=1,403,407,261,378,432,383,286,261,376,298,315,421,395,317,426,338,401,396,267,337
h1=$("$kvg" logits --model "$model" --tokens $tokens --out "$tmp/a.bin")
h7=$("$kvg" logits --model "$model" --tokens $tokens --out "$tmp/b.bin" --chunk 7 --threads 1 --isa scalar)
h3=$("$kvg" logits -m "$model" --tokens $tokens --out "$tmp/c.bin" -t 3)
check "logits hash equals across chunk, threads (default: the cores, 1, 3) and isa" bash -c '[ -n "$1" ] && [ "$1" = "$2" ] && [ "$1" = "$3" ]' _ "$h1" "$h7" "$h3"
check "logits file is positions x vocab fp32" test "$(stat -c %s "$tmp/a.bin")" = $((21 * 512 * 4))
check "logits prints the file's sha256" test "$h1" = "$(sha256sum "$tmp/a.bin" | cut -d' ' -f1)"

check "generate greedy reproduces the reference" bash -c "'$kvg' generate --model '$model' --tokens 1 -n 16 | grep -q 'Once upon a time, there was a little girl named Lily'"
sampled() { "$kvg" generate --model "$model" --text 'Once' -n 8 --seed 5 --temperature 0.8 --top-k 40 --top-p 0.9 --json "$@" | grep -o '"tokens":\[[0-9,]*\]'; }
check "generate --json is seeded-reproducible across chunking" bash -c "[ -n \"\$1\" ] && [ \"\$1\" = \"\$2\" ]" _ "$(sampled)" "$(sampled --chunk 1)"

# Chat (docs/chat.md): a synthetic ChatML model, whose <|im_start|> is 298 and <|im_end|> 299.
"$kvg" synth --out "$tmp/chat.gguf" --chat-template chatml --vocab 300 --n-embd 32 --n-layer 1 --n-head 2 --n-ctx 512 >/dev/null
check "chat lays out ChatML with the markers as tokens" bash -c "
  '$kvg' chat --model '$tmp/chat.gguf' --system 'Be brief.' --user Hi -n 4 --json | grep -q '^{\"format\":\"chatml\",\"prompt_tokens\":\[1,298,'"
check "generate --chat asks the same prompt as chat" bash -c "[ \"\$('$kvg' chat --model '$tmp/chat.gguf' --user Hi -n 4 --json | grep -o '\"tokens\":\[[0-9,]*\]')\" = \
  \"\$('$kvg' generate --chat --model '$tmp/chat.gguf' --text Hi -n 4 --json | grep -o '\"tokens\":\[[0-9,]*\]')\" ]"
check "chat --messages takes the JSON conversation" bash -c "
  '$kvg' chat --model '$tmp/chat.gguf' -n 2 --json --messages '[{\"role\":\"user\",\"content\":\"Hi\"}]' | grep -q '\"prompt_tokens\":\[1,298,'"
check "chat refuses a member it would ignore" fails "$kvg" chat --model "$tmp/chat.gguf" --messages '[{"role":"user","content":"x","name":"n"}]'
check "chat refuses a system message where the format has none" fails "$kvg" chat --model "$tmp/chat.gguf" --format gemma --system s --user u
check "chat on a model without a template is plain" bash -c "'$kvg' chat --model '$model' --user Hi -n 2 --json | grep -q '\"format\":\"plain\"'"

art=$("$kvg" capture --model "$model" --tokens 1,403,407,261,378,432 --out "$tmp/a.kvga" 2>/dev/null | tail -1)
check "capture prints the artifact's sha256 last" test "$art" = "$(sha256sum "$tmp/a.kvga" | cut -d' ' -f1)"
check "verify prints the header" bash -c "'$kvg' verify '$tmp/a.kvga' | grep -q '\"n_tokens\": 6'"
store=$tmp/store
root=$("$kvg" capture --model "$model" --text "Once upon a time" --store "$store" 2>/dev/null | tail -1)
link=$("$kvg" capture --model "$model" --text ", there was a little girl" --parent "$root" --store "$store" 2>/dev/null | tail -1)
check "graft-check of a chain is exact (exit 0)" bash -c "'$kvg' graft-check --model '$model' --artifact $link --store '$store' --text ' named Lily.' --samples 5 | grep -q '\"exact\":true'"
check "graft logits equal monolithic logits" bash -c "
  full=\$('$kvg' logits --model '$model' --tokens $tokens --out '$tmp/full.bin') &&
  part=\$('$kvg' logits --model '$model' --tokens $tokens --artifact '$tmp/a.kvga' --out '$tmp/part.bin') &&
  tail -c $(((21 - 6) * 512 * 4)) '$tmp/full.bin' | cmp - '$tmp/part.bin'"
check "generate after a graft" bash -c "'$kvg' generate --model '$model' --artifact $link --store '$store' --text ' named' -n 4 --json | grep -q '\"grafted_tokens\":'"
# Counted as SQL counts them (docs/sql.md): a prompt the artifact covers entirely is n - 1
# grafted and 1 prefilled (the last prompt token is computed again for its logits).
check "generate --json counts grafted + prefilled = the prompt, the last token prefilled" bash -c "'$kvg' generate --model '$model' --artifact $link --store '$store' --text '' -n 2 --json | python3 -c 'import json, sys; r = json.load(sys.stdin); n = len(r[\"prompt_tokens\"]); sys.exit(not (r[\"grafted_tokens\"] == n - 1 and r[\"prefilled_tokens\"] == 1))'"
# Compact KV storages (docs/recipe.md): smaller artifacts, still exact under their own recipe, refused by another.
for kv in bf16 i8; do
  croot=$("$kvg" capture --model "$model" --recipe f32-portable-v1+kv-$kv --text "Once upon a time" --store "$store" 2>/dev/null | tail -1)
  check "capture under +kv-$kv records its dtype and recipe" bash -c "'$kvg' verify '$store/${croot:0:2}/$croot.kvga' | grep -q '\"kv_dtype\": \"$kv\"' &&
    '$kvg' verify '$store/${croot:0:2}/$croot.kvga' | grep -q '\"recipe\": \"f32-portable-v1+kv-$kv\"'"
  check "graft-check under +kv-$kv is exact" bash -c "'$kvg' graft-check --model '$model' --recipe f32-portable-v1+kv-$kv --artifact $croot --store '$store' --text ', there was a girl' --samples 3 | grep -q '\"exact\":true'"
  check "a +kv-$kv artifact is refused under f32-portable-v1" bash -c "'$kvg' graft-check --model '$model' --artifact $croot --store '$store' --text ' x' 2>&1 | grep -q \"recipe 'f32-portable-v1+kv-$kv', this session computes 'f32-portable-v1'\""
done
# Positional composition (docs/composition.md): explicit, and never called exact.
blk=$("$kvg" capture --model "$model" --text "Tom had a blue kite." --store "$store" 2>/dev/null | tail -1)
check "generate --compose-positional says it is not exact" bash -c "'$kvg' generate --model '$model' --compose-positional $root,$blk --store '$store' --text ' Tom' -n 4 --json 2>'$tmp/pos.err' | grep -q '\"exact\":false' && grep -q 'NOT exact' '$tmp/pos.err'"
check "generate without it says exact" bash -c "'$kvg' generate --model '$model' --tokens 1 -n 2 --json | grep -q '\"exact\":true'"
check "--compose-positional refuses one block" bash -c "'$kvg' generate --model '$model' --compose-positional $root --store '$store' --text ' x' -n 1 2>&1 | grep -q 'at least 2 blocks'"
check "--compose-positional refuses a block of another model" bash -c "'$kvg' generate --model '$q8' --compose-positional $root,$blk --store '$store' --text ' x' -n 1 2>&1 | grep -q 'model mismatch'"
check "--compose-positional refuses a composition beyond the window" bash -c "'$kvg' generate --model '$model' --max-context 8 --compose-positional $root,$blk --store '$store' --text ' x' -n 1 2>&1 | grep -q 'more than the window of 8 positions'"
check "--compose-positional and --artifact together are refused" bash -c "'$kvg' generate --model '$model' --artifact $root --compose-positional $root,$blk --store '$store' --text ' x' -n 1 2>&1 | grep -q 'not both'"
check "bench-compose prints both tables" bash -c "'$kvg' bench-compose --model '$q8' --blocks 2 --questions 2 | grep -q 'saving' && '$kvg' bench-compose --model '$q8' --blocks 2 --questions 1 | grep -q 'first composition vs reused'"
# Mapped KV (docs/long-context.md): stories260K stores 1,280 bytes per position; a budget of 100
# positions refuses the resident 120-token context, the mapped one runs with the same logits.
check "bench-mapped runs a context beyond --max-kv-memory mapped, exactly" bash -c "'$kvg' bench-mapped --model '$model' --lengths 40,120 --decode 4 --max-kv-memory 128000 >'$tmp/mapped.txt' && grep -q '^ *120 .*refused.* yes\$' '$tmp/mapped.txt' && grep -q '^ *40 .* yes\$' '$tmp/mapped.txt'"

cp "$tmp/a.kvga" "$tmp/bad.kvga"
printf '\x01' | dd of="$tmp/bad.kvga" bs=1 seek=400 conv=notrunc 2>/dev/null
check "verify refuses a flipped byte" fails "$kvg" verify "$tmp/bad.kvga"
head -c 100 "$tmp/a.kvga" >"$tmp/short.kvga"
check "verify refuses a truncated file" fails "$kvg" verify "$tmp/short.kvga"
check "graft refuses a diverging prompt" bash -c "'$kvg' logits --model '$model' --tokens 1,403,407,261,378,400,5 --artifact '$tmp/a.kvga' --out '$tmp/x' 2>&1 | grep -q 'position 5: the artifact has token 432, the prompt has 400'"
check "graft refuses another model" bash -c "'$kvg' logits --model '$q8' --tokens 1,403,407,261,378,432,5 --artifact '$tmp/a.kvga' --out '$tmp/x' 2>&1 | grep -q 'model mismatch'"
stored=$(ls "$store"/*/"$root".kvga)
cp "$stored" "$tmp/root.bak"
printf '\x02' | dd of="$stored" bs=1 seek=300 conv=notrunc 2>/dev/null
check "graft refuses a damaged artifact in the store" bash -c "'$kvg' graft-check --model '$model' --artifact $link --store '$store' --text ' x' 2>&1 | grep -qE 'corrupt|hash'"
cp "$tmp/root.bak" "$stored"
check "missing parent names the store" bash -c "'$kvg' graft-check --model '$model' --artifact $link --store '$tmp/empty' --text ' x' 2>&1 | grep -q 'not found'"
# Runs where there is a GPU; elsewhere (or without CUDA kernels) fails and says why.
check "--device cuda fails clearly without a GPU (or CUDA build)" bash -c "
  if out=\$('$kvg' generate --model '$model' --tokens 1 -n 2 --device cuda 2>&1); then nvidia-smi -L >/dev/null 2>&1
  else grep -qiE 'cuda|gpu' <<<\"\$out\"; fi"
check "--device auto falls back to the CPU" bash -c "'$kvg' generate --model '$model' --tokens 1 -n 16 --device auto | grep -q 'Once upon a time'"
# info --device reports where an engine command with that --device really runs.
if "$kvg" generate --model "$model" --tokens 1 -n 2 --device cuda >/dev/null 2>&1; then cuda_runs='"cuda"'; else cuda_runs=null; fi
check "info --device cuda reports what generate --device cuda does" bash -c "'$kvg' info --model '$model' --device cuda --json | grep -q '\"device\":$cuda_runs,'"
check "info --device cpu reports cpu" bash -c "'$kvg' info --model '$model' --device cpu | grep -qx 'device          cpu'"
check "info --device auto never reports none" bash -c "'$kvg' info --model '$model' --device auto --json | grep -qE '\"device\":\"(cpu|cuda)\"'"
check "unknown flag is an error" fails "$kvg" info --model "$model" --bogus 1
check "malformed model is an error" bash -c "head -c 1000 '$model' > '$tmp/cut.gguf'; '$kvg' info --model '$tmp/cut.gguf' 2>&1 | grep -q 'GGUF'"
check "synth writes a loadable model" bash -c "'$kvg' synth --out '$tmp/s.gguf' --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 128 --vocab 300 --type q8_0 --seed 1 && '$kvg' info --model '$tmp/s.gguf' --json | grep -q '\"layers\":2'"
for arch in llama qwen3 phi3 gemma gemma2 gemma3 starcoder2; do
  check "synth --arch $arch writes a model that loads and generates" bash -c "
    '$kvg' synth --out '$tmp/a-$arch.gguf' --arch $arch --n-embd 64 --n-layer 2 --n-head 4 --n-head-kv 2 --n-ff 128 --vocab 300 >/dev/null &&
    '$kvg' info --model '$tmp/a-$arch.gguf' --json | grep -q '\"architecture\":\"$arch\"' &&
    '$kvg' generate --model '$tmp/a-$arch.gguf' --tokens 1,5,9,200,7 -n 4 >/dev/null"
done
check "synth --llama3-rope writes rope_freqs.weight" bash -c "'$kvg' synth --out '$tmp/l3.gguf' --llama3-rope --vocab 300 >/dev/null && '$kvg' info --model '$tmp/l3.gguf' | grep -q 'Llama 3.1 frequency factors'"
check "synth refuses an architecture it does not write" fails "$kvg" synth --out "$tmp/x.gguf" --arch falcon
check "bench prints a table" bash -c "'$kvg' bench --model '$model' --prompt-tokens 16 --gen-tokens 4 --skip-memory | grep -q '^| f32-portable-v1 | '"

check "an unknown --recipe is refused (2) naming the recipes" bash -c "
  '$kvg' generate --model '$model' --text 'Once' -n 2 --recipe f32-fast 2>'$tmp/e'; [ \$? = 2 ] && grep -q \"unknown recipe 'f32-fast'\" '$tmp/e' && grep -q 'q8-portable-v1' '$tmp/e'"
check "--recipe is one name outside bench" bash -c "
  '$kvg' generate --model '$model' --text 'Once' -n 2 --recipe f32-portable-v1,f32-portable-v1 2>'$tmp/e'; [ \$? = 2 ] && grep -q 'one recipe here' '$tmp/e'"
check "info reports the recipe asked for" bash -c "'$kvg' info --model '$model' --json --recipe f32-portable-v1 | grep -q '\"recipe\":\"f32-portable-v1\"'"

check "bench-store without a server fails as an environment error (3)" bash -c "
  '$kvg' bench-store --db 'host=$tmp/no-server connect_timeout=2' --sizes 1 2>'$tmp/e'; [ \$? = 3 ] && grep -q 'cannot connect' '$tmp/e'"
check "bench-store refuses sizes a bytea cannot hold" bash -c "'$kvg' bench-store --sizes 1,1024 2>&1 | grep -q 'MiB counts in 1..1000'"
check "bench --json is one object with both phases" bash -c "'$kvg' bench --model '$model' --prompt-tokens 16 --gen-tokens 4 -r 2 --skip-memory --json |
  python3 -c 'import json,sys; r = json.load(sys.stdin)[\"recipes\"][0]; assert r[\"prefill\"][\"tokens\"] == 16 and r[\"decode\"][\"tokens_per_s\"] > 0 and len(r[\"decode\"][\"seconds\"]) == 2'"
check "bench-graft --json has a row per length and the store I/O" bash -c "'$kvg' bench-graft --model '$model' --lengths 8,16 --repeat 1 --json |
  python3 -c 'import json,sys; d = json.load(sys.stdin); assert [r[\"tokens\"] for r in d[\"rows\"]] == [8, 16] and d[\"all_exact\"] and d[\"store_io\"][\"file_read_mbps\"] > 0'"
# Progress lines: on a terminal (script(1) gives a pseudo-terminal), none otherwise.
check "synth prints nothing on stderr when it is not a terminal" bash -c "
  '$kvg' synth --out '$tmp/p.gguf' --n-embd 64 --n-layer 2 --vocab 300 2>'$tmp/e' >/dev/null && [ ! -s '$tmp/e' ]"
check "capture prints no progress when stderr is not a terminal" bash -c "
  '$kvg' capture --model '$model' --tokens $tokens --out '$tmp/p.kvga' 2>'$tmp/e' >/dev/null && ! grep -q 'tokens/s' '$tmp/e'"
# Output that is not UTF-8 (temperature 5, seed 2 emits lone continuation
# bytes): --json stays valid JSON, text has U+FFFD, bytes_hex the raw bytes
# and decodes to the text by the documented rule; streamed text is valid UTF-8.
check "generate --json is valid JSON when the model emits invalid UTF-8" bash -c "
  '$kvg' generate --model '$model' --text 'Once upon a time' -n 32 --temperature 5 --seed 2 --json |
  python3 -c 'import json,sys; d = json.loads(sys.stdin.buffer.read().decode(\"utf-8\")); b = bytes.fromhex(d[\"bytes_hex\"])
exec(\"try: b.decode(\\\"utf-8\\\")\\nexcept UnicodeDecodeError: pass\\nelse: raise SystemExit(\\\"the bytes were valid\\\")\")
assert d[\"text\"] == b.decode(\"utf-8\", \"replace\") and \"\\ufffd\" in d[\"text\"]'"
check "generate streams valid UTF-8 when the model emits invalid bytes" bash -c "
  '$kvg' generate --model '$model' --text 'Once upon a time' -n 32 --temperature 5 --seed 2 >'$tmp/g' &&
  iconv -f UTF-8 -t UTF-8 '$tmp/g' >/dev/null && grep -q \$'\\xef\\xbf\\xbd' '$tmp/g'"
check "--max-kv-memory refuses a context beyond it with the bytes it needs" bash -c "
  '$kvg' generate --model '$model' --text 'Once upon a time' -n 32 --max-kv-memory 10000 >/dev/null 2>'$tmp/e'; [ \$? -ne 0 ] &&
  grep -q 'needs 10240 bytes of KV cache (1280 per position), above --max-kv-memory = 10000 bytes' '$tmp/e'"
check "--max-kv-memory lets a context within it run" bash -c "
  '$kvg' generate --model '$model' --text 'Once upon a time' -n 2 --max-kv-memory 10000 --json | grep -q '\"tokens\":\[[0-9]*,[0-9]*\]'"

if command -v script >/dev/null; then
  on_tty() { script -qefc "$1" /dev/null; }
  check "bench on a terminal shows a decode progress line" bash -c "
    $(declare -f on_tty); on_tty \"'$kvg' bench --model '$model' --prompt-tokens 16 --gen-tokens 64 -r 2 --skip-memory\" | grep -a -q 'bench: run 2/2: decode: [0-9]*/64 tokens'"
  check "capture on a terminal shows prefill progress" bash -c "
    $(declare -f on_tty); on_tty \"'$kvg' capture --model '$model' --tokens $tokens --out '$tmp/p.kvga'\" | grep -a -q 'capture: prefill: 21/21 tokens (100%)'"
  check "synth on a terminal shows MB progress" bash -c "
    $(declare -f on_tty); on_tty \"'$kvg' synth --out '$tmp/p.gguf' --n-embd 64 --n-layer 2 --vocab 300\" | grep -a -q 'synth: [0-9.]*/[0-9.]* MB'"
  check "bench-graft on a terminal shows progress" bash -c "
    $(declare -f on_tty); on_tty \"'$kvg' bench-graft --model '$model' --lengths 8,16 --repeat 1\" | grep -a -q 'bench-graft: 50/50 tokens (100%)'"
elif [ "${CI:-}" = true ]; then
  check "script(1) is installed (util-linux) for the terminal checks" false
fi
finish cli
