CREATE TABLE s AS SELECT * FROM StringIds; DROP TABLE StringIds;
CREATE VIEW StringIds AS WITH RECURSIVE c(id, value) AS (SELECT id, value FROM s UNION ALL SELECT id + 1, value FROM c) SELECT id, value FROM c;
