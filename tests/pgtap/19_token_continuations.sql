-- Text or tokens (docs/sql.md, kvg_tokenize): a prompt or a continuation
-- given as token ids is taken as those tokens, so a whole text's tokens split
-- where a capture ends graft to the same bytes as recomputing them; text
-- after an artifact is tokenized on its own, which can give other tokens,
-- and kvg_tokenize shows which.
BEGIN;
SELECT plan(15);
\getenv data KVG_TEST_DATA
SELECT set_config('kvg.model', :'data' || '/models/stories260K.gguf', true) \g /dev/null
SET LOCAL kvg.device = 'cpu';

SELECT kvg_tokenize('Once upon a time there was a little girl') AS whole \gset
SELECT is((:'whole'::int[])[1], 1, 'a fresh prompt''s tokens begin with BOS');
SELECT kvg_capture((:'whole'::int[])[1:4]) AS head \gset
SELECT is(kvg_generate(:'whole'::int[], 12), kvg_generate((:'whole'::int[])[5:], 12, artifact => :'head'),
          'the whole prompt''s tokens, and its tail''s after a capture of its head: the same text');
SELECT is(encode(kvg_generate_bytes(:'whole'::int[], 12, seed => 7, temperature => 0.9), 'hex'),
          encode(kvg_generate_bytes((:'whole'::int[])[5:], 12, :'head', 7, 0.9), 'hex'),
          '... and the same sampled bytes');
SELECT is(exact, true, 'a token-level continuation grafts exactly')
FROM kvg_graft_check(:'head', (:'whole'::int[])[5:]);
SELECT is(kvg_generate('Once upon a time', 8), kvg_generate(kvg_tokenize('Once upon a time'), 8),
          'a text prompt and its kvg_tokenize ids generate the same');
SELECT is(kvg_tokenize(' there was', :'head'), kvg_tokenize(' there was', :'head'),
          'kvg_tokenize after an artifact is deterministic');
SELECT is(kvg_generate(ARRAY[]::int[], 8, kvg_capture((:'whole'::int[])[5:], :'head')), kvg_generate(:'whole'::int[], 8),
          'a continuation captured from token ids continues the chain with exactly those tokens');

-- Where tokenizing on its own differs: the text after a split inside a word.
SELECT kvg_tokenize('Once upon a ti') AS split \gset
SELECT kvg_capture(:'split'::int[]) AS split_head \gset
SELECT isnt(:'split'::int[] || kvg_tokenize('me there was', :'split_head'),
            kvg_tokenize('Once upon a time there was'),
            'text after an artifact is tokenized on its own: not the whole text''s tokens');

-- The audit row hashes the ids it was given.
SELECT kvg_generate(ARRAY[1, 400, 403], 4) \g /dev/null
SELECT is(input_sha256, encode(sha256('\x010000009001000093010000'::bytea), 'hex'),
          'input_sha256 of a token prompt is the SHA-256 of its ids, int32 little-endian')
FROM kvg.audit WHERE operation = 'generate' ORDER BY seq DESC LIMIT 1;

-- Bad ids are refused by position before any work; blank is blank.
SELECT throws_ok($$SELECT kvg_generate(ARRAY[1, 999999], 4)$$, '22023',
                 'prompt holds token id 999999 at position 2, outside this model''s vocabulary of 512',
                 'an id outside the vocabulary is refused, naming it and its position');
SELECT throws_ok($$SELECT kvg_generate(ARRAY[1, NULL]::int[], 4)$$, '22023',
                 'prompt holds a NULL token id at position 2', 'a NULL id is refused');
SELECT throws_ok($$SELECT kvg_capture(ARRAY[[1, 2], [3, 4]])$$, '22023',
                 'prefix must be a one-dimensional array of token ids', 'a two-dimensional array is refused');
SELECT throws_ok($$SELECT kvg_generate(array_fill(1, ARRAY[100000]), 4)$$, '54000', NULL,
                 'more ids than the context is refused before they are read');
SELECT is(kvg_generate(ARRAY[]::int[], 4), NULL, 'an empty array is a blank prompt: NULL');
SELECT is(kvg_tokenize(NULL), NULL, 'kvg_tokenize(NULL) is NULL');

SELECT * FROM finish();
ROLLBACK;
