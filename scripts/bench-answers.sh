#!/usr/bin/env bash
# Set-based answering (#38): QUESTIONS tickets (default 64) answered in one
# query by kvg_answers, against one kvg_answer_detail per row (LATERAL), in
# the backend and in the engine worker, on MODEL (default the vendored
# TinyStories-656K). The library holds ENTRIES (8) entries; the tickets ask
# them again (recurring), ask about them (transfer) and ask new things (cold).
# Prints a table of times, their ratio to the set-based call in the worker
# and the worker's batch peak, measured in one run, and checks that every
# way gives the same answers.
#   KVG_PGPORT=55560 flock /tmp/kvg-pg.lock scripts/bench-answers.sh [QUESTIONS] [MODEL]
set -uo pipefail
source "$(dirname "$0")/pg-env.sh"
cd "$repo"
count=${1:-64}
# KVG_BENCH_AS_INSTALLED=1: the server libpq's variables name (KVG_BENCH_PGHOST,
# KVG_BENCH_PGPORT), as it runs, instead of this checkout's cluster.
if [ -n "${KVG_BENCH_AS_INSTALLED:-}" ]; then
  export PGHOST=${KVG_BENCH_PGHOST:-$PGHOST} PGPORT=${KVG_BENCH_PGPORT:-$PGPORT}
else
  "$repo/scripts/pg-cluster.sh" start >/dev/null || exit 1
fi
model=${2:-$pg_files/models/TinyStories-656K-Q8_0.gguf}
db=kvg_bench_answers
PGOPTIONS='-c client_min_messages=warning' psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" \
  -c "CREATE DATABASE $db" || exit 1
trap 'PGOPTIONS="-c client_min_messages=warning" psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db"' EXIT
q() { PGOPTIONS="-c kvg.model=$model -c kvg.device=cpu -c client_min_messages=error ${1:-}" psql -X -q -At \
  -v ON_ERROR_STOP=1 -d $db "${@:2}"; }
q "" -c "CREATE EXTENSION kvg" || exit 1
names=(Lily Tom Mia Sam Ben Zoe Max Amy)
for name in "${names[@]}"; do
  q "" -c "SELECT kvg_learn('What did $name find in the garden?', 'regex:^',
           '$name went to the garden. In the garden, $name found a small red box.', 'box')" >/dev/null || exit 1
done
q "" -c "CREATE TABLE tickets AS
  SELECT g AS id, CASE g % 3 WHEN 0 THEN 'What did ' || (ARRAY['Lily','Tom','Mia','Sam','Ben','Zoe','Max','Amy'])[1 + g % 8] || ' find in the garden?'
                              WHEN 1 THEN (ARRAY['Lily','Tom','Mia','Sam','Ben','Zoe','Max','Amy'])[1 + g % 8] || ' went to the garden and found a'
                              ELSE 'Once upon a time a bird number ' || g || ' sang' END AS question
  FROM generate_series(1, $count) g" || exit 1
# A warm-up in each mode: the model is mapped and the worker started.
q "-c kvg.engine=backend" -c "SELECT count(*) FROM kvg_answers(ARRAY['Hello there'], 4)" >/dev/null
q "-c kvg.engine=worker" -c "SELECT count(*) FROM kvg_answer_detail('Hello there', 4)" >/dev/null

timed() {  # timed NAME ENGINE SQL: the seconds the query took, its answers to $out/NAME
  local t0 t1
  t0=$(date +%s.%N)
  q "-c kvg.engine=$2" -c "$3" >"$out/$1" || { echo "$1 failed" >&2; return 1; }
  t1=$(date +%s.%N)
  python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$t0" "$t1"
}
out=$(mktemp -d)
set_sql="SELECT t.id, md5(a.answer) FROM (SELECT array_agg(id ORDER BY id) AS ids, array_agg(question ORDER BY id) AS qs FROM tickets) q
         CROSS JOIN LATERAL kvg_answers(q.qs, 32) a JOIN tickets t ON t.id = q.ids[a.n] ORDER BY t.id"
row_sql="SELECT t.id, md5(d.answer) FROM tickets t, LATERAL kvg_answer_detail(t.question, 32) d ORDER BY t.id"
peak() { q "" -c "SELECT batch_peak FROM kvg_engine_worker()"; }
reset_peak() {  # the worker forgets its batch peak at its next round (1 s at most when idle)
  q "" -c "SELECT kvg_engine_worker_reset()" >/dev/null && sleep 1.2
}
reset_peak
s_set=$(timed set worker "$set_sql") || exit 1
peak_set=$(peak)
s_set_backend=$(timed set_backend backend "$set_sql") || exit 1
s_backend=$(timed rows_backend backend "$row_sql") || exit 1
reset_peak
s_worker=$(timed rows_worker worker "$row_sql") || exit 1
peak_rows=$(peak)
same=no
cmp -s "$out/set" "$out/set_backend" && cmp -s "$out/set" "$out/rows_backend" && cmp -s "$out/set" "$out/rows_worker" &&
  same=yes
ratio() { python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.1f}x')" "$1" "$s_set"; }
echo "$count tickets, $(basename "$model"), $(nproc) cores; answers identical in every way: $same"
printf '| %-52s | %8s | %-14s | %s\n' "how" "seconds" "vs kvg_answers" "worker batch peak"
printf '| %-52s | %8s | %-14s | %s\n' "kvg_answers(array), one query, kvg.engine=worker" "$s_set" "1.0x" "$peak_set"
printf '| %-52s | %8s | %-14s | %s\n' "kvg_answers(array), one query, kvg.engine=backend" "$s_set_backend" \
  "$(ratio "$s_set_backend")" "-"
printf '| %-52s | %8s | %-14s | %s\n' "LATERAL kvg_answer_detail per row, kvg.engine=backend" "$s_backend" \
  "$(ratio "$s_backend")" "-"
printf '| %-52s | %8s | %-14s | %s\n' "LATERAL kvg_answer_detail per row, kvg.engine=worker" "$s_worker" \
  "$(ratio "$s_worker")" "$peak_rows"
rm -rf "$out"
[ "$same" = yes ]
