-- Usage and cost (`slurm-dws usage`, the vm/gpu seconds metrics): the life of every VM that ran for
-- one of our nodes, as GCE reports it, and the time each job ran on each of our nodes, with who ran
-- it. Kept `daemon.history_days`, like the events.

-- One row per VM (GCE's instance id tells two VMs of one name apart).
CREATE TABLE vm_spans (
    instance_id  TEXT    PRIMARY KEY,           -- GCE's `id` of the instance
    vm           TEXT    NOT NULL,              -- the instance's name
    node         TEXT    NOT NULL,
    nodeset      TEXT    NOT NULL,
    model        TEXT    NOT NULL CHECK (model IN ('flex', 'standard', 'spot', 'reservation')),
    machine_type TEXT    NOT NULL,              -- bare name, e.g. a3-ultragpu-8g
    gpus         INTEGER NOT NULL,              -- GPUs of one such VM
    job_id       INTEGER,                       -- the job its resize request was made for (NULL: static)
    created_at   INTEGER NOT NULL,              -- GCE's creationTimestamp
    last_seen    INTEGER NOT NULL,              -- the last pass that saw it
    deleted_at   INTEGER                        -- NULL while it lives: the first pass not to see it
);
CREATE INDEX vm_spans_created ON vm_spans (created_at);
CREATE INDEX vm_spans_open ON vm_spans (node) WHERE deleted_at IS NULL;

-- One row per (job, node): the time the job ran on the node (busy time).
CREATE TABLE job_spans (
    job_id       INTEGER NOT NULL,
    node         TEXT    NOT NULL,
    user         TEXT    NOT NULL,
    account      TEXT    NOT NULL,
    partition    TEXT    NOT NULL,
    started_at   INTEGER NOT NULL,
    ended_at     INTEGER,                       -- NULL while it runs
    PRIMARY KEY (job_id, node, started_at)
);
CREATE INDEX job_spans_started ON job_spans (started_at);
CREATE INDEX job_spans_open ON job_spans (node) WHERE ended_at IS NULL;
