-- kvg.recipe: the caller's arithmetic. Every artifact and audit row records
-- it; an artifact grafts only under its own recipe; the integer recipe and the
-- compact KV storages stay exact against their own recompute; verified import
-- recomputes under the artifact's recipe, whatever the caller's is.
BEGIN;
SELECT plan(16);
\getenv data KVG_TEST_DATA
\set f32model :data '/models/stories260K.gguf'
\set q8model :data '/models/TinyStories-656K-Q8_0.gguf'
SELECT set_config('kvg.model', :'q8model', true) \g /dev/null
SET LOCAL kvg.device = 'cpu';
CREATE ROLE tap_recipe IN ROLE kvg_user;
SET ROLE tap_recipe;

SELECT is(public.kvg_model_info()->>'recipe', 'f32-portable-v1', 'the default recipe is f32-portable-v1');
SET LOCAL kvg.recipe = 'q8-portable-v1';
SELECT is(public.kvg_model_info()->>'recipe', 'q8-portable-v1', 'kvg_model_info reports kvg.recipe');

-- A call under q8 is audited as q8.
SELECT public.kvg_generate_bytes('Once upon a time', 16) AS q8_out \gset
SELECT is((SELECT recipe FROM kvg.readable_audit ORDER BY id DESC LIMIT 1), 'q8-portable-v1', 'the audit row names the recipe');
SELECT is(public.kvg_generate_bytes('Once upon a time', 16), :'q8_out'::bytea, 'a q8 call repeats bit for bit');

-- Artifacts carry their recipe and graft only under it.
SET LOCAL kvg.recipe = 'q8-portable-v1';
SELECT public.kvg_capture('Once upon a time, there was a little girl') AS q8_art \gset
SELECT is((SELECT recipe FROM kvg.readable_artifacts WHERE sha256 = :'q8_art'), 'q8-portable-v1', 'the artifact row names the recipe');
SELECT is((SELECT exact FROM public.kvg_graft_check(:'q8_art', ' named Lily', 2)), true,
          'a q8 graft equals the q8 recompute bit for bit (logits and 2 sampled continuations)');
SET LOCAL kvg.recipe = 'f32-portable-v1';
SELECT throws_ok(format($$SELECT public.kvg_generate(' named', 8, %L)$$, :'q8_art'), '22V02', NULL,
                 'a q8 artifact is refused under f32-portable-v1');
SELECT throws_ok(format($$SELECT * FROM public.kvg_graft_check(%L, ' named')$$, :'q8_art'), '22V02', NULL,
                 'kvg_graft_check refuses it too');

-- Verified import recomputes under the artifact's own recipe, not the caller's.
RESET ROLE;
SELECT public.kvg_export(:'q8_art') AS q8_bytes \gset
DELETE FROM kvg.artifacts WHERE sha256 = :'q8_art';
SET ROLE tap_recipe;
SELECT is(public.kvg_import(:'q8_bytes'::bytea), :'q8_art', 'a q8 artifact imports (verified) while the caller is on f32');
SELECT is((SELECT provenance FROM kvg.readable_artifacts WHERE sha256 = :'q8_art'), 'verified', 'and is verified');

-- Compact KV: smaller artifacts of the same tokens, exact against their own recompute.
SELECT public.kvg_capture('Once upon a time, there was a little girl') AS f32_art \gset
SET LOCAL kvg.recipe = 'f32-portable-v1+kv-bf16';
SELECT public.kvg_capture('Once upon a time, there was a little girl') AS bf16_art \gset
SET LOCAL kvg.recipe = 'f32-portable-v1+kv-i8';
SELECT public.kvg_capture('Once upon a time, there was a little girl') AS i8_art \gset
SELECT ok((SELECT bytes FROM kvg.readable_artifacts WHERE sha256 = :'bf16_art') * 1.9 < (SELECT bytes FROM kvg.readable_artifacts WHERE sha256 = :'f32_art'),
          'bf16 KV artifacts are about half the size');
SELECT ok((SELECT bytes FROM kvg.readable_artifacts WHERE sha256 = :'i8_art') * 3 < (SELECT bytes FROM kvg.readable_artifacts WHERE sha256 = :'f32_art'),
          'int8 KV artifacts are under a third of the size');
SELECT is((SELECT exact FROM public.kvg_graft_check(:'i8_art', ' named Lily', 2)), true, 'an i8-KV graft is exact');
SET LOCAL kvg.recipe = 'f32-portable-v1+kv-bf16';
SELECT is((SELECT exact FROM public.kvg_graft_check(:'bf16_art', ' named Lily', 2)), true, 'a bf16-KV graft is exact');
SELECT throws_ok(format($$SELECT public.kvg_generate(' named', 8, %L)$$, :'i8_art'), '22V02', NULL,
                 'an i8-KV artifact is refused under bf16 KV');

-- On an F32 model the integer recipe has no quantized matrix to change.
RESET ROLE;
SELECT set_config('kvg.model', :'f32model', true) \g /dev/null
SET ROLE tap_recipe;
SET LOCAL kvg.recipe = 'q8-portable-v1';
SELECT public.kvg_generate('Once upon a time', 16) AS q8_text \gset
SET LOCAL kvg.recipe = 'f32-portable-v1';
SELECT is(public.kvg_generate('Once upon a time', 16), :'q8_text', 'on an F32 model q8 and f32 give the same text');

SELECT * FROM finish();
ROLLBACK;
