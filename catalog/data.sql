-- A data table over the Parquet files that committed manifests list, never a glob.
-- catalog/connection.py fills in {name}, {files} (a quoted list), {hive}
-- and {union} (true/false; union_by_name false only when every file has the same columns).
CREATE OR REPLACE VIEW {name} AS
SELECT *
FROM read_parquet({files}, union_by_name = {union}, hive_partitioning = {hive})
