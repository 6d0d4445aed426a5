-- One row per committed task manifest (runs/<run_id>/tasks/<task_key>.json).
-- Times: queued (handed to a worker), started / ended (the body), settled (its background
-- work, e.g. a checkpoint, was durable; the manifest is committed then).
CREATE OR REPLACE VIEW tasks AS
SELECT
    run_id,
    task_key,
    task,
    version,
    status,
    attempts,
    make_timestamp(CAST(queued * 1e6 AS BIGINT)) AS queued,
    make_timestamp(CAST(started * 1e6 AS BIGINT)) AS started,
    make_timestamp(CAST(ended * 1e6 AS BIGINT)) AS ended,
    t.started - t.queued AS queue_time,  -- handed to a worker -> its body starts (NULL: older runs)
    t.ended - t.started AS duration,   -- the body's run time
    t.settled - t.ended AS settle_time,  -- background work after the body (a checkpoint write)
    CAST(output AS JSON) AS output,
    rows,
    seed,
    code_hash,
    input_hash,
    worker,
    checkpoint,
    CAST(artifacts AS JSON) AS artifacts,
    manifest
FROM _af_tasks AS t
