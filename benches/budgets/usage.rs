//! The `usage` section (issue 41): `slurm-dws usage` over 30 days of history at 10,000 nodes, budget
//! under a second. The store is made through the store's own writes, as the daemon records usage:
//! nodes whose VMs come and go (lives of 6 h to 3 days, gaps of up to 12 h; a tenth of the nodes
//! static, one VM the whole month), one to three jobs of 20 users in 5 accounts on each VM, on flex,
//! spot and standard nodesets; then the report is made the way the command makes it (the store's
//! reads and the pure report) in this process, and by the binary itself (`usage --since 30d --json`,
//! by every key: by job prints a row per job, ~225,000 here, the slowest).
//!
//! Measured (release profile without LTO, 16 codegen units; 2 shared CPUs, load ~3): at 05dedd7 the
//! reads took 1.1–1.2 s, the command by nodeset 1.36 s; after the scan in rowid chunks, the interned
//! rows and the report without a `String` per span, reads 0.22 s, the command 0.41–0.52 s by every
//! key but job, 0.91 s by job.
//!
//! 2026-11-28 (fat LTO, alone): by job 821–1069 ms over three runs, its page faults a fifth of
//! the time (132k: jemalloc returned every freed page at once, the daemon's setting). With every
//! command but the daemon keeping freed pages for 10 s (`src/main.rs`): 69k faults, by job 649 ms,
//! the other keys 231–297 ms (330–490 before).
//!
//! 2026-11-28, later (fat LTO): a full `make bench` had by job at 960 ms (837–1149) on a loaded
//! machine. A profile of the command by job (`perf --call-graph dwarf`): the store's reads 18% of
//! the samples, the report 32% (the rows' map growing through every power of two, a `BTreeSet` per
//! row for its unpriced pairs, the rows moved while sorted), the JSON 21% (serde's pretty printer,
//! 65 MB for 225,317 rows), page faults throughout. With the map sized by job, the unpriced pairs
//! as bits and the keys sorted with an index (1882460), over ten alternating runs on one database
//! and an absolute period (byte-identical output): CPU 624–950 ms before, 630–877 after (the
//! machine's swing is larger than the change); peak RSS 204–217 MB before, 191–205 after; minor
//! faults 69k before, 64k after. What is left is the reads, serde's printer and the output's size.

use crate::table::{Samples, Table};
use chrono::{DateTime, Duration, Utc};
use slurm_dws::config::Pricing;
use slurm_dws::store::Store;
use slurm_dws::usage::pricing::CatalogState;
use slurm_dws::usage::report::report_spans;
use slurm_dws::usage::{By, JobSpan, Period, PriceBook, VmSpan};
use std::time::Instant;

const NODES: u32 = 10_000;
const DAYS: i64 = 30;
const NODESETS: [(&str, &str); 5] =
    [("a", "flex"), ("b", "flex"), ("c", "spot"), ("d", "standard"), ("e", "flex")];

pub fn run(ctx: &crate::Ctx, t: &mut Table) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    if let Err(e) = rt.block_on(measure(ctx, t)) {
        t.failed("usage section", &e, "issue 41 budgets");
    }
}

/// A small deterministic generator (xorshift), so every run builds the same history.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Minutes in `[lo, hi)` hours.
    fn minutes(&mut self, lo: i64, hi: i64) -> i64 {
        lo * 60 + (self.next() % ((hi - lo) as u64 * 60)) as i64
    }
}

/// 30 days of VMs and jobs on 10,000 nodes ending at `now`.
pub fn history(now: DateTime<Utc>) -> (Vec<VmSpan>, Vec<JobSpan>) {
    let start = now - Duration::days(DAYS);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut vms, mut jobs) = (Vec::new(), Vec::new());
    let mut job_id = 1u64;
    for n in 0..NODES {
        let (nodeset, model) = NODESETS[(n % NODESETS.len() as u32) as usize];
        let node = format!("hpc-{nodeset}-{}", n / NODESETS.len() as u32);
        let is_static = n % 10 == 0;
        let mut at = start + Duration::minutes(rng.minutes(0, 12));
        let mut k = 0;
        while at < now {
            let life = if is_static { DAYS * 24 * 60 } else { rng.minutes(6, 72) };
            let end = at + Duration::minutes(life);
            let made_for = (!is_static).then_some(job_id);
            // Jobs on it: the first a few minutes after boot, then one after another with gaps.
            let mut j_at = at + Duration::minutes(3 + (rng.next() % 10) as i64);
            for _ in 0..(1 + rng.next() % 3) {
                let len = Duration::minutes(rng.minutes(1, 24));
                if j_at + len > end {
                    break;
                }
                let user = rng.next() % 20;
                jobs.push(JobSpan {
                    job_id,
                    node: node.clone(),
                    user: format!("user{user}"),
                    account: format!("acct{}", user % 5),
                    partition: nodeset.to_string(),
                    started_at: j_at,
                    ended_at: (j_at + len < now).then_some(j_at + len),
                });
                job_id += 1;
                j_at = j_at + len + Duration::minutes(rng.minutes(0, 2));
            }
            vms.push(VmSpan {
                instance_id: format!("{n}-{k}"),
                vm: format!("{node}-{k:04x}"),
                node: node.clone(),
                nodeset: nodeset.to_string(),
                model: model.to_string(),
                machine_type: "a3-ultragpu-8g".into(),
                gpus: 8,
                job_id: made_for,
                created_at: at,
                last_seen: end.min(now),
                deleted_at: (end < now).then_some(end),
            });
            k += 1;
            at = end + Duration::minutes(rng.minutes(0, 12));
        }
    }
    (vms, jobs)
}

async fn measure(ctx: &crate::Ctx, t: &mut Table) -> Result<(), String> {
    let e = |e: slurm_dws::store::StoreError| e.to_string();
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let state = dir.path().join("state");
    let now = Utc::now();
    let (vms, jobs) = history(now);
    let store = Store::open_for_daemon(&state).await.map_err(e)?;
    let mut tx = store.begin().await.map_err(e)?;
    tx.usage_seen(now - Duration::days(DAYS)).await.map_err(e)?;
    tx.open_vm_spans(&vms).await.map_err(e)?;
    tx.open_job_spans(&jobs).await.map_err(e)?;
    tx.usage_seen(now).await.map_err(e)?;
    tx.commit().await.map_err(e)?;
    t.note(format!(
        "usage: 30 days at {NODES} nodes: {} VM spans, {} job spans ({} MB database)",
        vms.len(),
        jobs.len(),
        std::fs::metadata(state.join(slurm_dws::store::DB_FILE)).map_or(0, |m| m.len() >> 20)
    ));
    let mut pricing = Pricing::default();
    pricing.per_hour.insert(
        "a3-ultragpu-8g".into(),
        slurm_dws::config::MachinePrices {
            flex: slurm_dws::config::HourPrice::new(40.0),
            spot: slurm_dws::config::HourPrice::new(30.0),
            standard: slurm_dws::config::HourPrice::new(85.0),
            reservation: None,
        },
    );
    let prices = PriceBook::new(&pricing, Err(CatalogState::NotAsked));
    let period = Period { since: now - Duration::days(DAYS), until: now };
    // In this process: the store's reads, then the report, by nodeset and by user.
    for by in [By::Nodeset, By::User] {
        let (mut read, mut whole) = (Samples::default(), Samples::default());
        for _ in 0..3 {
            let t0 = Instant::now();
            let spans = store.usage_spans(period.since, period.until).await.map_err(e)?;
            let waits = store.request_waits().await.map_err(e)?;
            read.push(t0.elapsed());
            let r = report_spans(&spans, period, now, by, &prices);
            let _ = slurm_dws::usage::report::queue_times(&waits, period);
            whole.push(t0.elapsed());
            if r.vms == 0 || r.total.cost.is_none() {
                return Err(format!("the report counted nothing: {:?}", r.total));
            }
        }
        t.timed(
            &format!("usage: store reads of 30 days, 10,000 nodes (by {})", by.as_str()),
            &read,
            None,
            None,
        );
        t.timed(
            &format!("usage: report over 30 days at 10,000 nodes, reads + report (by {})", by.as_str()),
            &whole,
            Some(1000.0),
            None,
        );
    }
    // The command itself, as an admin runs it, by every key (by job prints a row per job).
    let config = crate::write_config(dir.path(), "http://127.0.0.1:9/compute/v1/", NODES, "");
    for by in By::ALL {
        let mut cmd = Samples::default();
        for _ in 0..3 {
            let t0 = Instant::now();
            let out = std::process::Command::new(&ctx.bin)
                .arg("--config")
                .arg(&config)
                .args(["usage", "--since", "30d", "--json", "--by", by.as_str()])
                .output()
                .map_err(|e| e.to_string())?;
            cmd.push(t0.elapsed());
            if !out.status.success() {
                return Err(format!(
                    "usage exited {:?}: {}",
                    out.status.code(),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        t.timed(
            &format!(
                "usage: `slurm-dws usage --since 30d --json --by {}`, 30 days at 10,000 nodes (whole process)",
                by.as_str()
            ),
            &cmd,
            Some(1000.0),
            None,
        );
    }
    Ok(())
}
