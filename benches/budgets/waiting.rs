//! The `waiting` section (issue 26): expected start computed from the store at 10,000 nodes
//! (2,000 queued groups of 5, a wait history of 10,000 succeeded groups), and the AdminComment
//! refresh at 1,000 waiting jobs (scontrol calls per refresh, refresh interval).

use crate::table::{Samples, Table};
use chrono::{Duration, Utc};
use slurm_dws::model::{GceRequestState, Request, RequestPhase};
use slurm_dws::reconcile::slurm_edge::admin_comment;
use slurm_dws::reconcile::types::Desired;
use slurm_dws::store::{Store, WaitsCache};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

pub fn run(_ctx: &crate::Ctx, t: &mut Table) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    if let Err(e) = rt.block_on(measure(t)) {
        t.failed("waiting section", &e, "issue 26 budgets");
    }
}

fn request(id: i64, queued: bool, now: chrono::DateTime<Utc>) -> Request {
    Request {
        id,
        nodeset: "a".into(),
        job_id: Some(id as u32),
        tag: format!("{id:08x}"),
        mig: format!("hpc-a-j{id}-{id:08x}"),
        name: format!("rr-{id:08x}"),
        nodes: (0..5).map(|i| format!("hpc-a-{}", id * 5 + i)).collect(),
        run_duration: 3600 + (id as u64 % 4) * 600,
        phase: if queued { RequestPhase::Active } else { RequestPhase::Succeeded },
        gce_state: Some(if queued { GceRequestState::Accepted } else { GceRequestState::Succeeded }),
        created_at: now - Duration::seconds(60 + id % 7200),
        updated_at: now,
        last_error: None,
        zone_choice: None,
        zone: None,
    }
}

async fn measure(t: &mut Table) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let text = format!(
        "cluster_name = \"hpc\"\nstate_dir = \"{}\"\n[gcp]\nproject = \"p\"\nregion = \"us-east5\"\n\
         [[nodeset]]\nname = \"a\"\ninstance_template = \"projects/p/global/instanceTemplates/t\"\n\
         zones = [\"us-east5-a\"]\nnode_count_dynamic_max = 10000\n",
        dir.path().join("state").display()
    );
    let cfg =
        slurm_dws::config::Config::from_toml_str(&text, "bench.toml".as_ref()).map_err(|e| e.to_string())?;
    let store = Store::open(&dir.path().join("state")).await.map_err(|e| e.to_string())?;
    let now = Utc::now();
    // 10,000 succeeded groups on record (the wait history).
    let mut tx = store.begin().await.map_err(|e| e.to_string())?;
    for id in 0..10_000 {
        tx.record_wait(&request(100_000 + id, false, now - Duration::seconds(id)), now)
            .await
            .map_err(|e| e.to_string())?;
    }
    tx.commit().await.map_err(|e| e.to_string())?;
    let mut desired = Desired::default();
    for id in 0..2_000 {
        desired.requests.insert(id, request(id, true, now));
    }
    // As the daemon does it: the history is read through its cache (whole when it changed, else
    // one COUNT/MAX row), then every queued group's line.
    let mut cache = WaitsCache::default();
    let t0 = Instant::now();
    cache.get(&store).await.map_err(|e| e.to_string())?;
    let first_read = t0.elapsed();
    let mut s = Samples::default();
    let mut lines = BTreeMap::new();
    for _ in 0..20 {
        let t0 = Instant::now();
        let waits = cache.get(&store).await.map_err(|e| e.to_string())?;
        lines = admin_comment::wanted(&cfg, &desired, waits, &BTreeMap::new(), now);
        s.push(t0.elapsed());
    }
    t.timed(
        "expected start, 2,000 queued groups (10,000 nodes), history of 10,000: a pass (store check + lines)",
        &s,
        Some(10.0),
        None,
    );
    let mut once = Samples::default();
    once.push(first_read);
    t.timed(
        "expected start: reading the whole history of 10,000 (at start, and after a prune; a success reads only its own row)",
        &once,
        None,
        None,
    );
    // AdminComment refresh at 1,000 waiting jobs.
    let wanted: BTreeMap<u32, String> = lines.into_iter().take(1_000).collect();
    let (first, _) = admin_comment::due(&BTreeMap::new(), &BTreeSet::new(), None, &wanted, 300, now);
    t.count(
        "AdminComment: scontrol calls in a refresh, 1,000 waiting jobs",
        first.len() as f64,
        "-",
        Some(1_000.0),
        "≤ 1,000",
    );
    let written: BTreeMap<u32, String> = wanted.iter().map(|(j, l)| (*j, format!("{l} (older)"))).collect();
    let (early, refreshed) =
        admin_comment::due(&written, &BTreeSet::new(), Some(now), &wanted, 300, now + Duration::seconds(299));
    t.count(
        "AdminComment: calls 299 s after a refresh (every line changed)",
        early.len() as f64 + if refreshed { 1.0 } else { 0.0 },
        "-",
        Some(0.0),
        "0 (≥ 5 min between refreshes)",
    );
    Ok(())
}
