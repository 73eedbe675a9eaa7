-- Where GCE put a request group's VMs: the zone of its first VMs a pass lists (those its MIG
-- created), several zones joined with "," in sorted order (a MIG whose targetShape lets GCE spread
-- them). NULL while none was seen (queued, or the group never got a VM). Written by the planner
-- with the group's other fields (`requests --json` prints it as `zone`); kept once the group
-- succeeded.
ALTER TABLE requests ADD COLUMN zone TEXT;
