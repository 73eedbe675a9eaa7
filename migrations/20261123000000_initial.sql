-- The initial schema of the slurm-dws state store. Times are integer milliseconds since the Unix epoch (UTC).

-- Requests recorded by the hooks, waiting for the daemon. One row per hook call: a hook must commit in
-- milliseconds, so it records the expression as Slurm gave it and the daemon expands it.
CREATE TABLE inbox (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    received_at  INTEGER NOT NULL,
    kind         TEXT    NOT NULL CHECK (kind IN ('resume', 'suspend', 'resume_fail')),
    hostlist     TEXT    NOT NULL,
    jobs         TEXT    NOT NULL DEFAULT '[]',  -- JSON [[job_id, hostlist], ...]
    processed_at INTEGER
);
CREATE INDEX inbox_unprocessed ON inbox (id) WHERE processed_at IS NULL;

-- Resize-request groups: one MIG and one resize request for the nodes of one (nodeset, job) chunk.
CREATE TABLE requests (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    nodeset      TEXT    NOT NULL,
    job_id       INTEGER,
    tag          TEXT    NOT NULL UNIQUE,
    mig          TEXT    NOT NULL UNIQUE,
    name         TEXT    NOT NULL,
    nodes        TEXT    NOT NULL,               -- JSON array of node names
    run_duration INTEGER NOT NULL,
    phase        TEXT    NOT NULL,
    gce_state    TEXT,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    last_error   TEXT
);
CREATE INDEX requests_open ON requests (phase) WHERE phase NOT IN ('done');

-- Every node slurm-dws has touched, plus every static node.
CREATE TABLE nodes (
    name             TEXT    PRIMARY KEY,
    nodeset          TEXT    NOT NULL,
    idx              INTEGER NOT NULL,
    is_static        INTEGER NOT NULL,
    state            TEXT    NOT NULL,
    job_id           INTEGER,
    request_id       INTEGER REFERENCES requests (id),
    mig              TEXT,
    vm_status        TEXT,
    termination_time INTEGER,
    last_error       TEXT,
    reservation      TEXT,
    state_since      INTEGER NOT NULL
);
CREATE INDEX nodes_request ON nodes (request_id);

-- MIGs slurm-dws owns (or is creating).
CREATE TABLE migs (
    name        TEXT    PRIMARY KEY,
    nodeset     TEXT    NOT NULL,
    region      TEXT    NOT NULL,
    target_size INTEGER NOT NULL DEFAULT 0,
    state       TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    empty_since INTEGER
);

-- Intended GCE mutations, each written with its requestId BEFORE it is sent, so a crash resends the same one.
CREATE TABLE outbox (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id  TEXT    NOT NULL UNIQUE,
    kind        TEXT    NOT NULL,
    target      TEXT    NOT NULL,
    payload     TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    last_error  TEXT
);
CREATE INDEX outbox_pending ON outbox (kind, target) WHERE state = 'pending';

-- The append-only event log.
CREATE TABLE events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    time    INTEGER NOT NULL,
    kind    TEXT    NOT NULL,
    nodes   TEXT    NOT NULL DEFAULT '',
    message TEXT    NOT NULL
);
CREATE INDEX events_time ON events (time);

-- One row per node per event, so `events --node N` and `explain N` find a node inside a hostlist.
CREATE TABLE event_nodes (
    event_id INTEGER NOT NULL REFERENCES events (id),
    node     TEXT    NOT NULL
);
CREATE INDEX event_nodes_node ON event_nodes (node, event_id);

-- Per-nodeset capacity backoffs.
CREATE TABLE backoffs (
    nodeset TEXT    PRIMARY KEY,
    until   INTEGER NOT NULL,
    level   INTEGER NOT NULL,
    reason  TEXT    NOT NULL
);

-- Small named values: the last pass report, the daemon's identity, ...
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
