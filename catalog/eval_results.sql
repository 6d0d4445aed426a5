-- One row per evaluation answer: the held-out prompt, the answer, its reward and its exact
-- correctness (null where no reward source checks answers), per run and iteration (-1:
-- before the first iteration). catalog/connection.py fills in {correct}. `scope`: the
-- subflow (`alignflow.scope`) the evaluation ran in ('' outside one); a run with two
-- evaluated scopes pairs each answer with its own scope's score, never the other's.
--   SELECT iteration, avg(correct) FROM eval_results WHERE run_id = ? GROUP BY 1 ORDER BY 1
CREATE OR REPLACE VIEW eval_results AS
SELECT s.run_id, s.iteration, s.datasource, s.prompt_id, s.sample_idx, s.prompt, s.response,
       s.label, s.response_len, s.finish_reason, r.reward, {correct} AS correct,
       regexp_extract(s.task_key, '^(.*/)?(start|iter-[0-9]+)/[^/]+$', 1) AS scope
FROM eval_samples s
JOIN eval_scores r ON r.run_id = s.run_id AND r.iteration = s.iteration
  AND r.prompt_id = s.prompt_id AND r.sample_idx = s.sample_idx
  AND regexp_replace(r.task_key, '[^/]*$', '') = regexp_replace(s.task_key, '[^/]*$', '')
