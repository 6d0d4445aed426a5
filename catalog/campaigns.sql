-- Campaign lineage (artifacts/lineage.py): one row per campaign round, and one per campaign.
-- `rounds`: which round run trained from which policy on how many new files, its gate
-- scores, and whether it was promoted; join `campaign_inputs` on (run_id, round) for the
-- files and `rollouts` on run_id = round_run for the batches a policy version produced.
CREATE OR REPLACE VIEW rounds AS
SELECT
    r.run_id AS campaign_run,
    r.round,
    make_timestamp(CAST(r.due * 1e6 AS BIGINT)) AS due,
    r.status,
    r.round_run,
    rr.status AS round_run_status,
    r.inputs,
    r.skipped_due_times,
    r.policy_in_version,
    r.policy_in,
    r.candidate,
    r.metric,
    r.candidate_score,
    r.incumbent_score,
    r.promoted,
    r.policy_out_version,
    r.policy_out,
    r.eval_iteration
FROM campaign_rounds r LEFT JOIN runs rr ON rr.run_id = r.round_run;

CREATE OR REPLACE VIEW campaigns AS
SELECT
    c.run_id,
    json_extract_string(c.config, '$.fields.name') AS name,
    json_extract_string(c.config, '$.fields.flow') AS round_flow,
    c.status,
    c.started,
    count(r.round) AS rounds,
    count(*) FILTER (WHERE r.promoted) AS promotions,
    coalesce(max(r.policy_out_version), 0) AS policy_version,
    arg_max(r.policy_out, r.round) AS current_policy,
    max(r.due) AS last_due
FROM runs c LEFT JOIN rounds r ON r.campaign_run = c.run_id
WHERE c.flow = 'campaign'
GROUP BY ALL;
