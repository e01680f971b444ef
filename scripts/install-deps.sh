#!/usr/bin/env bash
# Installs the Debian packages kvgraft builds and tests with, skipping those
# already present (so a warm machine pays nothing). Needs root or sudo.
set -euo pipefail
packages=(cmake g++ make libssl-dev googletest libgtest-dev pkg-config
          postgresql-15 postgresql-server-dev-15 postgresql-15-pgtap
          libtap-parser-sourcehandler-pgtap-perl postgresql-contrib python3
          libpq-dev   # libpq: kvg bench-store talks to the server as a client
          libpcre2-dev   # PCRE2: the byte-level BPE pre-tokenizer regexes
          nlohmann-json3-dev)  # JSON users give: common/json_reader.hpp
# --tests: also the tools only tests use: matplotlib (scripts/bench-report.py
# draws its plots with it) and Chromium (headless screenshots of its page),
# clang with its libFuzzer runtime (the fuzz harnesses, tests/fuzz), and what
# builds and checks the Debian packages (scripts/package-deb.sh, tests/deb).
# scripts/test.sh asks for them; the demo not.
[ "${1:-}" = --tests ] && packages+=(python3-matplotlib chromium clang libclang-rt-14-dev
                                     debhelper postgresql-server-dev-all lintian)
# --with-training: what retraining the reader model (tools/train-reader) and
# plotting kvg eval's results (scripts/eval-plot.py) need: PyTorch on the CPU,
# OpenBLAS (several times faster than the reference BLAS), matplotlib. No
# test needs them: the trained model is vendored.
[ "${1:-}" = --with-training ] && packages+=(python3-torch libopenblas0-pthread python3-matplotlib)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
echo "installing: ${missing[*]}"
echo "apt-get update"
$sudo apt-get update -qq
# One line per package set up, rather than minutes of silence or apt's noise.
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" |
  sed -un 's/^Setting up \([^ ]*\) .*/  set up \1/p'
echo "installed: ${missing[*]}"
