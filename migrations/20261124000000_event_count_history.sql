-- Identical events of one pass are one row with a count (a pass's events all carry its one clock read,
-- so "identical" is: same time, kind, nodes and message).
ALTER TABLE events ADD COLUMN count INTEGER NOT NULL DEFAULT 1;
CREATE INDEX events_same ON events (time, kind, nodes);

-- History retention (daemon.history_days) deletes old events with their event_nodes rows by event id.
CREATE INDEX event_nodes_event ON event_nodes (event_id);
