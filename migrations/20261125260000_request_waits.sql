-- How long each resize-request group waited for capacity: one row per group that SUCCEEDED, written
-- in the commit that first records it succeeded. The expected-start estimates (`waiting.rs`) read it.
CREATE TABLE request_waits (
    request_id   INTEGER PRIMARY KEY,
    nodeset      TEXT    NOT NULL,
    size         INTEGER NOT NULL,
    run_duration INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    succeeded_at INTEGER NOT NULL
);
CREATE INDEX request_waits_nodeset ON request_waits (nodeset, succeeded_at);
