-- A data table no manifest has written yet: the right columns, no rows.
CREATE OR REPLACE VIEW {name} AS
SELECT * FROM {source}
