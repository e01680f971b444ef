#!/usr/bin/env bash
# scripts/bench-report.py end to end: the page is self-contained, and headless
# Chromium draws its three plots (checked on a screenshot by png_regions.py).
# Without Chromium the test is skipped (77), except under CI=true, where a
# missing tool fails it. Usage: bench_report_test.sh KVG REPO
set -u
kvg=$1
repo=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$chrome" ]; then
  [ "${CI:-}" = true ] && fail "no chromium (scripts/install-deps.sh --tests installs it)"
  echo "skipped: no chromium (scripts/install-deps.sh --tests installs it)"
  exit 77
fi
command -v python3 >/dev/null || fail "no python3"

# Two small synthetic models, so the test needs no downloaded data.
"$kvg" synth --out "$tmp/a.gguf" --n-embd 64 --n-layer 2 --vocab 300 --seed 1 >/dev/null || fail "synth a"
"$kvg" synth --out "$tmp/b.gguf" --n-embd 64 --n-layer 2 --vocab 300 --type q8_0 --seed 2 >/dev/null || fail "synth b"
python3 "$repo/scripts/bench-report.py" --kvg "$kvg" --model "$tmp/a.gguf" --model "$tmp/b.gguf" \
  --lengths 16,32,64 --prompt-tokens 32 --gen-tokens 16 --out "$tmp/report.html" >/dev/null || fail "bench-report.py"

# Self-contained: no script, nothing fetched (src/href/url/@import).
grep -qiE '<script|src=|href=|url\(|@import' "$tmp/report.html" && fail "the page refers to something outside itself"
[ "$(grep -c '<svg' "$tmp/report.html")" = 3 ] || fail "the page does not have three inline SVG plots"

# HOME: Chromium writes its profile there; --no-sandbox: it refuses root otherwise.
HOME=$tmp timeout 120 "$chrome" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=940,1400 \
  --screenshot="$tmp/shot.png" "file://$tmp/report.html" >"$tmp/chrome.log" 2>&1
[ -s "$tmp/shot.png" ] || { cat "$tmp/chrome.log"; fail "chromium wrote no screenshot"; }
# The plots (the layout bench-report.py fixes), then an empty strip below them,
# which must read as blank: the check can tell the difference.
python3 "$here/png_regions.py" "$tmp/shot.png" 20,90,900,400 20,520,900,400 20,950,900,400 || fail "a plot is blank"
python3 "$here/png_regions.py" --blank "$tmp/shot.png" 20,1360,900,30 || fail "the blank strip is not blank"
echo "bench report: ok"
