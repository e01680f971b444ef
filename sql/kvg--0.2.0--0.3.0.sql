-- kvg 0.2.0 -> 0.3.0. CREATE EXTENSION kvg runs kvg--0.1.0.sql and then each
-- upgrade script in order, so a new installation and an upgraded one are the
-- same schema by construction. Each feature adds its own section below.

\echo Use "ALTER EXTENSION kvg UPDATE TO '0.3.0'" to load this file. \quit

-- kvg_chat ----------------------------------------------------------------------------------

-- A conversation answered as the model's assistant, laid out in the chat
-- format of the model's tokenizer.chat_template (docs/chat.md). The audit row
-- has operation 'chat' and input_sha256 of the laid-out prompt text.
CREATE FUNCTION public.kvg_chat(messages jsonb, max_tokens integer DEFAULT 64, format text DEFAULT 'auto',
                                seed bigint DEFAULT NULL, temperature double precision DEFAULT 0)
RETURNS text
AS 'MODULE_PATHNAME', 'kvg_chat' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION public.kvg_chat(jsonb, integer, text, bigint, double precision) IS
  'The assistant''s answer to messages ([{"role": "system|user|assistant", "content": "..."}, ...], the last the '
  'user''s), laid out in the model''s chat format (format: auto, plain, chatml, llama3, gemma, phi3, mistral); '
  'stops at the end of its turn; temperature 0 is greedy, seed NULL means 0.';
REVOKE EXECUTE ON FUNCTION public.kvg_chat(jsonb, integer, text, bigint, double precision) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.kvg_chat(jsonb, integer, text, bigint, double precision) TO kvg_user;

-- What kvg_chat asks the model, without running it: the format, the laid-out
-- prompt text (the audit's input_sha256 is its SHA-256) and its tokens.
CREATE FUNCTION public.kvg_chat_prompt(messages jsonb, format text DEFAULT 'auto')
RETURNS TABLE (format text, prompt text, tokens integer[])
AS 'MODULE_PATHNAME', 'kvg_chat_prompt' LANGUAGE C VOLATILE;
COMMENT ON FUNCTION public.kvg_chat_prompt(jsonb, text) IS
  'The chat format, laid-out prompt text and prompt tokens kvg_chat would use for messages (no model run, no audit row).';
REVOKE EXECUTE ON FUNCTION public.kvg_chat_prompt(jsonb, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.kvg_chat_prompt(jsonb, text) TO kvg_user;
