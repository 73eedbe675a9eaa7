-- A nodeset's backoff is kept after its time is over, for its level (the exponent), until a request
-- of the nodeset succeeds: `ended` says its end was announced (event backoff_ended).
ALTER TABLE backoffs ADD COLUMN ended INTEGER NOT NULL DEFAULT 0;
