-- Outbox entries closed as 'failed' (GCE acted and the Operation failed): each step's recent failures
-- are counted from them every pass, to back off and cap its attempts (src/reconcile/step_retry.rs).
CREATE INDEX outbox_by_step ON outbox (kind, target, id);
CREATE INDEX outbox_failed ON outbox (kind, target) WHERE state = 'failed';
