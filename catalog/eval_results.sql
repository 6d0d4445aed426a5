-- One row per evaluation answer: the held-out prompt, the answer, its reward and its exact
-- correctness (null where no reward source checks answers), per run and iteration (-1:
-- before the first iteration). catalog/connection.py fills in {correct}.
--   SELECT iteration, avg(correct) FROM eval_results WHERE run_id = ? GROUP BY 1 ORDER BY 1
CREATE OR REPLACE VIEW eval_results AS
SELECT s.run_id, s.iteration, s.datasource, s.prompt_id, s.sample_idx, s.prompt, s.response,
       s.label, s.response_len, s.finish_reason, r.reward, {correct} AS correct
FROM eval_samples s
JOIN eval_scores r USING (run_id, iteration, prompt_id, sample_idx)
