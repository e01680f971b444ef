-- The engine worker's passes carry every caller's sequences together: one
-- that fails there (here: it outgrows its caller's kvg.max_kv_memory in the
-- middle of its decode) fails alone, with the error its own backend would
-- give, and the other callers' sequences in the same passes go on.
BEGIN;
SELECT plan(4);
\getenv data KVG_TEST_DATA
\set small :data '/models/stories260K.gguf'
\ir sessions.psql
SELECT set_config('kvg.model', :'small', true) \g /dev/null
SET LOCAL kvg.device = 'cpu';
SET LOCAL kvg.engine = worker;

-- Another session decodes long generations in the worker meanwhile.
SELECT pg_temp.connect('b') \g /dev/null
SELECT dblink_exec('b', format('SET kvg.model = %L', :'small')) \g /dev/null
SELECT dblink_send_query('b', $$SELECT count(public.kvg_generate(format('Story %s: once upon a time', i), 256))
                                 FROM generate_series(1, 40) i$$) \g /dev/null
DO $$
BEGIN
  FOR i IN 1..500 LOOP  -- until its first generation decodes (5 s at most)
    EXIT WHEN EXISTS (SELECT FROM kvg.progress WHERE pid <> pg_backend_pid() AND phase = 'decode');
    PERFORM pg_sleep(0.01);
  END LOOP;
END $$;
SELECT ok(EXISTS (SELECT FROM kvg.progress WHERE pid <> pg_backend_pid() AND phase = 'decode'),
          'the other session decodes in the worker');

-- 64 kB holds about 50 positions of this model: the prompt fits, the decode
-- outgrows it, in passes shared with the other session's sequence.
SET LOCAL kvg.max_kv_memory = '64kB';
SELECT throws_like($$SELECT kvg_generate('Once upon a time', 200)$$,
                   '%above kvg.max_kv_memory = 65536 bytes%',
                   'a generation that outgrows kvg.max_kv_memory in the worker fails, naming it');
SELECT throws_ok($$SELECT kvg_generate('Once upon a time there was', 200)$$, '54000', NULL,
                 'as 54000, as in its own backend');
RESET kvg.max_kv_memory;

SELECT is((SELECT n FROM dblink_get_result('b', false) AS t(n bigint)), 40::bigint,
          'the other session''s generations, in the same passes, all ran to their end');
SELECT diag('the other session: ' || dblink_error_message('b')) WHERE dblink_error_message('b') <> 'OK';
SELECT dblink_disconnect('b') \g /dev/null

SELECT * FROM finish();
ROLLBACK;
