-- One row per run, from runs/<run_id>/run.json (read by manifests.py into _af_runs).
CREATE OR REPLACE VIEW runs AS
SELECT
    run_id,
    flow,
    status,
    seed,
    parent_run,
    code_version,
    make_timestamp(CAST(started * 1e6 AS BIGINT)) AS started,
    make_timestamp(CAST(ended * 1e6 AS BIGINT)) AS ended,
    ended - started AS duration,
    error,
    CAST(config AS JSON) AS config
FROM _af_runs
