#!/usr/bin/env bash
# scripts/bench-report.py end to end, on the two vendored models with its
# default settings: the page is self-contained, its header names the machine,
# CPU, kvg's commit, the date and the repetitions, and headless Chromium draws
# the header and its four plots (checked on a screenshot by png_regions.py);
# the PNG output, the pipe from `kvg bench --json`, and kvg's own error in
# place of a traceback. Without Chromium or matplotlib the test is skipped
# (77), except under CI=true, where a missing tool fails it.
# Usage: bench_report_test.sh KVG REPO [SCREENSHOT] (SCREENSHOT: keep the
# screenshot there, to look at).
set -u
kvg=$1
repo=$2
keep=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
data=${KVG_TEST_DATA:-$repo/tests/data}
report=$repo/scripts/bench-report.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
skip() {
  [ "${CI:-}" = true ] && fail "$1 (scripts/install-deps.sh --tests installs it)"
  echo "skipped: $1 (scripts/install-deps.sh --tests installs it)"
  exit 77
}

chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$chrome" ] || skip "no chromium"
command -v python3 >/dev/null || fail "no python3"
# The script finds Debian's matplotlib itself (/usr/bin/python3) when the first python3 lacks it.
python3 -c 'import matplotlib' 2>/dev/null || /usr/bin/python3 -c 'import matplotlib' 2>/dev/null || skip "no matplotlib"
models=("$data/models/stories260K.gguf" "$data/models/TinyStories-656K-Q8_0.gguf")
for m in "${models[@]}"; do
  [ -f "$m" ] || { [ "${CI:-}" = true ] && fail "$m not found"; echo "skipped: $m not found"; exit 77; }
done

# The default settings (lengths 64..1024, clamped to each model's 512 positions).
"$report" --kvg "$kvg" --model "${models[0]}" --model "${models[1]}" --out "$tmp/report.html" \
  --png "$tmp/report.png" >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail "bench-report.py"; }

# Self-contained: no script; every src/href/url() points inside the page.
grep -qi '<script' "$tmp/report.html" && fail "the page has a script"
python3 - "$tmp/report.html" <<'EOF' || fail "the page refers to something outside itself"
import re, sys
page = open(sys.argv[1], encoding="utf-8").read()
refs = re.findall(r'(?:src|href)\s*=\s*["\']([^"\']*)|url\(\s*["\']?([^"\')]*)|@import', page)
outside = [a or b or "@import" for a, b in refs if not (a or b).startswith(("#", "data:"))] if refs else []
sys.exit(f"outside references: {outside[:5]}" if outside else 0)
EOF
[ "$(grep -c '<svg' "$tmp/report.html")" = 4 ] || fail "the page does not have four inline SVG plots"
# Values are labelled: the speed-up's "×" and the bars' ± as text.
grep -q '×</text>' "$tmp/report.html" || grep -q '×' "$tmp/report.html" || fail "no speed-up labels"
grep -q ' ± ' "$tmp/report.html" || fail "no ± labels on the throughput bars"

# The header: machine, CPU, kvg's commit (as kvg --version says), today's date, the repetitions.
commit=$("$kvg" --version | sed -n 's/^commit   //p')
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
header=$(sed -n '/<div id="header">/,/<\/div>/p' "$tmp/report.html")
grep -q "<th>machine</th><td>$(hostname)" <<<"$header" || fail "the header does not name the machine"
[ -z "$cpu" ] || grep -qF "<th>CPU</th><td>$cpu" <<<"$header" || fail "the header does not name the CPU"
grep -qF "commit $commit</td>" <<<"$header" || fail "the header does not name kvg's commit ($commit)"
grep -q "<th>date</th><td>$(date -u +%Y-%m-%d) " <<<"$header" || fail "the header has not today's date"
grep -q "<th>repetitions</th><td>bench: 5 runs per recipe" <<<"$header" || fail "the header does not say 5 runs"
grep -q "every graft gave the recomputed logits bytes exactly" <<<"$header" || fail "the header does not say the grafts were exact"

# HOME: Chromium writes its profile there; --no-sandbox: it refuses root otherwise.
HOME=$tmp timeout 120 "$chrome" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=940,1860 \
  --screenshot="$tmp/shot.png" "file://$tmp/report.html" >"$tmp/chrome.log" 2>&1
[ -s "$tmp/shot.png" ] || { cat "$tmp/chrome.log"; fail "chromium wrote no screenshot"; }
[ -n "$keep" ] && cp "$tmp/shot.png" "$keep"
# The header's text, the four plots (the layout bench-report.py fixes), then
# an empty strip below them, which must read as blank: the check can tell.
python3 "$here/png_regions.py" --text "$tmp/shot.png" 20,10,900,130 || fail "the header is blank"
python3 "$here/png_regions.py" "$tmp/shot.png" 20,150,900,400 20,570,900,400 20,990,900,400 20,1410,900,400 ||
  fail "a plot is blank"
python3 "$here/png_regions.py" --blank "$tmp/shot.png" 20,1825,900,30 || fail "the blank strip is not blank"
# The PNG output: the header and the same four plots in one image.
python3 "$here/png_regions.py" --text "$tmp/report.png" 10,10,800,100 || fail "the PNG's header is blank"

# A pipe from `kvg bench --json`, as the script's usage says: one plot.
"$kvg" bench -m "${models[0]}" -p 16 -n 4 -r 2 --skip-memory --json | "$report" - --out "$tmp/pipe.html" >/dev/null ||
  fail "bench --json | bench-report.py -"
[ "$(grep -c '<svg' "$tmp/pipe.html")" = 1 ] || fail "the piped report does not have its one plot"
grep -q "<th>repetitions</th><td>bench: 2 runs per recipe" "$tmp/pipe.html" || fail "the piped report does not say 2 runs"

# kvg's own error, not a traceback: a model that is not there.
"$report" --kvg "$kvg" --model "$tmp/absent.gguf" --out "$tmp/x.html" >"$tmp/out" 2>"$tmp/err" && fail "an absent model passed"
grep -q 'Traceback' "$tmp/err" && { cat "$tmp/err"; fail "a traceback instead of kvg's error"; }
grep -q "^kvg info: .*absent.gguf" "$tmp/err" || { cat "$tmp/err"; fail "kvg's own error is not shown"; }
# An empty pipe (the command before it failed) says so.
: | "$report" - --out "$tmp/x.html" 2>"$tmp/err" && fail "an empty pipe passed"
grep -q 'standard input is empty' "$tmp/err" || { cat "$tmp/err"; fail "an empty pipe is not named"; }
echo "bench report: ok"
