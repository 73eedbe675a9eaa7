//! The state store on real SQLite files: migrations, every query and mutation read back, rollback, hooks
//! and the daemon writing at once, and processes SIGKILLed in the middle of write transactions.
//!
//! The crash tests re-execute this test binary as the writer (`crash_child`, selected by an environment
//! variable) so the process that dies is a real one, with nothing of the parent's state. The seed of the
//! kill schedule is printed; `SLURM_DWS_TEST_SEED=N` replays it.

// SQLite's locks and busy timeout, writer threads and SIGKILLed child processes all run in real time.
#![allow(clippy::disallowed_methods)]

use chrono::{DateTime, Duration, TimeZone, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use slurm_dws::model::*;
use slurm_dws::store::{Store, StoreError, DB_FILE, SCHEMA_VERSION};
use sqlx::{Connection, Row, SqliteConnection};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Instant;

/// A fixed instant plus `secs`: stored times are milliseconds, so tests use whole milliseconds too.
fn at(secs: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 23, 12, 0, 0).unwrap() + Duration::seconds(secs)
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// A raw connection to the database file, for what the store API does not show (schema, pragmas).
async fn raw(path: &Path) -> SqliteConnection {
    SqliteConnection::connect(&format!("sqlite://{}", path.display())).await.unwrap()
}

async fn table_names(path: &Path) -> BTreeSet<String> {
    let mut c = raw(path).await;
    let rows =
        sqlx::query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
            .fetch_all(&mut c)
            .await
            .unwrap();
    rows.iter().map(|r| r.get::<String, _>(0)).collect()
}

async fn recorded_versions(path: &Path) -> Vec<i64> {
    let mut c = raw(path).await;
    sqlx::query("SELECT version FROM schema_migrations ORDER BY version")
        .fetch_all(&mut c)
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// The versions of the files in `migrations/` (their timestamp prefix).
fn migration_files() -> Vec<i64> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let mut v: Vec<i64> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".sql"))
        .map(|n| n.split('_').next().unwrap().parse().unwrap())
        .collect();
    v.sort();
    v
}

async fn integrity_check(path: &Path) {
    let mut c = raw(path).await;
    let ok: String = sqlx::query("PRAGMA integrity_check").fetch_one(&mut c).await.unwrap().get(0);
    assert_eq!(ok, "ok", "integrity_check of {}", path.display());
    let fk = sqlx::query("PRAGMA foreign_key_check").fetch_all(&mut c).await.unwrap();
    assert!(fk.is_empty(), "foreign_key_check of {}: {} violations", path.display(), fk.len());
}

fn node(nodeset: &str, index: u32) -> Node {
    slurm_dws::reconcile::plan::new_node(&format!("c-{nodeset}-{index}"), nodeset, index, false, at(0))
}

/// Runs `f` on a runtime of its own: a hook is its own process, with its own runtime.
fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

// ---- migrations and the files ---------------------------------------------------------------------------

#[tokio::test]
async fn open_creates_schema_private_files_and_reopen_is_a_noop() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state").join("slurm-dws");
    let store = Store::open(&dir).await.unwrap();
    let db = dir.join(DB_FILE);
    assert_eq!(store.path(), db);

    assert_eq!(mode(&dir), 0o700, "state directory");
    assert_eq!(mode(&db), 0o600, "database file");
    for side in ["slurm-dws.db-wal", "slurm-dws.db-shm"] {
        let p = dir.join(side);
        if p.exists() {
            assert_eq!(mode(&p), 0o600, "{side}");
        }
    }

    let expected: BTreeSet<String> = [
        "inbox",
        "requests",
        "nodes",
        "migs",
        "outbox",
        "events",
        "event_nodes",
        "backoffs",
        "meta",
        "request_waits",
        "repair_asks",
        "repairs",
        "vm_spans",
        "job_spans",
        "schema_migrations",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(table_names(&db).await, expected);
    let files = migration_files();
    assert_eq!(recorded_versions(&db).await, files, "every file of migrations/ applied, once");
    assert_eq!(SCHEMA_VERSION, *files.last().unwrap(), "SCHEMA_VERSION is the newest migration file");

    let mut c = raw(&db).await;
    let journal: String = sqlx::query("PRAGMA journal_mode").fetch_one(&mut c).await.unwrap().get(0);
    assert_eq!(journal, "wal");
    drop(c);

    let mut tx = store.begin().await.unwrap();
    tx.set_meta("kept", "yes").await.unwrap();
    tx.commit().await.unwrap();
    store.close().await;

    // Reopen (both ways): nothing applied twice, nothing lost, permissions kept.
    for hook in [false, true] {
        let store = if hook { Store::open_for_hook(&dir).await } else { Store::open(&dir).await }.unwrap();
        assert_eq!(store.meta("kept").await.unwrap().as_deref(), Some("yes"));
        assert_eq!(recorded_versions(&db).await, files);
        assert_eq!(mode(&db), 0o600);
        store.close().await;
    }
}

#[tokio::test]
async fn open_on_an_empty_file_creates_the_schema() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join(DB_FILE);
    std::fs::write(&db, b"").unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();

    let store = Store::open_for_hook(tmp.path()).await.unwrap();
    assert_eq!(recorded_versions(&db).await, migration_files());
    assert_eq!(mode(&db), 0o600, "an existing file is tightened");
    assert_eq!(mode(tmp.path()), 0o700, "an existing directory is tightened");
    assert_eq!(store.inbox_depth().await.unwrap(), 0);
    store.close().await;
}

#[tokio::test]
async fn concurrent_first_opens_apply_the_migrations_once() {
    // A fresh database each round: the race is in the first open (switching the new file to WAL).
    for round in 0..10 {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state");
        let opens: Vec<_> = (0..6)
            .map(|i| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    block_on(async move {
                        let store = if i % 2 == 0 {
                            Store::open(&dir).await
                        } else {
                            Store::open_for_hook(&dir).await
                        }?;
                        store.record_hook(HookKind::Resume, &format!("n-{i}"), &[], None, at(i)).await?;
                        store.close().await;
                        Ok::<_, StoreError>(())
                    })
                })
            })
            .collect();
        for o in opens {
            o.join().unwrap().unwrap_or_else(|e| panic!("round {round}: {e}"));
        }
        assert_eq!(recorded_versions(&dir.join(DB_FILE)).await, migration_files(), "round {round}");
        let store = Store::open(&dir).await.unwrap();
        assert_eq!(store.inbox_depth().await.unwrap(), 6);
        store.close().await;
    }
}

#[tokio::test]
async fn only_the_daemon_migrates_an_older_schema_and_a_newer_hook_still_records() {
    // The database of the first release: its schema is the first migration alone (as after installing
    // a new slurm-dws while the old daemon still runs on it).
    let versions = migration_files();
    assert!(versions.len() >= 2, "needs a migration after the first: {versions:?}");
    let first = versions[0];
    let first_sql = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(&first.to_string()))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join(DB_FILE);
    let mut c = SqliteConnection::connect(&format!("sqlite://{}?mode=rwc", db.display())).await.unwrap();
    sqlx::raw_sql(&first_sql).execute(&mut c).await.unwrap();
    sqlx::raw_sql("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)")
        .execute(&mut c)
        .await
        .unwrap();
    sqlx::query("INSERT INTO schema_migrations VALUES (?, 'then')")
        .bind(first)
        .execute(&mut c)
        .await
        .unwrap();
    c.close().await.unwrap();
    assert_eq!(recorded_versions(&db).await, [first]);

    // The new hook records into it as it is (a note event too), and migrates nothing; nor does the CLI.
    let hook = Store::open_for_hook(tmp.path()).await.unwrap();
    let id = hook
        .record_hook(HookKind::Resume, "hpc-a-1", &[], Some(("resume_file", "no SLURM_RESUME_FILE")), at(0))
        .await
        .unwrap();
    assert!(id > 0);
    hook.close().await;
    Store::open(tmp.path()).await.unwrap().close().await;
    assert_eq!(recorded_versions(&db).await, [first], "a hook or the CLI migrated the schema");

    // The daemon migrates it, and what the hook recorded is there for it.
    Store::open_for_daemon(tmp.path()).await.unwrap().close().await;
    assert_eq!(recorded_versions(&db).await, versions);
    let mut c = raw(&db).await;
    let inbox: i64 = sqlx::query("SELECT count(*) FROM inbox").fetch_one(&mut c).await.unwrap().get(0);
    let events: i64 = sqlx::query("SELECT count(*) FROM events").fetch_one(&mut c).await.unwrap().get(0);
    assert_eq!((inbox, events), (1, 1));
}

#[tokio::test]
async fn a_newer_schema_is_refused_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path()).await.unwrap();
    store.record_hook(HookKind::Resume, "n-1", &[], None, at(0)).await.unwrap();
    store.close().await;
    let db = tmp.path().join(DB_FILE);
    let newer = SCHEMA_VERSION + 1;
    let mut c = raw(&db).await;
    sqlx::query("INSERT INTO schema_migrations (version, applied_at) VALUES (?, 'later')")
        .bind(newer)
        .execute(&mut c)
        .await
        .unwrap();
    c.close().await.unwrap();
    let before = std::fs::read(&db).unwrap();

    for hook in [false, true] {
        let err = if hook { Store::open_for_hook(tmp.path()).await } else { Store::open(tmp.path()).await }
            .expect_err("a database from a newer slurm-dws must be refused");
        match &err {
            StoreError::SchemaTooNew { path, found, known } => {
                assert_eq!(path, &db);
                assert_eq!(*found, newer);
                assert_eq!(*known, SCHEMA_VERSION);
            }
            other => panic!("expected SchemaTooNew, got {other:?}"),
        }
        let msg = err.to_string();
        assert!(msg.contains(&db.display().to_string()) && msg.contains("upgrade slurm-dws"), "{msg}");
    }
    let mut versions = migration_files();
    versions.push(newer);
    assert_eq!(recorded_versions(&db).await, versions);
    assert_eq!(std::fs::read(&db).unwrap(), before, "the database file is left as it was");
}

#[tokio::test]
async fn a_corrupt_file_is_refused_with_its_name_and_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join(DB_FILE);
    let mut rng = StdRng::seed_from_u64(7);
    let garbage: Vec<u8> = (0..16384).map(|_| rng.gen()).collect();
    std::fs::write(&db, &garbage).unwrap();

    for hook in [false, true] {
        let err = if hook { Store::open_for_hook(tmp.path()).await } else { Store::open(tmp.path()).await }
            .expect_err("garbage must not open");
        assert!(matches!(err, StoreError::Open { .. }), "expected Open, got {err:?}");
        let msg = err.to_string();
        assert!(msg.contains(&db.display().to_string()), "the error names the file: {msg}");
        assert!(msg.contains("not a database"), "the error says what is wrong: {msg}");
    }
    assert_eq!(std::fs::read(&db).unwrap(), garbage, "the file is never overwritten");
}

#[tokio::test]
async fn a_state_dir_that_is_a_file_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let not_dir = tmp.path().join("state");
    std::fs::write(&not_dir, b"x").unwrap();
    let err = Store::open(&not_dir).await.expect_err("a file is not a state directory");
    assert!(matches!(&err, StoreError::Dir { path, .. } if path == &not_dir), "{err:?}");
}

// ---- every query and mutation ---------------------------------------------------------------------------

#[tokio::test]
async fn inbox_record_mark_prune() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open_for_hook(tmp.path()).await.unwrap();
    let jobs = vec![(41u32, "c-gpu-[0-1]".to_string()), (42, "c-gpu-2".to_string())];
    let a = store.record_hook(HookKind::Resume, "c-gpu-[0-2]", &jobs, None, at(1)).await.unwrap();
    let b = store
        .record_hook(HookKind::Suspend, "c-gpu-5", &[], Some(("hook_warning", "odd input")), at(2))
        .await
        .unwrap();
    let c = store.record_hook(HookKind::ResumeFail, "c-gpu-7", &[], None, at(3)).await.unwrap();
    assert!(a < b && b < c);
    store.close().await;

    let store = Store::open(tmp.path()).await.unwrap();
    assert_eq!(store.inbox_depth().await.unwrap(), 3);
    let inbox = store.unprocessed_inbox().await.unwrap();
    assert_eq!(
        inbox,
        vec![
            InboxEntry {
                id: a,
                received_at: at(1),
                kind: HookKind::Resume,
                hostlist: "c-gpu-[0-2]".into(),
                jobs
            },
            InboxEntry {
                id: b,
                received_at: at(2),
                kind: HookKind::Suspend,
                hostlist: "c-gpu-5".into(),
                jobs: vec![]
            },
            InboxEntry {
                id: c,
                received_at: at(3),
                kind: HookKind::ResumeFail,
                hostlist: "c-gpu-7".into(),
                jobs: vec![]
            },
        ]
    );
    // The note was committed with the call.
    let events = store.events(None, None, 10).await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!((events[0].kind.as_str(), events[0].message.as_str()), ("hook_warning", "odd input"));
    assert_eq!((events[0].time, events[0].nodes.as_str()), (at(2), ""));

    let mut tx = store.begin().await.unwrap();
    tx.mark_inbox_processed(&[], at(9)).await.unwrap();
    tx.mark_inbox_processed(&[a, c], at(10)).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(store.inbox_depth().await.unwrap(), 1);
    assert_eq!(store.unprocessed_inbox().await.unwrap().iter().map(|e| e.id).collect::<Vec<_>>(), vec![b]);

    let mut tx = store.begin().await.unwrap();
    tx.mark_inbox_processed(&[b], at(20)).await.unwrap();
    // Processed at 10 (a, c) and 20 (b): `before` is exclusive.
    assert_eq!(tx.prune_inbox(at(10)).await.unwrap(), 0);
    assert_eq!(tx.prune_inbox(at(11)).await.unwrap(), 2);
    tx.commit().await.unwrap();
    assert_eq!(store.inbox_depth().await.unwrap(), 0);
    let mut tx = store.begin().await.unwrap();
    assert_eq!(tx.prune_inbox(at(11)).await.unwrap(), 0);
    assert_eq!(tx.prune_inbox(at(21)).await.unwrap(), 1);
    tx.commit().await.unwrap();

    // Unprocessed rows are never pruned, however old.
    let d = store.record_hook(HookKind::Resume, "c-gpu-9", &[], None, at(0)).await.unwrap();
    let mut tx = store.begin().await.unwrap();
    assert_eq!(tx.prune_inbox(at(1_000_000)).await.unwrap(), 0);
    tx.commit().await.unwrap();
    assert_eq!(store.unprocessed_inbox().await.unwrap().iter().map(|e| e.id).collect::<Vec<_>>(), vec![d]);
    assert!(d > c, "ids are never reused after a prune");
    store.close().await;
}

#[tokio::test]
async fn nodes_upsert_read_back_and_bulk() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path()).await.unwrap();
    let mut tx = store.begin().await.unwrap();
    let req = tx
        .insert_request(
            "gpu",
            Some(7),
            "0a1b2c3d",
            "c-gpu-0a1b2c3d",
            "rr-1",
            &names(&["c-gpu-10"]),
            3600,
            at(0),
        )
        .await
        .unwrap();
    let full = Node {
        name: "c-gpu-10".into(),
        nodeset: "gpu".into(),
        index: 10,
        is_static: true,
        state: NodeState::Up,
        job_id: Some(u32::MAX),
        request_id: Some(req.id),
        mig: Some("c-gpu-0a1b2c3d".into()),
        vm_status: Some("RUNNING".into()),
        termination_time: Some(at(7200)),
        last_error: Some("it's \"quoted\" and ünïcode".into()),
        reservation: Some("slurm-dws-eol-c-gpu-10".into()),
        state_since: at(5),
        topology: Some("us-central1-cluster-a1/block-7/subblock-2/host-11".into()),
        maintenance: Some(Maintenance {
            kind: "UNSCHEDULED".into(),
            window_start_time: Some(at(3600)),
            window_end_time: Some(at(7200)),
            latest_window_start_time: None,
            can_reschedule: false,
            maintenance_status: "PENDING".into(),
            maintenance_reasons: vec!["FAILURE_GPU_XID".into()],
        }),
    };
    let empty = node("gpu", 2);
    let other = node("cpu", 0);
    tx.upsert_nodes(&[full.clone(), empty.clone(), other.clone()]).await.unwrap();
    tx.upsert_nodes(&[]).await.unwrap();
    tx.commit().await.unwrap();

    // By nodeset, then by index (not by name: 2 before 10).
    assert_eq!(store.nodes().await.unwrap(), vec![other.clone(), empty.clone(), full.clone()]);
    assert_eq!(store.node("c-gpu-10").await.unwrap(), full);
    assert_eq!(store.node("c-gpu-2").await.unwrap(), empty);
    assert!(matches!(store.node("c-gpu-1").await, Err(StoreError::NotFound { .. })));

    // Upsert replaces every field, including back to NULL.
    let cleared = Node { state: NodeState::Suspending, state_since: at(9), ..node("gpu", 10) };
    let mut tx = store.begin().await.unwrap();
    tx.upsert_nodes(std::slice::from_ref(&cleared)).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(store.node("c-gpu-10").await.unwrap(), cleared);
    assert_eq!(store.nodes().await.unwrap().len(), 3);

    // Foreign keys are on: a node cannot point at a request that does not exist.
    let mut tx = store.begin().await.unwrap();
    let dangling = Node { request_id: Some(req.id + 1000), ..node("gpu", 3) };
    assert!(matches!(tx.upsert_nodes(&[dangling]).await, Err(StoreError::Sql(_))));
    drop(tx);

    // 10,000 nodes in one statement, every state, read back exactly.
    let bulk: Vec<Node> = (0..10_000u32)
        .map(|i| Node {
            is_static: i % 3 == 0,
            state: NodeState::ALL[i as usize % NodeState::ALL.len()],
            job_id: (i % 2 == 0).then_some(i),
            termination_time: (i % 5 == 0).then(|| at(i as i64)),
            state_since: at(-(i as i64)),
            topology: (i % 4 == 0).then(|| format!("c/b{}/s{}/h{i}", i % 8, i % 32)),
            ..node("bulk", i)
        })
        .collect();
    let started = Instant::now();
    let mut tx = store.begin().await.unwrap();
    tx.upsert_nodes(&bulk).await.unwrap();
    tx.commit().await.unwrap();
    let took = started.elapsed();
    let all = store.nodes().await.unwrap();
    assert_eq!(all.len(), 10_003);
    let read: Vec<Node> = all.into_iter().filter(|n| n.nodeset == "bulk").collect();
    assert_eq!(read, bulk);
    assert_eq!(store.node("c-bulk-9999").await.unwrap(), bulk[9999]);
    // One statement, not 10,000 round trips: well under a second on an idle machine; generous for CI.
    assert!(took.as_secs() < 30, "10,000 nodes took {took:?}");
    store.close().await;
}

#[tokio::test]
async fn requests_insert_update_and_open_only() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path()).await.unwrap();
    let mut tx = store.begin().await.unwrap();
    let a = tx
        .insert_request(
            "gpu",
            Some(1),
            "aaaaaaaa",
            "c-gpu-aaaaaaaa",
            "rr-a",
            &names(&["c-gpu-0", "c-gpu-1"]),
            600,
            at(1),
        )
        .await
        .unwrap();
    let b = tx
        .insert_request("gpu", None, "bbbbbbbb", "c-gpu-bbbbbbbb", "rr-b", &[], 604800, at(2))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert!(a.id < b.id);
    assert_eq!(
        a,
        Request {
            id: a.id,
            nodeset: "gpu".into(),
            job_id: Some(1),
            tag: "aaaaaaaa".into(),
            mig: "c-gpu-aaaaaaaa".into(),
            name: "rr-a".into(),
            nodes: names(&["c-gpu-0", "c-gpu-1"]),
            run_duration: 600,
            phase: RequestPhase::Planned,
            gce_state: None,
            created_at: at(1),
            updated_at: at(1),
            last_error: None,
            zone_choice: None,
            zone: None,
        }
    );
    assert_eq!(store.request(a.id).await.unwrap(), a);
    assert_eq!(store.request(b.id).await.unwrap(), b);
    assert!(matches!(store.request(b.id + 1).await, Err(StoreError::NotFound { .. })));

    // Every phase round-trips (with a zone); only `done` leaves the open list.
    for phase in RequestPhase::ALL {
        let changed = Request {
            phase: *phase,
            gce_state: Some("ACCEPTED".into()),
            last_error: Some(format!("in {phase}")),
            zone: Some("us-central1-a,us-central1-b".into()),
            updated_at: at(100),
            ..a.clone()
        };
        let mut tx = store.begin().await.unwrap();
        tx.update_request(&changed).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(store.request(a.id).await.unwrap(), changed);
        let open: Vec<i64> = store.requests(true).await.unwrap().iter().map(|r| r.id).collect();
        let expect_open = if *phase == RequestPhase::Done { vec![b.id] } else { vec![a.id, b.id] };
        assert_eq!(open, expect_open, "open requests with a in {phase}");
    }
    let all = store.requests(false).await.unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!((all[0].id, all[0].phase, all[1].clone()), (a.id, RequestPhase::Done, b.clone()));
    // The immutable fields stay as inserted.
    assert_eq!((all[0].created_at, all[0].nodes.clone(), all[0].tag.clone()), (at(1), a.nodes, a.tag));

    let mut tx = store.begin().await.unwrap();
    let missing = Request { id: b.id + 1, ..b.clone() };
    assert!(matches!(tx.update_request(&missing).await, Err(StoreError::NotFound { .. })));
    // Tags (and so MIG names) are unique.
    assert!(matches!(
        tx.insert_request("gpu", None, "bbbbbbbb", "c-gpu-other", "rr", &[], 600, at(3)).await,
        Err(StoreError::Sql(_))
    ));
    drop(tx);
    assert_eq!(store.requests(false).await.unwrap().len(), 2);
    store.close().await;
}

#[tokio::test]
async fn migs_upsert_and_live_only() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path()).await.unwrap();
    let mig = |name: &str, state| Mig {
        name: name.into(),
        nodeset: "gpu".into(),
        region: "us-central1".into(),
        target_size: 0,
        state,
        created_at: at(1),
        empty_since: None,
    };
    let mut tx = store.begin().await.unwrap();
    for (name, state) in
        [("c-gpu-3", MigState::Deleted), ("c-gpu-1", MigState::Creating), ("c-gpu-2", MigState::Active)]
    {
        tx.upsert_mig(&mig(name, state)).await.unwrap();
    }
    tx.commit().await.unwrap();
    let all = store.migs(false).await.unwrap();
    assert_eq!(
        all,
        vec![
            mig("c-gpu-1", MigState::Creating),
            mig("c-gpu-2", MigState::Active),
            mig("c-gpu-3", MigState::Deleted)
        ]
    );
    let live: Vec<String> = store.migs(true).await.unwrap().into_iter().map(|m| m.name).collect();
    assert_eq!(live, vec!["c-gpu-1", "c-gpu-2"]);

    let changed = Mig {
        target_size: 16,
        state: MigState::Deleting,
        empty_since: Some(at(50)),
        ..mig("c-gpu-1", MigState::Active)
    };
    let mut tx = store.begin().await.unwrap();
    tx.upsert_mig(&changed).await.unwrap();
    tx.upsert_mig(&mig("c-gpu-2", MigState::Deleted)).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(store.migs(true).await.unwrap(), vec![changed]);
    assert_eq!(store.migs(false).await.unwrap().len(), 3);
    store.close().await;
}

#[tokio::test]
async fn outbox_intent_reuses_the_pending_entry_and_records_attempts() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path()).await.unwrap();
    let payload = json!({"name": "c-gpu-aa", "targetSize": 0});
    let mut tx = store.begin().await.unwrap();
    let first = tx.outbox_intent(MutationKind::MigInsert, "c-gpu-aa", &payload, at(1)).await.unwrap();
    // The same intent within the same transaction: the same entry.
    let again =
        tx.outbox_intent(MutationKind::MigInsert, "c-gpu-aa", &json!({"other": 1}), at(2)).await.unwrap();
    assert_eq!(again, first);
    tx.commit().await.unwrap();
    assert_eq!(
        first,
        OutboxEntry {
            id: first.id,
            request_id: first.request_id.clone(),
            kind: MutationKind::MigInsert,
            target: "c-gpu-aa".into(),
            payload: payload.to_string(),
            state: OutboxState::Pending,
            attempts: 0,
            created_at: at(1),
            updated_at: at(1),
            last_error: None,
        }
    );
    assert!(uuid::Uuid::parse_str(&first.request_id).is_ok(), "requestId is a UUID: {}", first.request_id);

    // In a later transaction (as after a restart): still the same entry, payload as first recorded.
    let mut tx = store.begin().await.unwrap();
    assert_eq!(
        tx.outbox_intent(MutationKind::MigInsert, "c-gpu-aa", &json!({}), at(3)).await.unwrap(),
        first
    );
    // Another kind on the same target, or the same kind on another target: fresh entries.
    let del = tx.outbox_intent(MutationKind::MigDelete, "c-gpu-aa", &json!({}), at(4)).await.unwrap();
    let other = tx.outbox_intent(MutationKind::MigInsert, "c-gpu-bb", &json!({"n": 2}), at(5)).await.unwrap();
    tx.commit().await.unwrap();
    let ids: BTreeSet<&str> = [&first, &del, &other].iter().map(|e| e.request_id.as_str()).collect();
    assert_eq!(ids.len(), 3, "fresh requestIds");
    assert_eq!(store.pending_outbox().await.unwrap(), vec![first.clone(), del.clone(), other.clone()]);

    // Attempts count up; an error is kept until another replaces it; state moves.
    let mut tx = store.begin().await.unwrap();
    tx.outbox_update(first.id, OutboxState::Pending, Some("503 backend error"), at(6)).await.unwrap();
    tx.outbox_update(first.id, OutboxState::Pending, None, at(7)).await.unwrap();
    tx.outbox_update(del.id, OutboxState::Abandoned, Some("moot"), at(8)).await.unwrap();
    tx.commit().await.unwrap();
    let pending = store.pending_outbox().await.unwrap();
    assert_eq!(pending.len(), 2);
    let f = &pending[0];
    assert_eq!(
        (f.id, f.attempts, f.last_error.as_deref(), f.updated_at),
        (first.id, 2, Some("503 backend error"), at(7))
    );
    assert_eq!(f.created_at, at(1));
    assert_eq!(pending[1], other);

    let mut tx = store.begin().await.unwrap();
    tx.outbox_update(first.id, OutboxState::Done, None, at(9)).await.unwrap();
    // With the old entry done, the same intent is a new mutation: a fresh requestId.
    let second = tx.outbox_intent(MutationKind::MigInsert, "c-gpu-aa", &payload, at(10)).await.unwrap();
    tx.commit().await.unwrap();
    assert_ne!(second.request_id, first.request_id);
    assert!(second.id > other.id);
    assert_eq!(store.pending_outbox().await.unwrap(), vec![other.clone(), second.clone()]);

    let history = store.outbox_for_target("c-gpu-aa").await.unwrap();
    let summary: Vec<(i64, MutationKind, OutboxState, u32)> =
        history.iter().map(|e| (e.id, e.kind, e.state, e.attempts)).collect();
    assert_eq!(
        summary,
        vec![
            (first.id, MutationKind::MigInsert, OutboxState::Done, 3),
            (del.id, MutationKind::MigDelete, OutboxState::Abandoned, 1),
            (second.id, MutationKind::MigInsert, OutboxState::Pending, 0),
        ]
    );
    assert_eq!(history[1].last_error.as_deref(), Some("moot"));
    assert_eq!(store.outbox_for_target("c-gpu-bb").await.unwrap(), vec![other]);
    assert!(store.outbox_for_target("c-gpu").await.unwrap().is_empty(), "targets match exactly");

    // Every kind round-trips.
    let mut tx = store.begin().await.unwrap();
    for kind in MutationKind::ALL {
        tx.outbox_intent(*kind, "all-kinds", &json!([kind.as_str()]), at(11)).await.unwrap();
    }
    tx.commit().await.unwrap();
    let kinds: Vec<MutationKind> =
        store.outbox_for_target("all-kinds").await.unwrap().iter().map(|e| e.kind).collect();
    assert_eq!(kinds, MutationKind::ALL);
    store.close().await;
}

#[tokio::test]
async fn events_filters_limit_and_hostlists() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path()).await.unwrap();
    let mut tx = store.begin().await.unwrap();
    let e1 = tx
        .add_event(
            at(10),
            "resume",
            &names(&["c-gpu-3", "c-gpu-1", "c-gpu-2", "c-gpu-7", "c-cpu-01"]),
            "asked",
        )
        .await
        .unwrap();
    let e2 = tx.add_event(at(20), "pass", &[], "no nodes").await.unwrap();
    let e3 = tx.add_event(at(30), "up", &names(&["c-gpu-10"]), "running").await.unwrap();
    let e4 = tx.add_event(at(40), "suspend", &names(&["c-gpu-1", "c-gpu-10"]), "gone").await.unwrap();
    tx.commit().await.unwrap();
    assert!(e1 < e2 && e2 < e3 && e3 < e4);

    let all = store.events(None, None, 100).await.unwrap();
    assert_eq!(all.iter().map(|e| e.id).collect::<Vec<_>>(), vec![e1, e2, e3, e4]);
    assert_eq!(
        all[0],
        Event {
            id: e1,
            time: at(10),
            kind: "resume".into(),
            nodes: slurm_dws::hostlist::compress(&names(&[
                "c-gpu-3", "c-gpu-1", "c-gpu-2", "c-gpu-7", "c-cpu-01"
            ])),
            message: "asked".into(),
            count: 1,
        }
    );
    let mut expanded = slurm_dws::hostlist::expand(&all[0].nodes).unwrap();
    expanded.sort();
    assert_eq!(expanded, names(&["c-cpu-01", "c-gpu-1", "c-gpu-2", "c-gpu-3", "c-gpu-7"]));
    assert_eq!(all[1].nodes, "");
    assert_eq!(all[3].nodes, "c-gpu-[1,10]");

    let ids = |v: Vec<Event>| v.iter().map(|e| e.id).collect::<Vec<_>>();
    // By node: found inside a hostlist, never confused with a longer name.
    assert_eq!(ids(store.events(Some("c-gpu-1"), None, 100).await.unwrap()), vec![e1, e4]);
    assert_eq!(ids(store.events(Some("c-gpu-10"), None, 100).await.unwrap()), vec![e3, e4]);
    assert_eq!(ids(store.events(Some("c-cpu-01"), None, 100).await.unwrap()), vec![e1]);
    assert_eq!(ids(store.events(Some("c-cpu-1"), None, 100).await.unwrap()), Vec::<i64>::new());
    // Since is inclusive.
    assert_eq!(ids(store.events(None, Some(at(20)), 100).await.unwrap()), vec![e2, e3, e4]);
    assert_eq!(ids(store.events(Some("c-gpu-1"), Some(at(11)), 100).await.unwrap()), vec![e4]);
    assert_eq!(ids(store.events(Some("c-gpu-10"), Some(at(41)), 100).await.unwrap()), Vec::<i64>::new());
    // Limit keeps the newest, still oldest first.
    assert_eq!(ids(store.events(None, None, 2).await.unwrap()), vec![e3, e4]);
    assert_eq!(ids(store.events(Some("c-gpu-10"), None, 1).await.unwrap()), vec![e4]);
    assert_eq!(ids(store.events(None, Some(at(15)), 1).await.unwrap()), vec![e4]);
    assert!(store.events(None, None, 0).await.unwrap().is_empty());

    // An event about many nodes keeps them as one short expression, and each node finds it.
    let many: Vec<String> = (0..1000).map(|i| format!("c-big-{i}")).collect();
    let mut tx = store.begin().await.unwrap();
    let big = tx.add_event(at(50), "resume", &many, "a thousand").await.unwrap();
    tx.commit().await.unwrap();
    let got = store.events(Some("c-big-999"), None, 10).await.unwrap();
    assert_eq!((got.len(), got[0].id, got[0].nodes.as_str()), (1, big, "c-big-[0-999]"));
    store.close().await;
}

#[tokio::test]
async fn backoffs_and_meta() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path()).await.unwrap();
    assert!(store.backoffs().await.unwrap().is_empty());
    assert_eq!(store.meta("last_pass").await.unwrap(), None);
    let b = |nodeset: &str, level, until| Backoff {
        nodeset: nodeset.into(),
        until: at(until),
        level,
        reason: format!("ZONE_RESOURCE_POOL_EXHAUSTED in {nodeset}"),
        ended: false,
    };
    let mut tx = store.begin().await.unwrap();
    tx.set_backoff(&b("gpu", 1, 60)).await.unwrap();
    tx.set_backoff(&b("a100", 3, 480)).await.unwrap();
    tx.set_meta("last_pass", "{\"iteration\":1}").await.unwrap();
    tx.set_meta("daemon", "").await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(store.backoffs().await.unwrap(), vec![b("a100", 3, 480), b("gpu", 1, 60)]);
    assert_eq!(store.meta("last_pass").await.unwrap().as_deref(), Some("{\"iteration\":1}"));
    assert_eq!(store.meta("daemon").await.unwrap().as_deref(), Some(""));

    let mut tx = store.begin().await.unwrap();
    tx.set_backoff(&b("gpu", 2, 180)).await.unwrap();
    tx.clear_backoff("a100").await.unwrap();
    tx.clear_backoff("never-backed-off").await.unwrap();
    tx.set_meta("last_pass", "{\"iteration\":2}").await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(store.backoffs().await.unwrap(), vec![b("gpu", 2, 180)]);
    assert_eq!(store.meta("last_pass").await.unwrap().as_deref(), Some("{\"iteration\":2}"));
    store.close().await;
}

#[tokio::test]
async fn a_transaction_dropped_without_commit_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    // One connection, like a hook: the rolled-back connection must come back usable.
    for hook in [true, false] {
        let store = if hook { Store::open_for_hook(tmp.path()).await } else { Store::open(tmp.path()).await }
            .unwrap();
        let inbox = store.record_hook(HookKind::Resume, "c-gpu-1", &[], None, at(0)).await.unwrap();
        {
            let mut tx = store.begin().await.unwrap();
            tx.mark_inbox_processed(&[inbox], at(1)).await.unwrap();
            let r = tx
                .insert_request(
                    "gpu",
                    Some(1),
                    "deadbeef",
                    "c-gpu-deadbeef",
                    "rr",
                    &names(&["c-gpu-1"]),
                    600,
                    at(1),
                )
                .await
                .unwrap();
            tx.upsert_nodes(&[Node { request_id: Some(r.id), ..node("gpu", 1) }]).await.unwrap();
            tx.update_request(&Request { phase: RequestPhase::Active, ..r }).await.unwrap();
            tx.upsert_mig(&Mig {
                name: "c-gpu-deadbeef".into(),
                nodeset: "gpu".into(),
                region: "r".into(),
                target_size: 1,
                state: MigState::Creating,
                created_at: at(1),
                empty_since: None,
            })
            .await
            .unwrap();
            let o =
                tx.outbox_intent(MutationKind::MigInsert, "c-gpu-deadbeef", &json!({}), at(1)).await.unwrap();
            tx.outbox_update(o.id, OutboxState::Done, None, at(1)).await.unwrap();
            tx.add_event(at(1), "resume", &names(&["c-gpu-1"]), "x").await.unwrap();
            tx.set_backoff(&Backoff {
                nodeset: "gpu".into(),
                until: at(9),
                level: 1,
                reason: "r".into(),
                ended: false,
            })
            .await
            .unwrap();
            tx.set_meta("k", "v").await.unwrap();
            // Dropped here, uncommitted.
        }
        assert_eq!(store.inbox_depth().await.unwrap(), 1, "hook={hook}");
        assert!(store.nodes().await.unwrap().is_empty());
        assert!(store.requests(false).await.unwrap().is_empty());
        assert!(store.migs(false).await.unwrap().is_empty());
        assert!(store.pending_outbox().await.unwrap().is_empty());
        assert!(store.outbox_for_target("c-gpu-deadbeef").await.unwrap().is_empty());
        assert!(store.events(None, None, 100).await.unwrap().is_empty());
        assert!(store.events(Some("c-gpu-1"), None, 100).await.unwrap().is_empty());
        assert!(store.backoffs().await.unwrap().is_empty());
        assert_eq!(store.meta("k").await.unwrap(), None);
        // And the store still writes.
        let mut tx = store.begin().await.unwrap();
        tx.mark_inbox_processed(&[inbox], at(2)).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(store.inbox_depth().await.unwrap(), 0);
        store.close().await;
    }
}

// ---- hooks and the daemon at once ---------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_wait_for_the_daemon_instead_of_failing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let daemon = Store::open(&dir).await.unwrap();

    // The daemon: long write transactions (2,000 nodes and an event each), back to back.
    let d = daemon.clone();
    let daemon_task = tokio::spawn(async move {
        let mut held = std::time::Duration::ZERO;
        for pass in 0..15u32 {
            let started = Instant::now();
            let mut tx = d.begin().await?;
            let nodes: Vec<Node> = (0..2000).map(|i| Node { job_id: Some(pass), ..node("d", i) }).collect();
            tx.upsert_nodes(&nodes).await?;
            tx.add_event(at(pass as i64), "pass", &[], &pass.to_string()).await?;
            tx.set_meta("pass", &pass.to_string()).await?;
            tx.commit().await?;
            held += started.elapsed();
        }
        Ok::<_, StoreError>(held)
    });
    // Hooks: each call opens its own single-connection store, as a fresh process does.
    let hooks: Vec<_> = (0..6u32)
        .map(|h| {
            let dir = dir.clone();
            std::thread::spawn(move || {
                block_on(async move {
                    let mut ids = vec![];
                    for call in 0..15u32 {
                        let store = Store::open_for_hook(&dir).await?;
                        let host = format!("c-h{h}-{call}");
                        let jobs = [(call, host.clone())];
                        ids.push(
                            store
                                .record_hook(HookKind::Resume, &host, &jobs, Some(("hook", &host)), at(1))
                                .await?,
                        );
                        store.close().await;
                    }
                    Ok::<_, StoreError>(ids)
                })
            })
        })
        .collect();
    let mut ids = BTreeSet::new();
    for h in hooks {
        ids.extend(h.join().unwrap().expect("a hook call failed under contention"));
    }
    let held = daemon_task.await.unwrap().expect("a daemon transaction failed under contention");
    println!("daemon held the write lock for {held:?} over 15 transactions");

    assert_eq!(ids.len(), 90);
    let inbox = daemon.unprocessed_inbox().await.unwrap();
    assert_eq!(inbox.iter().map(|e| e.id).collect::<BTreeSet<_>>(), ids);
    assert_eq!(daemon.events(None, None, 1000).await.unwrap().len(), 90 + 15);
    assert_eq!(daemon.meta("pass").await.unwrap().as_deref(), Some("14"));
    assert!(daemon.nodes().await.unwrap().iter().all(|n| n.job_id == Some(14)));
    daemon.close().await;
    integrity_check(&dir.join(DB_FILE)).await;
}

/// A pass reads before it writes (`outbox_intent` looks for the pending entry first). A hook committing
/// between that read and the first write must wait for the pass, not break it with `SQLITE_BUSY`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_committing_inside_a_read_first_daemon_transaction_waits() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let daemon = Store::open(&dir).await.unwrap();
    let mut tx = daemon.begin().await.unwrap();
    let intent = tx.outbox_intent(MutationKind::MigDelete, "c-gpu-aa", &json!({}), at(0)).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = daemon.begin().await.unwrap();
    // A read only: the pending entry is reused.
    assert_eq!(
        tx.outbox_intent(MutationKind::MigDelete, "c-gpu-aa", &json!({}), at(1)).await.unwrap(),
        intent
    );
    let (started, done) = (Instant::now(), std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)));
    let hook_done = done.clone();
    let hook = std::thread::spawn(move || {
        let r = block_on(async {
            let store = Store::open_for_hook(&dir).await?;
            let id = store.record_hook(HookKind::Suspend, "c-gpu-1", &[], None, at(2)).await?;
            store.close().await;
            Ok::<_, StoreError>(id)
        });
        hook_done.store(true, std::sync::atomic::Ordering::SeqCst);
        r
    });
    // Give the hook ample time to commit if it could (it must not: the pass holds the write lock).
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !done.load(std::sync::atomic::Ordering::SeqCst),
        "the hook committed inside the pass's transaction"
    );
    tx.outbox_update(intent.id, OutboxState::Done, None, at(3))
        .await
        .expect("the pass's write after its read");
    tx.commit().await.unwrap();
    let id = hook.join().unwrap().expect("the hook waited on the busy timeout and then committed");
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
    assert_eq!(daemon.unprocessed_inbox().await.unwrap().iter().map(|e| e.id).collect::<Vec<_>>(), vec![id]);
    assert!(daemon.pending_outbox().await.unwrap().is_empty());
    daemon.close().await;
}

// ---- crashes ------------------------------------------------------------------------------------------

const CHILD_MODE: &str = "SLURM_DWS_STORE_TEST_CHILD";
const CHILD_DIR: &str = "SLURM_DWS_STORE_TEST_DIR";
const CHILD_FIRST: &str = "SLURM_DWS_STORE_TEST_FIRST";
/// Nodes written by each daemon-style transaction.
const NODES_PER_TX: u32 = 20;

/// The writer the crash tests kill. Not a test of its own: it does something only when re-executed by
/// [`spawn_child`] with `SLURM_DWS_STORE_TEST_CHILD` set (`daemon` or `hook`).
///
/// It writes in a loop and prints `B i` before each transaction begins and `C i` (daemon) or
/// `H inbox-id i` (hook) after each commit returns, flushed; any error is printed as `E ...` and ends it.
#[test]
#[ignore = "the crash tests' child process; does nothing unless re-executed by them"]
fn crash_child() {
    let Ok(mode) = std::env::var(CHILD_MODE) else { return };
    let dir = PathBuf::from(std::env::var(CHILD_DIR).unwrap());
    let first: u32 = std::env::var(CHILD_FIRST).unwrap().parse().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let out = std::io::stdout();
    let say = |line: String| {
        let mut out = out.lock();
        out.write_all(line.as_bytes()).unwrap();
        out.write_all(b"\n").unwrap();
        out.flush().unwrap();
    };
    let result = rt.block_on(async {
        // A safety net: the parent kills us long before this.
        let deadline = Instant::now() + std::time::Duration::from_secs(20);
        match mode.as_str() {
            "daemon" => {
                let store = Store::open(&dir).await?;
                let mut i = first;
                while Instant::now() < deadline {
                    say(format!("B {i}"));
                    daemon_transaction(&store, i).await?;
                    say(format!("C {i}"));
                    i += 1;
                }
            }
            "hook" => {
                let mut j = first;
                while Instant::now() < deadline {
                    say(format!("B {j}"));
                    let store = Store::open_for_hook(&dir).await?;
                    let host = format!("h{j}-[0-3]");
                    let id = store
                        .record_hook(
                            HookKind::Resume,
                            &host,
                            &[(j, host.clone())],
                            Some(("hook_note", &j.to_string())),
                            at(j as i64),
                        )
                        .await?;
                    store.close().await;
                    say(format!("H {id} {j}"));
                    j += 1;
                }
            }
            other => panic!("unknown child mode {other}"),
        }
        Ok::<_, StoreError>(())
    });
    if let Err(e) = result {
        say(format!("E {e}"));
        std::process::exit(1);
    }
}

/// One daemon-style transaction touching every table the daemon writes: a request group, its nodes, its
/// MIG, an outbox intent, an event about the nodes, a meta value, the previous outbox entry marked done.
async fn daemon_transaction(store: &Store, i: u32) -> Result<(), StoreError> {
    let now = at(i as i64);
    let nodes: Vec<String> = (0..NODES_PER_TX).map(|k| format!("c{i}-{k}")).collect();
    let mut tx = store.begin().await?;
    let r = tx
        .insert_request("crash", Some(i), &format!("t{i}"), &format!("m{i}"), "rr", &nodes, 3600, now)
        .await?;
    let rows: Vec<Node> = (0..NODES_PER_TX)
        .map(|k| Node {
            name: nodes[k as usize].clone(),
            nodeset: "crash".into(),
            index: k,
            is_static: false,
            state: NodeState::Requested,
            job_id: Some(i),
            request_id: Some(r.id),
            mig: Some(format!("m{i}")),
            vm_status: None,
            termination_time: None,
            last_error: None,
            reservation: None,
            state_since: now,
            topology: None,
            maintenance: None,
        })
        .collect();
    tx.upsert_nodes(&rows).await?;
    tx.upsert_mig(&Mig {
        name: format!("m{i}"),
        nodeset: "crash".into(),
        region: "r".into(),
        target_size: NODES_PER_TX,
        state: MigState::Creating,
        created_at: now,
        empty_since: None,
    })
    .await?;
    tx.outbox_intent(MutationKind::MigInsert, &format!("m{i}"), &json!({ "i": i }), now).await?;
    tx.add_event(now, "crash", &nodes, &i.to_string()).await?;
    tx.set_meta("crash_last", &i.to_string()).await?;
    tx.commit().await
}

struct Kid {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: std::thread::JoinHandle<String>,
}

impl Kid {
    /// SIGKILL (by our child's pid) and reap; returns every complete stdout line and the stderr.
    fn kill(mut self) -> (Vec<String>, String) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let lines = self.lines.iter().collect();
        (lines, self.stderr.join().unwrap())
    }
}

fn spawn_child(mode: &str, dir: &Path, first: u32) -> Kid {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["crash_child", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_MODE, mode)
        .env(CHILD_DIR, dir)
        .env(CHILD_FIRST, first.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (send, lines) = mpsc::channel();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        let mut line = String::new();
        // Only complete lines count: a line cut by the kill claims nothing.
        while stdout.read_line(&mut line).unwrap_or(0) > 0 && line.ends_with('\n') {
            let _ = send.send(line.trim_end().to_string());
            line.clear();
        }
    });
    let mut stderr = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    Kid { child, lines, stderr }
}

/// What the children reported as committed, across rounds.
#[derive(Default)]
struct Committed {
    daemon: BTreeSet<u32>,
    /// inbox id → hook number
    hooks: BTreeMap<i64, u32>,
    /// Kills that landed after `B i` and before the matching commit report.
    inside_tx: u32,
}

impl Committed {
    fn take(&mut self, lines: &[String], stderr: &str, who: &str, seed: u64) {
        let mut open = false;
        for l in lines {
            let f: Vec<&str> = l.split(' ').collect();
            match f[0] {
                "B" => open = true,
                "C" => {
                    self.daemon.insert(f[1].parse().unwrap());
                    open = false;
                }
                "H" => {
                    self.hooks.insert(f[1].parse().unwrap(), f[2].parse().unwrap());
                    open = false;
                }
                "E" => panic!("seed {seed}: the {who} writer failed: {l}\nstderr: {stderr}"),
                _ => {} // libtest's own lines
            }
        }
        if open {
            self.inside_tx += 1;
        }
    }
}

/// Reopens the database as the daemon would after a crash and checks: every reported commit is there,
/// whole; nothing is there in part; SQLite finds the file intact.
async fn verify_after_crash(dir: &Path, c: &Committed, seed: u64) {
    let store = Store::open(dir).await.unwrap_or_else(|e| panic!("seed {seed}: reopen after SIGKILL: {e}"));
    let ctx = |what: &str| format!("seed {seed}: {what}");

    // Daemon transactions: all of one, or none of it.
    let requests: BTreeMap<u32, Request> = store
        .requests(false)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.nodeset == "crash")
        .map(|r| (r.job_id.unwrap(), r))
        .collect();
    for i in &c.daemon {
        assert!(requests.contains_key(i), "{}", ctx(&format!("committed transaction {i} lost")));
    }
    let mut nodes: BTreeMap<i64, Vec<Node>> = BTreeMap::new();
    for n in store.nodes().await.unwrap().into_iter().filter(|n| n.nodeset == "crash") {
        nodes.entry(n.request_id.expect("crash nodes have a request")).or_default().push(n);
    }
    let migs: BTreeSet<String> = store.migs(false).await.unwrap().into_iter().map(|m| m.name).collect();
    let pending: BTreeMap<String, OutboxEntry> =
        store.pending_outbox().await.unwrap().into_iter().map(|e| (e.target.clone(), e)).collect();
    let events: BTreeMap<String, Event> = store
        .events(None, None, i64::MAX)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "crash")
        .map(|e| (e.message.clone(), e))
        .collect();
    assert_eq!(
        nodes.len(),
        requests.len(),
        "{}",
        ctx("nodes without their request, or requests without nodes")
    );
    assert_eq!(migs.len(), requests.len(), "{}", ctx("MIGs and requests differ"));
    assert_eq!(pending.len(), requests.len(), "{}", ctx("outbox entries and requests differ"));
    assert_eq!(events.len(), requests.len(), "{}", ctx("events and requests differ"));
    for (i, r) in &requests {
        let what = |s: &str| ctx(&format!("transaction {i}: {s}"));
        let ns = &nodes.get(&r.id).unwrap_or_else(|| panic!("{}", what("nodes missing")));
        assert_eq!(ns.len() as u32, NODES_PER_TX, "{}", what("partial nodes"));
        assert!(
            ns.iter().all(|n| n.job_id == Some(*i) && n.mig.as_deref() == Some(&format!("m{i}"))),
            "{}",
            what("node rows")
        );
        assert!(migs.contains(&format!("m{i}")), "{}", what("MIG missing"));
        let o = pending.get(&format!("m{i}")).unwrap_or_else(|| panic!("{}", what("outbox entry missing")));
        let recorded: serde_json::Value = serde_json::from_str(&o.payload).unwrap();
        assert_eq!(recorded, json!({ "i": i }), "{}", what("outbox payload"));
        let e = events.get(&i.to_string()).unwrap_or_else(|| panic!("{}", what("event missing")));
        assert_eq!(e.nodes, format!("c{i}-[0-{}]", NODES_PER_TX - 1), "{}", what("event nodes"));
        assert_eq!(
            store.events(Some(&format!("c{i}-7")), None, 10).await.unwrap().len(),
            1,
            "{}",
            what("event_nodes")
        );
    }
    if let Some(last) = requests.keys().max() {
        assert_eq!(store.meta("crash_last").await.unwrap(), Some(last.to_string()), "{}", ctx("meta"));
    }

    // Hook calls: the inbox row and its note, together.
    let inbox: BTreeMap<i64, InboxEntry> =
        store.unprocessed_inbox().await.unwrap().into_iter().map(|e| (e.id, e)).collect();
    for (id, j) in &c.hooks {
        let e = inbox
            .get(id)
            .unwrap_or_else(|| panic!("{}", ctx(&format!("committed hook call {j} (inbox {id}) lost"))));
        let host = format!("h{j}-[0-3]");
        assert_eq!(
            (e.kind, &e.hostlist, &e.jobs),
            (HookKind::Resume, &host, &vec![(*j, host.clone())]),
            "{}",
            ctx("inbox row")
        );
    }
    let notes: BTreeSet<String> = store
        .events(None, None, i64::MAX)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "hook_note")
        .map(|e| e.message)
        .collect();
    let recorded: BTreeSet<String> = inbox
        .values()
        .map(|e| e.hostlist.trim_start_matches('h').trim_end_matches("-[0-3]").to_string())
        .collect();
    assert_eq!(notes, recorded, "{}", ctx("hook calls and their notes differ"));
    store.close().await;
    integrity_check(&dir.join(DB_FILE)).await;
}

fn seed() -> u64 {
    std::env::var("SLURM_DWS_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_daemon_writes_loses_no_committed_transaction() {
    let seed = seed();
    println!("seed {seed} (SLURM_DWS_TEST_SEED={seed} replays it)");
    let mut rng = StdRng::seed_from_u64(seed);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    let mut c = Committed::default();
    // The first round starts on no database at all: a kill may land inside the migrations. At least 12
    // rounds, more (up to 40) while too few commits or kills inside a transaction were seen (a loaded machine).
    let mut round = 0u32;
    while round < 12 || ((c.daemon.len() < 50 || c.inside_tx < 6) && round < 40) {
        let first = round * 100_000;
        let kid = spawn_child("daemon", &dir, first);
        let by_line = round % 2 == 1;
        if by_line {
            // Kill right after a `B` line: inside the transaction that line announced.
            kill_at_begin(&mut rng, kid, first, &mut c, seed);
        } else {
            std::thread::sleep(std::time::Duration::from_millis(rng.gen_range(1..400)));
            let (lines, stderr) = kid.kill();
            c.take(&lines, &stderr, "daemon", seed);
        }
        verify_after_crash(&dir, &c, seed).await;
        round += 1;
    }
    println!(
        "seed {seed}: {} transactions committed, {} kills inside a transaction",
        c.daemon.len(),
        c.inside_tx
    );
    assert!(c.daemon.len() >= 50, "seed {seed}: too few commits to mean anything ({})", c.daemon.len());
    assert!(c.inside_tx >= 6, "seed {seed}: only {} kills landed inside a transaction", c.inside_tx);
}

/// Reads the child's lines (keeping the commits) until it announces transaction `first + n` for a random
/// `n`, then kills it at once.
fn kill_at_begin(rng: &mut StdRng, kid: Kid, first: u32, c: &mut Committed, seed: u64) {
    let target = format!("B {}", first + rng.gen_range(0..60));
    let deadline = Instant::now() + std::time::Duration::from_secs(15);
    let mut seen = vec![];
    while Instant::now() < deadline {
        match kid.lines.recv_timeout(std::time::Duration::from_millis(100)) {
            Ok(l) => {
                let hit = l == target;
                seen.push(l);
                if hit {
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let (rest, stderr) = kid.kill();
    seen.extend(rest);
    c.take(&seen, &stderr, "daemon", seed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_concurrent_hook_and_daemon_writes_loses_nothing() {
    let seed = seed();
    println!("seed {seed} (SLURM_DWS_TEST_SEED={seed} replays it)");
    let mut rng = StdRng::seed_from_u64(seed);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    let mut c = Committed::default();
    // At least 8 rounds, more (up to 30) while either writer committed too little (a loaded machine).
    let mut round = 0u32;
    while round < 8 || ((c.daemon.len() < 20 || c.hooks.len() < 20) && round < 30) {
        let first = round * 100_000;
        round += 1;
        let daemon = spawn_child("daemon", &dir, first);
        let hook = spawn_child("hook", &dir, first);
        // Both run; each dies at its own moment.
        let (d_ms, h_ms) = (rng.gen_range(50..400), rng.gen_range(1..400));
        let (early, late, early_ms, late_ms, early_is_daemon) =
            if d_ms <= h_ms { (daemon, hook, d_ms, h_ms, true) } else { (hook, daemon, h_ms, d_ms, false) };
        std::thread::sleep(std::time::Duration::from_millis(early_ms));
        let early_out = early.kill();
        std::thread::sleep(std::time::Duration::from_millis(late_ms - early_ms));
        let late_out = late.kill();
        let (d_out, h_out) = if early_is_daemon { (early_out, late_out) } else { (late_out, early_out) };
        c.take(&d_out.0, &d_out.1, "daemon", seed);
        c.take(&h_out.0, &h_out.1, "hook", seed);
        verify_after_crash(&dir, &c, seed).await;
    }
    println!(
        "seed {seed}: {round} rounds, {} daemon transactions and {} hook calls committed, {} kills inside a \
         transaction",
        c.daemon.len(),
        c.hooks.len(),
        c.inside_tx
    );
    assert!(c.daemon.len() >= 20 && c.hooks.len() >= 20, "seed {seed}: too few commits to mean anything");
}

// ---- identical events of a pass, and history retention --------------------------------------------------

#[tokio::test]
async fn identical_events_at_one_instant_are_one_event_with_a_count() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).await.unwrap();
    let mut tx = store.begin().await.unwrap();
    // One pass (one clock read) notices the same drift six times, and something else once.
    let mut ids = Vec::new();
    for _ in 0..6 {
        ids.push(tx.add_event(at(10), "drift", &names(&["c-gpu-1"]), "VM gone").await.unwrap());
    }
    tx.add_event(at(10), "drift", &names(&["c-gpu-2"]), "VM gone").await.unwrap();
    tx.commit().await.unwrap();
    // The next pass notices it again: a new event.
    let mut tx = store.begin().await.unwrap();
    tx.add_event(at(40), "drift", &names(&["c-gpu-1"]), "VM gone").await.unwrap();
    tx.commit().await.unwrap();
    assert!(ids.iter().all(|&id| id == ids[0]), "one row: {ids:?}");
    let all = store.events(None, None, 100).await.unwrap();
    let seen: Vec<(&str, i64)> = all.iter().map(|e| (e.nodes.as_str(), e.count)).collect();
    assert_eq!(seen, [("c-gpu-1", 6), ("c-gpu-2", 1), ("c-gpu-1", 1)]);
    // Still found by node.
    assert_eq!(store.events(Some("c-gpu-1"), None, 100).await.unwrap().len(), 2);
}

/// A request group of tag `tag` in `phase`, last updated at `at(updated)`.
async fn finished_request(
    tx: &mut slurm_dws::store::StoreTx,
    tag: &str,
    phase: RequestPhase,
    updated: i64,
) -> Request {
    let (mig, name) = (format!("c-gpu-{tag}"), format!("rr-{tag}"));
    let mut r = tx.insert_request("gpu", None, tag, &mig, &name, &[], 600, at(0)).await.unwrap();
    r.phase = phase;
    r.updated_at = at(updated);
    tx.update_request(&r).await.unwrap();
    r
}

#[tokio::test]
async fn history_is_pruned_in_batches_and_what_is_in_use_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).await.unwrap();
    let mut tx = store.begin().await.unwrap();
    // 25 old events and 3 recent ones.
    for i in 0..25 {
        tx.add_event(at(i), "old", &names(&["c-gpu-1", "c-gpu-2"]), &format!("old {i}")).await.unwrap();
    }
    for i in 0..3 {
        tx.add_event(at(1000 + i), "new", &names(&["c-gpu-1"]), &format!("new {i}")).await.unwrap();
    }
    // Requests: old and done (pruned), old and done but a node still points at it (kept), old and
    // still active (kept), recent and done (kept).
    let gone = finished_request(&mut tx, "aaaaaaaa", RequestPhase::Done, 5).await;
    let pointed = finished_request(&mut tx, "bbbbbbbb", RequestPhase::Done, 5).await;
    let active = finished_request(&mut tx, "cccccccc", RequestPhase::Active, 5).await;
    let recent = finished_request(&mut tx, "dddddddd", RequestPhase::Done, 1000).await;
    let mut n = node("gpu", 1);
    n.request_id = Some(pointed.id);
    tx.upsert_nodes(&[n]).await.unwrap();
    let mig = |name: &str, state: MigState, empty_since: i64| Mig {
        name: name.into(),
        nodeset: "gpu".into(),
        region: "us-central1".into(),
        target_size: 0,
        state,
        created_at: at(0),
        empty_since: Some(at(empty_since)),
    };
    tx.upsert_mig(&mig("c-gpu-old-deleted", MigState::Deleted, 5)).await.unwrap();
    tx.upsert_mig(&mig("c-gpu-old-active", MigState::Active, 5)).await.unwrap();
    tx.upsert_mig(&mig("c-gpu-new-deleted", MigState::Deleted, 1000)).await.unwrap();
    tx.commit().await.unwrap();

    // Batches of 10: the 25 old events go in three transactions.
    let pruned = store.prune_history(at(500), 10).await.unwrap();
    assert_eq!((pruned.events, pruned.requests, pruned.migs), (25, 1, 1));
    let left: Vec<String> =
        store.events(None, None, 100).await.unwrap().into_iter().map(|e| e.message).collect();
    assert_eq!(left, ["new 0", "new 1", "new 2"]);
    assert_eq!(store.events(Some("c-gpu-2"), None, 100).await.unwrap(), vec![], "their node rows went too");
    let ids: Vec<i64> = store.requests(false).await.unwrap().iter().map(|r| r.id).collect();
    assert_eq!(ids, [pointed.id, active.id, recent.id], "{} pruned", gone.id);
    let migs: Vec<String> = store.migs(false).await.unwrap().into_iter().map(|m| m.name).collect();
    assert_eq!(migs, ["c-gpu-new-deleted", "c-gpu-old-active"]);
    // Nothing is left to prune; the file is sound.
    assert_eq!(store.prune_history(at(500), 10).await.unwrap(), Default::default());
    let mut tx = store.begin().await.unwrap();
    assert_eq!(tx.prune_history(at(500), 10).await.unwrap().most(), 0);
    tx.commit().await.unwrap();
    store.close().await;
    integrity_check(&dir.path().join(DB_FILE)).await;
}
