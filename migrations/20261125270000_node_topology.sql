-- Where each node's VM runs: GCE's `resourceStatus.physicalHostTopology` as
-- `CLUSTER/BLOCK/SUBBLOCK/HOST`, written by the pass that lists the VM (from the instance list every
-- pass already reads: no per-node call), NULL while the node has no VM or GCE reports no physical
-- host (a MIG without a workload policy). `nodes --json` prints it as `topology`; `explain` names
-- its block. Nothing else in the schema changes: the hooks write only `inbox`.
ALTER TABLE nodes ADD COLUMN topology TEXT;
