-- One row per run, from runs/<run_id>/run.json (read by manifests.py into _af_runs).
-- `started` is the run's creation time (run.json `created`); `code_version` the git commit
-- of the flow's code (else `sha256:` of its file), `code` everything the engine recorded.
-- `problem` names the run's files the catalog had to leave out (corrupt JSON or Parquet).
-- `duration`: the seconds its drivers ran (run.json `active`), so the time a run sat
-- interrupted before a resume is not counted; ended - started for runs without it.
-- `drivers`: how many drives the run has had (> 1: interrupted and resumed; NULL: older runs).
-- `given`: the config keys the user set and where ({"rollout.batch_size": "--set ..."}).
-- `simulated` is `NxG` for a run rehearsed on a simulated GPU cluster (fake GPUs), else NULL.
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
    coalesce(active, ended - started) AS duration,  -- driven time: not while interrupted
    error,
    CAST(config AS JSON) AS config,
    CAST(code AS JSON) AS code,
    problem,
    simulated,
    drivers,
    CAST(given AS JSON) AS given
FROM _af_runs
