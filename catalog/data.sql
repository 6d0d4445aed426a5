-- A data table over the Parquet files that committed manifests list, never a glob.
-- catalog/connection.py fills in {name}, {files} (a quoted list) and {hive} (true/false).
CREATE OR REPLACE VIEW {name} AS
SELECT *
FROM read_parquet({files}, union_by_name = true, hive_partitioning = {hive})
