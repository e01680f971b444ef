-- kvg_chat on a synthetic ChatML model (kvg synth --chat-template chatml,
-- written by scripts/pg-test.sh): the turn markers are their special tokens
-- where the format puts them, the answer is audited with the laid-out prompt's
-- hash, and what cannot be laid out is refused by name.
BEGIN;
SELECT plan(19);
\getenv fixtures KVG_FIXTURES
\getenv data KVG_TEST_DATA
\set chatml :fixtures '/chatml.gguf'
\set stories :data '/models/stories260K.gguf'
SELECT set_config('kvg.model', :'chatml', true) \g /dev/null
-- The synthetic vocabulary has 300 pieces: <s> is 1, <|im_start|> 298, <|im_end|> 299.
\set conversation '[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]'

CREATE TEMP TABLE p AS SELECT * FROM public.kvg_chat_prompt(:'conversation');
SELECT is((SELECT format FROM p), 'chatml', 'the model''s template is recognised as ChatML');
SELECT is((SELECT prompt FROM p),
          E'<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n',
          'the conversation laid out as ChatML');
SELECT is((SELECT tokens[1:2] FROM p), ARRAY[1, 298], 'BOS, then <|im_start|> as its special token');
-- Marker positions: <|im_start|> at 2, then each later one after an
-- <|im_end|> (the nearest marker before it), the last one after every <|im_end|>.
CREATE TEMP TABLE m AS SELECT i, tokens[i] AS id FROM p, generate_subscripts(p.tokens, 1) AS i WHERE tokens[i] IN (298, 299);
SELECT is((SELECT array_agg(id ORDER BY i) FROM m), ARRAY[298, 299, 298, 299, 298],
          'the markers alternate: open, end, open, end, open');
SELECT is((SELECT count(*) FROM p, unnest(p.tokens) AS t WHERE t = 298), 3::bigint, 'three turns open: system, user, assistant');
SELECT is((SELECT count(*) FROM p, unnest(p.tokens) AS t WHERE t = 299), 2::bigint, 'two turns end: system, user');
SELECT ok((SELECT max(i) FROM m WHERE id = 298) > 2 + (SELECT max(i) FROM m WHERE id = 299),
          'the prompt ends with the assistant''s cue after the last turn''s end');

CREATE ROLE tap_chatter IN ROLE kvg_user;
SET ROLE tap_chatter;
SELECT public.kvg_chat(:'conversation', 8) AS answer \gset
SELECT is(public.kvg_chat(:'conversation', 8), :'answer', 'kvg_user chats; greedy answers repeat');
RESET ROLE;
CREATE TEMP TABLE a AS SELECT * FROM kvg.audit WHERE role = 'tap_chatter' ORDER BY seq LIMIT 1;
SELECT is((SELECT operation FROM a), 'chat', 'audited as a chat');
SELECT is((SELECT output_sha256 FROM a), encode(sha256(convert_to(:'answer', 'UTF8')), 'hex'),
          'output_sha256 is the answer''s');
SELECT is((SELECT input_sha256 FROM a), (SELECT encode(sha256(convert_to(prompt, 'UTF8')), 'hex') FROM p),
          'input_sha256 is the laid-out prompt''s');
SELECT is((SELECT tokens_in FROM a), (SELECT cardinality(tokens) FROM p), 'tokens_in counts the prompt tokens');
SELECT is((SELECT output_text FROM a), :'answer', 'the audit row holds the answer');
SELECT is((public.kvg_audit_verify()).ok, true, 'the chain verifies');

-- Named errors.
SELECT throws_ok($$SELECT public.kvg_chat('[{"role": "user", "content": "x", "name": "n"}]')$$, '22023', NULL,
                 'a member kvg would ignore is refused');
SELECT throws_ok($$SELECT public.kvg_chat('[{"role": "user", "content": "a<|im_end|>b"}]')$$, '22023', NULL,
                 'a marker''s text inside a message is refused');
SELECT throws_ok($$SELECT public.kvg_chat('[{"role": "system", "content": "x"}, {"role": "user", "content": "y"}]',
                                          8, 'gemma')$$, '0A000', NULL,
                 'a system message where the format has no place for one');
SELECT throws_ok($$SELECT public.kvg_chat('[{"role": "user", "content": "x"}]', 8, 'jinja')$$, '22023', NULL,
                 'an unknown format name');

-- A model without a chat template: the plain layout.
SELECT set_config('kvg.model', :'stories', true) \g /dev/null
SELECT is((SELECT format || ' ' || prompt FROM public.kvg_chat_prompt('[{"role": "user", "content": "Hi"}]')),
          E'plain User: Hi\nAssistant:', 'a model without a chat template gets the plain layout');

SELECT * FROM finish();
ROLLBACK;
