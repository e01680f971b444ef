-- The kvg.* configuration parameters and who may change them.
LOAD 'kvg';  -- defines them (any kvg function call would, too)
-- kvg.max_threads defaults to this server's cores: shown as such.
SELECT name, CASE name WHEN 'kvg.max_threads' THEN '(cores)' ELSE setting END AS setting, context, vartype,
       min_val, max_val, enumvals
FROM pg_settings WHERE name LIKE 'kvg.%' ORDER BY name;

SET kvg.threads = 4;
SHOW kvg.threads;
-- 0 (the default) is kvg.max_threads.
SET kvg.threads = 0;
SET kvg.threads = -1;
SET kvg.threads = 1025;
SET kvg.device = 'cpu';
SHOW kvg.device;
SET kvg.device = 'gpu';
RESET kvg.device;
-- The recipe: one of the names the engine computes (docs/recipe.md).
SET kvg.recipe = 'q8-portable-v1+kv-i8';
SHOW kvg.recipe;
SET kvg.recipe = 'f32-fast';
RESET kvg.recipe;
-- The knowledge template: {solution}, then {question}, once each.
SET kvg.knowledge_template = 'Q: {question} A:';
SET kvg.knowledge_template = '{question} {solution}';
SET kvg.knowledge_template = '{solution} {solution} {question}';
SET kvg.knowledge_template = E'<|system|>Facts: {solution}<|user|>{question}<|assistant|>';
SHOW kvg.knowledge_template;
RESET kvg.knowledge_template;
SET kvg.transfer_min_similarity = 1.5;
SET kvg.prefix_reuse = off;
RESET kvg.prefix_reuse;
-- A hot standby's way to the primary (docs/scale-out.md): libpq must parse it.
SET kvg.audit_conninfo = 'host=/var/run/postgresql port=5432 user=standby_audit';
SET kvg.audit_conninfo = 'no equals sign';
RESET kvg.audit_conninfo;
-- The prefix is reserved: a typo is an error, not a silent placeholder.
SET kvg.modle = '/tmp/model.gguf';

-- A superuser may point kvg.model anywhere; other roles may not.
SET kvg.model = '/nonexistent/model.gguf';
SHOW kvg.model;
RESET kvg.model;
CREATE ROLE regress_kvg_plain;
GRANT kvg_user TO regress_kvg_plain;
SET ROLE regress_kvg_plain;
SET kvg.model = '/etc/passwd';
\echo :LAST_ERROR_SQLSTATE
SET kvg.max_new_tokens = 100000;
\echo :LAST_ERROR_SQLSTATE
SET kvg.gpu_staging_memory = '1GB';  -- pinned RAM: a server resource
\echo :LAST_ERROR_SQLSTATE
SET kvg.threads = 2;
SHOW kvg.audit_conninfo;
SET kvg.audit_conninfo = 'host=elsewhere';
SET kvg.allow_unaudited = on;
SET kvg.knowledge_template = '{solution} {question}';
SET kvg.prefix_reuse = off;
SHOW kvg.model;
RESET ROLE;
DROP ROLE regress_kvg_plain;
-- Pinned staging per backend: in memory units, at least 3 MB.
SET kvg.gpu_staging_memory = '32MB';
SHOW kvg.gpu_staging_memory;
SET kvg.gpu_staging_memory = '1MB';
RESET kvg.gpu_staging_memory;
