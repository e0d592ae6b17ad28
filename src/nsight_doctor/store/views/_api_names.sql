-- Classifies each distinct API name once (the call table can hold millions of rows).
-- One-time categories (module, graph_build, setup, host_alloc) are work a program does once,
-- at start-up or on a first call, not every step.
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
            -- Loading and linking code: module and library loads, JIT links, symbol lookups.
            WHEN regexp_matches(name, '^(cuModuleLoad|cuLibraryLoad|cuLink|cuModuleGetFunction|cuLibraryGetKernel|cuLibraryGetModule|cuKernelGetFunction|cudaGetFuncBySymbol|cuGetProcAddress|cudaGetDriverEntryPoint|cuModuleUnload|cuLibraryUnload)') THEN 'module'
            -- Building CUDA graphs: stream capture and instantiation.
            WHEN regexp_matches(name, '^(cudaStreamBeginCapture|cudaStreamEndCapture|cuStreamBeginCapture|cuStreamEndCapture|cudaGraphInstantiate|cuGraphInstantiate|cudaGraphCreate|cuGraphCreate|cudaGraphAdd|cuGraphAdd|cudaGraphExecUpdate|cuGraphExecUpdate|cudaGraphUpload|cuGraphUpload|cudaThreadExchangeStreamCaptureMode|cudaGraphDestroy|cuGraphDestroy|cudaGraphExecDestroy|cuGraphExecDestroy)') THEN 'graph_build'
            -- Pinning host memory.
            WHEN regexp_matches(name, '^(cudaHostAlloc|cudaMallocHost|cuMemHostAlloc|cuMemAllocHost|cudaHostRegister|cuMemHostRegister|cudaFreeHost|cuMemFreeHost|cudaHostUnregister|cuMemHostUnregister)') THEN 'host_alloc'
            WHEN regexp_matches(name, '^(cudaMalloc|cudaFree|cuMemAlloc|cuMemFree|cuMemCreate|cuMemMap|cuMemUnmap|cuMemRelease|cuMemAddressReserve|cuMemAddressFree|cuMemSetAccess)') THEN 'alloc'
            -- Creating and destroying contexts, streams and events; device and function set-up.
            WHEN regexp_matches(name, '^(cuInit|cuCtxCreate|cuCtxDestroy|cuDevicePrimaryCtx|cudaSetDevice|cudaDeviceReset|cudaStreamCreate|cuStreamCreate|cudaStreamDestroy|cuStreamDestroy|cudaEventCreate|cuEventCreate|cudaEventDestroy|cuEventDestroy|cudaGetDeviceProperties|cudaFuncGetAttributes|cudaFuncSetAttribute|cuFuncSetAttribute|cuKernelSetAttribute|cudaProfilerStart|cudaProfilerStop|cuProfilerStart|cuProfilerStop)') THEN 'setup'
            ELSE 'other'
        END AS category
    FROM a
)
SELECT name_id, raw_name, name,
       CASE WHEN starts_with(name, 'cuda') THEN 'runtime' ELSE 'driver' END AS api,
       category,
       category IN ('module', 'graph_build', 'setup', 'host_alloc') AS one_time
FROM b;
