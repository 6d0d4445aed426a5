-- One row per committed task manifest (runs/<run_id>/tasks/<task_key>.json).
CREATE OR REPLACE VIEW tasks AS
SELECT
    run_id,
    task_key,
    task,
    version,
    status,
    attempts,
    make_timestamp(CAST(started * 1e6 AS BIGINT)) AS started,
    make_timestamp(CAST(ended * 1e6 AS BIGINT)) AS ended,
    ended - started AS duration,
    CAST(output AS JSON) AS output,
    rows,
    seed,
    code_hash,
    input_hash,
    worker,
    checkpoint,
    CAST(artifacts AS JSON) AS artifacts,
    manifest
FROM _af_tasks
