#!/usr/bin/env bash
# Run in the background by 03_limits_and_files.sql (psql \!): waits until a
# query calling pg_temp.long_call is running in database $KVG_DB, then half a
# second more, and truncates $KVG_LONG in place to 4096 bytes, under the
# backend that is reading it. Gives up after 60 s (the test then fails: the
# call finishes without an error).
for _ in $(seq 1 600); do
  busy=$(psql -X -At -d "$KVG_DB" -c "SELECT count(*) FROM pg_stat_activity
          WHERE query LIKE '%pg_temp.long_call%' AND state = 'active' AND pid <> pg_backend_pid()" 2>/dev/null)
  if [ "$busy" = 1 ]; then
    sleep 0.5
    truncate -s 4096 "$KVG_LONG"
    exit 0
  fi
  sleep 0.1
done
exit 1
