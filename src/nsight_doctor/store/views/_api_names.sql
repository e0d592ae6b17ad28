-- Classifies each distinct API name once (the call table can hold millions of rows).
CREATE TABLE api_names_t AS
-- The distinct ids are taken before their strings are joined: names can be long.
WITH ids AS (
    SELECT DISTINCT name_id FROM base_api_calls
), a AS (
    SELECT i.name_id, s.value AS raw_name,
           regexp_replace(s.value, '(_ptsz|_ptds)?(_v[0-9]+)?$', '') AS name
    FROM ids i LEFT JOIN base_strings s ON s.id = i.name_id
), b AS (
    SELECT *,
        CASE
            WHEN regexp_matches(name, '^(cudaLaunch|cuLaunch)') THEN 'launch'
            WHEN regexp_matches(name, '^(cudaGraphLaunch|cuGraphLaunch)') THEN 'graph_launch'
            WHEN regexp_matches(name, '^(cuda|cu)Memcpy') THEN 'memcpy'
            WHEN regexp_matches(name, '^(cuda|cu)Memset') THEN 'memset'
            WHEN regexp_matches(name, '^(cudaStreamSynchronize|cudaDeviceSynchronize|cudaEventSynchronize|cudaThreadSynchronize|cuStreamSynchronize|cuCtxSynchronize|cuEventSynchronize)$') THEN 'sync'
            WHEN regexp_matches(name, '^(cudaMalloc|cudaFree|cuMemAlloc|cuMemFree|cudaHostAlloc|cudaHostRegister|cudaHostUnregister|cuMemHostAlloc|cuMemHostRegister|cuMemCreate|cuMemMap|cuMemRelease|cuMemAddressReserve)') THEN 'alloc'
            ELSE 'other'
        END AS category
    FROM a
)
SELECT name_id, raw_name, name,
       CASE WHEN starts_with(name, 'cuda') THEN 'runtime' ELSE 'driver' END AS api,
       category,
       category = 'sync' OR (category IN ('memcpy', 'memset') AND NOT contains(name, 'Async')) AS blocking
FROM b;
