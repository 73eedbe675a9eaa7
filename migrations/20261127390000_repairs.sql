-- Node repairs (`slurm-dws repair`, or a drain reason `repair ...`): the asks the daemon recorded
-- and a pass has not taken yet, and each node's last repair (one row a node).
CREATE TABLE repair_asks (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    received_at  INTEGER NOT NULL,
    node         TEXT    NOT NULL,
    behavior     TEXT    NOT NULL,
    description  TEXT    NOT NULL DEFAULT '',
    processed_at INTEGER
);
CREATE INDEX repair_asks_unprocessed ON repair_asks (id) WHERE processed_at IS NULL;

CREATE TABLE repairs (
    node         TEXT    PRIMARY KEY,
    behavior     TEXT    NOT NULL,
    description  TEXT    NOT NULL DEFAULT '',
    source       TEXT    NOT NULL,
    phase        TEXT    NOT NULL,
    requested_at INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    outcome      TEXT
);
