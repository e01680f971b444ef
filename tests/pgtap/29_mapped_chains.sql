-- Mapped chains in the server (docs/long-context.md): in worker mode the
-- engine worker attends a call's stored chain in place, from its KV files
-- (kvg.engine_kv_files, the data directory's pgsql_tmp_kvg_kv), and holds
-- only the positions after it. So a chain beyond kvg.max_kv_memory, which
-- a backend must copy and therefore refuses, runs in the worker, with the
-- same bytes as a resident graft and as recomputing everything. The files
-- are a cache of the large objects: one damaged or cut short is rebuilt,
-- never served, and they give nobody a chain they may not read.
BEGIN;
SELECT plan(23);
\ir small_model.psql
\ir sessions.psql
SET LOCAL kvg.prefix_reuse = off;

-- A chain of three links over 270 positions of a story, and 20 tokens after it.
SELECT kvg_tokenize(repeat('Once upon a time, there was a little girl named Lily. She loved to play '
                           'outside in the sun with her red ball and her dog. ', 8)) AS whole \gset
SELECT ok(cardinality(:'whole'::int[]) >= 290, 'the story has at least 290 tokens');
SELECT kvg_capture((:'whole'::int[])[1:100]) AS a \gset
SELECT kvg_capture((:'whole'::int[])[101:200], :'a') AS b \gset
SELECT kvg_capture((:'whole'::int[])[201:270], :'b') AS c \gset
\set tail '(' :'whole' '::int[])[271:290]'

-- What it gives with everything resident, in a backend: grafted, and recomputed.
SET LOCAL kvg.engine = backend;
SELECT kvg_generate(:tail, 16, :'c') AS resident,
       encode(kvg_generate_bytes(:tail, 16, :'c', 7, 0.9), 'hex') AS resident_sampled,
       kvg_generate((:'whole'::int[])[1:290], 16) AS recomputed \gset
SELECT is(:'resident'::text, :'recomputed', 'in a backend, the graft of the chain gives what recomputing gives');
-- 64 kB holds about 50 positions of this model: the chain's 270 do not fit.
SET LOCAL kvg.max_kv_memory = '64kB';
SELECT throws_ok(format('SELECT kvg_generate(%s, 16, %L)', :'tail', :'c'), '54000', NULL,
                 'a backend copies the chain into its cache, and 64 kB cannot hold it');

SET LOCAL kvg.engine = worker;
SELECT is(kvg_generate(:tail, 16, :'c'), :'resident'::text,
          'the worker attends the chain in place within 64 kB: the text of the resident graft');
SELECT is(encode(kvg_generate_bytes(:tail, 16, :'c', 7, 0.9), 'hex'), :'resident_sampled'::text,
          '... and its sampled bytes');

-- The worker's KV files: one per link, each its artifact's bytes.
CREATE FUNCTION pg_temp.kv_file(sha text) RETURNS text LANGUAGE sql
  RETURN format('pgsql_tmp_kvg_kv/%s/%s.kvga', substr(sha, 1, 2), sha);
CREATE FUNCTION pg_temp.file_holds(sha text) RETURNS boolean LANGUAGE sql
  RETURN encode(sha256(pg_read_binary_file(pg_temp.kv_file(sha))), 'hex') = sha;
SELECT is((SELECT count(*) FILTER (WHERE pg_temp.file_holds(x)) FROM unnest(ARRAY[:'a', :'b', :'c']) x), 3::bigint,
          'the worker keeps each link of the chain as a file of its bytes');
SELECT is((SELECT count(*) FROM pg_ls_dir('.') d WHERE d = 'pgsql_tmp_kvg_kv'), 1::bigint,
          'in the data directory, under a pgsql_tmp name base backups skip');

-- A flipped byte in a file: found, the file rebuilt from the large object.
SELECT lo_from_bytea(0, set_byte(pg_read_binary_file(pg_temp.kv_file(:'c')), 200,
                                 get_byte(pg_read_binary_file(pg_temp.kv_file(:'c')), 200) # 1)) AS flipped \gset
SELECT lo_export(:flipped, pg_temp.kv_file(:'c')) \g /dev/null
SELECT isnt(pg_temp.file_holds(:'c'), true, '(a byte of the last link''s file flipped in place)');
SELECT is(kvg_generate(:tail, 16, :'c'), :'resident'::text, 'a damaged file is never served: the same text');
SELECT ok(pg_temp.file_holds(:'c'), 'the damaged file was rebuilt with its artifact''s bytes');
-- A file cut short.
SELECT lo_from_bytea(0, ''::bytea) AS empty \gset
SELECT lo_export(:empty, pg_temp.kv_file(:'b')) \g /dev/null
SELECT is((pg_stat_file(pg_temp.kv_file(:'b'))).size, 0::bigint, '(the middle link''s file cut to nothing)');
SELECT is(kvg_generate(:tail, 16, :'c'), :'resident'::text, 'a file cut short is never served: the same text');
SELECT ok(pg_temp.file_holds(:'b'), 'the file cut short was rebuilt');

-- A long call cancelled in the worker: its sequence, its KV reservation and
-- its mapping go; the next call is served the same.
\ir worker_cancel.psql
RESET kvg.max_kv_memory;  -- its 200 tokens fit: only the timeout ends it
SET LOCAL statement_timeout = '10ms';
SELECT is(pg_temp.cancelled(format('SELECT kvg_generate(%s, 200, %L)', :'tail', :'c')), 'cancelled',
          'a long mapped call is cancelled by statement_timeout');
RESET statement_timeout;
SET LOCAL kvg.max_kv_memory = '64kB';
SELECT ok(pg_temp.worker_idle(), 'the worker holds no sequence and reserves no KV after it');
SELECT is(kvg_generate(:tail, 16, :'c'), :'resident'::text, 'and the next call is served the same');

-- A chain stored as i8 KV: its rows widened as they are read, the bits of
-- a resident graft under the same recipe.
SET LOCAL kvg.recipe = 'f32-portable-v1+kv-i8';
RESET kvg.max_kv_memory;
SELECT kvg_capture((:'whole'::int[])[1:150]) AS i8a \gset
SELECT kvg_capture((:'whole'::int[])[151:270], :'i8a') AS i8b \gset
SET LOCAL kvg.engine = backend;
SELECT kvg_generate(:tail, 16, :'i8b') AS i8_resident,
       encode(kvg_generate_bytes(:tail, 16, :'i8b', 7, 0.9), 'hex') AS i8_resident_sampled \gset
SET LOCAL kvg.engine = worker;
SET LOCAL kvg.max_kv_memory = '64kB';
SELECT is(kvg_generate(:tail, 16, :'i8b'), :'i8_resident'::text,
          'an i8 chain attended in place within 64 kB: the text of its resident graft');
SELECT is(encode(kvg_generate_bytes(:tail, 16, :'i8b', 7, 0.9), 'hex'), :'i8_resident_sampled'::text,
          '... and its sampled bytes');
SELECT ok(pg_temp.file_holds(:'i8b'), '(from the worker''s KV files)');
SET LOCAL kvg.recipe = 'f32-portable-v1';

-- The KV files give way before the disk does: when writing them would leave
-- less than kvg.min_free_disk free, the worker copies the chain instead (so
-- the 64 kB bound refuses it, as in a backend), and writes no file.
RESET kvg.max_kv_memory;
SELECT kvg_capture((:'whole'::int[])[1:260]) AS unwritten \gset
SET LOCAL kvg.max_kv_memory = '64kB';
SELECT pg_temp.connect('admin') \g /dev/null
CREATE FUNCTION pg_temp.set_min_free_disk(value text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  PERFORM dblink_exec('admin', format('ALTER SYSTEM SET kvg.min_free_disk = %L', value));
  PERFORM pg_reload_conf();
  FOR i IN 1..500 LOOP  -- until the reload has reached a new backend (the worker was signalled with it)
    IF (SELECT setting = value FROM dblink('admin', $q$SELECT setting FROM pg_settings WHERE name = 'kvg.min_free_disk'$q$)
                                     AS t(setting text)) THEN
      PERFORM pg_sleep(0.2);
      RETURN true;
    END IF;
    PERFORM pg_sleep(0.01);
  END LOOP;
  RETURN false;
END $$;
SELECT pg_temp.set_min_free_disk('2147483647') \g /dev/null
SELECT throws_ok(format('SELECT kvg_generate((%L::int[])[261:290], 16, %L)', :'whole', :'unwritten'), '54000', NULL,
                 'with no room left for KV files the worker copies the chain: refused under 64 kB');
SELECT pg_temp.set_min_free_disk('1024') \g /dev/null
SELECT ok(pg_stat_file(pg_temp.kv_file(:'unwritten'), true) IS NULL, '(and wrote no file for it)');
SELECT dblink_exec('admin', 'ALTER SYSTEM RESET kvg.min_free_disk') \g /dev/null
SELECT pg_reload_conf() \g /dev/null
SELECT dblink_disconnect('admin') \g /dev/null

-- The files give nobody a chain they may not read: another user's call
-- after it is refused as before, although its files are in place.
CREATE ROLE tap_mapped_mallory IN ROLE kvg_user;
SET SESSION AUTHORIZATION tap_mapped_mallory;
SELECT throws_ok(format('SELECT kvg_generate(%s, 16, %L)', :'tail', :'c'), '42501', NULL,
                 'another user''s call after the chain is refused, its files there or not');
RESET SESSION AUTHORIZATION;
SELECT ok(pg_temp.file_holds(:'c'), '(its files were there)');

SELECT * FROM finish();
ROLLBACK;
