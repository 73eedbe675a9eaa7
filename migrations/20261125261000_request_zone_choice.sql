-- The zone(s) capacity advice chose for a request group's MIG (`capacity_advice.rs`): JSON
-- `{"zones": [...], "obtainability": 0.82, "why": "..."}`, NULL when advice was not asked.
ALTER TABLE requests ADD COLUMN zone_choice TEXT;
