-- The maintenance GCE announced for each node's VM (`resourceStatus.upcomingMaintenance`, as GCE's
-- own JSON: type, windowStartTime, windowEndTime, latestWindowStartTime, canReschedule,
-- maintenanceStatus, maintenanceReasons), written by the pass that lists the VM (from the instance
-- list every pass already reads: no per-node call); NULL while none is announced. The node's
-- `slurm-dws-maint-{node}` reservation covers this window; `explain` shows it.
ALTER TABLE nodes ADD COLUMN maintenance TEXT;
