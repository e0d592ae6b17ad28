-- advice: what to do about each problem, in the terms of the framework that produced the
-- profile (store/advice.yaml; docs/advice.md lists it all). The framework's own text applies
-- when the profile looks like a model loop (its steady state has steps); otherwise, and for an
-- unknown framework, the generic text.
--
-- topic: cuda-graphs, around-graphs, fewer-kernels, host-sync, host-sampling, moe, recompile,
--   host-overhead, batch-more, attention-backend, static-kv-cache, pinned-memory or startup.
-- framework: the framework whose text this is (generic when none applies).
-- text: the advice.
CREATE VIEW advice AS
WITH f AS (
    SELECT CASE WHEN (SELECT count(*) FROM steps) > 0 THEN name ELSE 'generic' END AS fw FROM framework
)
SELECT a.topic, coalesce(s.framework, a.framework) AS framework, coalesce(s.text, a.text) AS text
FROM advice_t a
LEFT JOIN advice_t s ON s.topic = a.topic AND s.framework = (SELECT fw FROM f)
WHERE a.framework = 'generic';
