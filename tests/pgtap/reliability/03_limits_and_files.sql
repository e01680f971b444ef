-- Bounded memory: kvg.max_kv_memory refuses a context before allocating it,
-- with the bytes it needs in the message. Files that change underneath: the
-- model file (memory-mapped) replaced, truncated or removed between calls of
-- one session gives the next call a clear error or a reload, never a crash;
-- truncated in place *during* a call, that call fails with 58030 naming the
-- file (engine/gguf/mapping_guard.hpp), the backend survives and the next
-- call with the file restored works.
SELECT plan(20);
\getenv data KVG_TEST_DATA
\getenv tmp KVG_RELIABILITY_TMP
\set small :data '/models/stories260K.gguf'
\set other :data '/models/TinyStories-656K-Q8_0.gguf'
\set copy :tmp '/model.gguf'
\set long :tmp '/long.gguf'
SET kvg.device = 'cpu';
SET kvg.prefix_reuse = off;

-- stories260K: 5 layers x (K and V) x 4 kv heads x 8 floats x 4 bytes = 1280 bytes per position.
SELECT set_config('kvg.model', :'small', false) \g /dev/null
SET kvg.max_kv_memory = '13kB';  -- 13312 bytes: 10 positions
SELECT lives_ok($$SELECT kvg_generate('Once upon', 4)$$, 'a context within the bound runs');
SELECT throws_ok($$SELECT kvg_generate('Once upon a time, there was a little girl named Lily', 8)$$, '54000',
                 NULL, 'a context beyond kvg.max_kv_memory is refused with 54000');
SELECT throws_like($$SELECT kvg_generate('Once upon a time, there was a little girl named Lily', 8)$$,
                   '%needs % bytes of KV cache (1280 per position), above kvg.max_kv_memory = 13312 bytes%',
                   'the message says the bytes needed and the bound');
SELECT throws_ok($$SELECT kvg_capture('Once upon a time, there was a little girl named Lily')$$, '54000', NULL,
                 'kvg_capture is bounded too');
RESET kvg.max_kv_memory;
SELECT lives_ok($$SELECT kvg_generate('Once upon a time, there was a little girl named Lily', 8)$$,
                'the default bound (1 GB) lets it run');
CREATE ROLE tap_limits IN ROLE kvg_user;
SET ROLE tap_limits;
SELECT throws_ok($$SET kvg.max_kv_memory = '1GB'$$, '42501', NULL, 'kvg.max_kv_memory is superuser-only');
RESET ROLE;
DROP ROLE tap_limits;

-- A copy of the model in a temporary directory, changed between calls.
\setenv KVG_SMALL :small
\setenv KVG_OTHER :other
\setenv KVG_COPY :copy
\! cp "$KVG_SMALL" "$KVG_COPY" && chmod 644 "$KVG_COPY"
SELECT set_config('kvg.model', :'copy', false) \g /dev/null
SELECT kvg_generate('Once upon a time', 8) AS expected \gset
SELECT is(kvg_generate('Once upon a time', 8), :'expected', 'the copy generates');
\! truncate -s 600000 "$KVG_COPY"
SELECT throws_ok($$SELECT kvg_generate('Once upon a time', 8)$$, '22023', NULL,
                 'truncated under the backend: the next call refuses it as not a GGUF model (no SIGBUS)');
SELECT throws_like($$SELECT kvg_generate('Once upon a time', 8)$$, '%extends past end of file (size 600000)%',
                   'and says where the file ends');
SELECT is(pg_backend_pid() > 0, true, 'the backend survives');
\! cp "$KVG_SMALL" "$KVG_COPY.new" && mv "$KVG_COPY.new" "$KVG_COPY"
SELECT is(kvg_generate('Once upon a time', 8), :'expected', 'restored: the next call reloads it');
\! cp "$KVG_OTHER" "$KVG_COPY.new" && mv "$KVG_COPY.new" "$KVG_COPY"
SELECT isnt(kvg_generate('Once upon a time', 8), :'expected', 'replaced by another model: the next call uses it');
\! rm -f "$KVG_COPY"
SELECT throws_ok($$SELECT kvg_generate('Once upon a time', 8)$$, '42704', NULL, 'removed: 42704, a clear error');
SELECT set_config('kvg.model', :'small', false) \g /dev/null
SELECT is(kvg_generate('Once upon a time', 8), :'expected', 'the session keeps working');

-- Truncated during a call: a synthetic model (scripts/pg-test.sh writes it,
-- 4 layers of 512) and a 2000-token prompt, seconds of prefill; a background
-- job truncates the file half a second into the call.
\setenv KVG_LONG :long
SELECT current_database() AS db \gset
\setenv KVG_DB :db
\! cp "$KVG_LONG" "$KVG_LONG.orig"
SELECT set_config('kvg.model', :'long', false) \g /dev/null
SELECT lives_ok($$SELECT kvg_generate('a a a', 1)$$, 'the long model loads (mapped before the call below)');
CREATE FUNCTION pg_temp.long_call() RETURNS text LANGUAGE plpgsql AS $f$
BEGIN
  PERFORM kvg_generate(repeat('a ', 2000), 1);
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END
$f$;
\! bash tests/pgtap/reliability/truncate_when_busy.sh &
SELECT pg_temp.long_call() AS outcome \gset
\echo '# truncated during the call:' :'outcome'
SELECT matches(:'outcome'::text, '^58030: ', 'truncated during the call: the call fails with 58030 (i/o error), no SIGBUS');
SELECT matches(:'outcome'::text, 'model file ''[^'']*/long.gguf'' was truncated while in use',
               'and the message names the file');
SELECT is(pg_backend_pid() > 0, true, 'the backend survives');
\! cp "$KVG_LONG.orig" "$KVG_LONG.new" && mv "$KVG_LONG.new" "$KVG_LONG"
SELECT lives_ok($$SELECT kvg_generate('a a a', 1)$$, 'restored: the next call reloads it and works');
SELECT set_config('kvg.model', :'small', false) \g /dev/null
SELECT is(kvg_generate('Once upon a time', 8), :'expected', 'and the session still generates with the first model');
SELECT * FROM finish();
