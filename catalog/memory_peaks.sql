-- One row per (run, task, role) whose step ran on a GPU of the run's plan: the plan's peak
-- for that GPU (`tasks/plan/memory/`, the dry run's table) beside the peak torch's allocator
-- measured during the step (`tasks/steps/gpu_memory.py`), both in GiB.
--   SELECT task, role, planned_peak, measured_peak, ratio FROM memory_peaks WHERE run_id = ?
-- measured_peak is NULL where the step's tensors were not on a CUDA device (a CPU run, or a
-- cluster simulated with fake GPUs); planned_peak where a model's size could not be read.
-- `reason` says which. The plan counts allocator bytes; measured is torch.cuda's
-- max_memory_allocated, so a ratio above 1 is memory the plan did not foresee.
CREATE OR REPLACE VIEW memory_peaks AS
SELECT run_id, task_key AS task, step, role, planned_peak, measured_peak,
       measured_peak / planned_peak AS ratio,
       CASE WHEN measured_peak IS NULL
            THEN 'not measured: no CUDA device (the step''s tensors were on the CPU)'
            WHEN planned_peak IS NULL
            THEN 'not planned: a model''s size could not be read (config.json)'
       END AS reason
FROM (
    SELECT run_id, task_key, step, split_part(key, '/', 3) AS role,
           max(value) FILTER (WHERE key LIKE '%/planned_peak_gib') AS planned_peak,
           max(value) FILTER (WHERE key LIKE '%/peak_allocated_gib') AS measured_peak
    FROM metrics
    WHERE key LIKE 'perf/gpu/%'
    GROUP BY ALL
)
