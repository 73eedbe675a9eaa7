//! The usage spans on disk: what is written reads back exactly, open spans carry the last pass
//! that saw them, a period finds the spans overlapping it, pruning takes what ended before the cut-off.

use super::*;
use crate::store::Store;

fn t(secs: i64) -> DateTime<Utc> {
    from_ms(1_795_000_000_000 + secs * 1000)
}

fn vm(id: &str, node: &str, created: i64, deleted: Option<i64>) -> VmSpan {
    VmSpan {
        instance_id: id.into(),
        vm: node.into(),
        node: node.into(),
        nodeset: "a".into(),
        model: "flex".into(),
        machine_type: "a3-highgpu-8g".into(),
        gpus: 8,
        job_id: Some(4_000_000_000),
        created_at: t(created),
        last_seen: t(created),
        deleted_at: deleted.map(t),
    }
}

fn job(id: u64, node: &str, started: i64, ended: Option<i64>) -> JobSpan {
    JobSpan {
        job_id: id,
        node: node.into(),
        user: "alice \"q\" é".into(),
        account: "physics".into(),
        partition: "a3".into(),
        started_at: t(started),
        ended_at: ended.map(t),
    }
}

async fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).await.unwrap();
    (dir, store)
}

#[tokio::test]
async fn spans_read_back_and_close() {
    let (_dir, store) = store().await;
    assert_eq!(store.usage_data_since().await.unwrap(), None);
    let mut static_vm = vm("2", "hpc-a-2", 5, None);
    static_vm.job_id = None;
    let mut tx = store.begin().await.unwrap();
    tx.open_vm_spans(&[vm("1", "hpc-a-1", 0, None), static_vm.clone()]).await.unwrap();
    tx.open_job_spans(&[job(7, "hpc-a-1", 10, None)]).await.unwrap();
    tx.usage_seen(t(10)).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(store.usage_data_since().await.unwrap(), Some(t(10)));

    // A later pass saw both still there: one row written, and the open spans say so.
    let mut tx = store.begin().await.unwrap();
    tx.usage_seen(t(40)).await.unwrap();
    tx.commit().await.unwrap();
    let open = store.open_vm_spans().await.unwrap();
    assert_eq!(open.len(), 2);
    assert_eq!(open[0], VmSpan { last_seen: t(40), ..vm("1", "hpc-a-1", 0, None) });
    assert_eq!(open[1], VmSpan { last_seen: t(40), ..static_vm });
    assert_eq!(store.open_job_spans().await.unwrap(), vec![job(7, "hpc-a-1", 10, None)]);
    // Recording began at the first pass, whatever came after.
    assert_eq!(store.usage_data_since().await.unwrap(), Some(t(10)));

    // The next pass no longer sees VM 1 and job 7: closed, last seen at the pass before.
    let mut tx = store.begin().await.unwrap();
    tx.close_vm_spans(&[VmSpanEnd { instance_id: "1".into(), deleted_at: t(70) }], Some(t(40)))
        .await
        .unwrap();
    tx.close_job_spans(&[JobSpanEnd { job_id: 7, node: "hpc-a-1".into(), ended_at: t(40) }]).await.unwrap();
    tx.usage_seen(t(70)).await.unwrap();
    tx.commit().await.unwrap();
    let all = store.vm_spans_between(t(-100), t(1000)).await.unwrap();
    assert_eq!(all[0], VmSpan { last_seen: t(40), ..vm("1", "hpc-a-1", 0, Some(70)) });
    assert_eq!(all[1].last_seen, t(70), "open: seen by the last pass");
    assert_eq!(store.open_vm_spans().await.unwrap().len(), 1);
    assert_eq!(store.job_spans_between(t(0), t(1000)).await.unwrap(), vec![job(7, "hpc-a-1", 10, Some(40))]);
    assert!(store.open_job_spans().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_period_finds_the_spans_overlapping_it() {
    let (_dir, store) = store().await;
    let mut tx = store.begin().await.unwrap();
    tx.open_vm_spans(&[
        vm("before", "n1", 0, Some(100)),
        vm("across", "n2", 50, Some(300)),
        vm("inside", "n3", 150, Some(180)),
        vm("open", "n4", 190, None),
        vm("after", "n5", 400, None),
    ])
    .await
    .unwrap();
    tx.open_job_spans(&[job(1, "n1", 0, Some(90)), job(2, "n2", 60, None), job(3, "n2", 250, Some(260))])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let ids: Vec<String> =
        store.vm_spans_between(t(100), t(200)).await.unwrap().into_iter().map(|s| s.instance_id).collect();
    assert_eq!(ids, ["across", "inside", "open"], "ended at the start or starting at the end: outside");
    let jobs: Vec<u64> =
        store.job_spans_between(t(100), t(200)).await.unwrap().into_iter().map(|j| j.job_id).collect();
    assert_eq!(jobs, [2]);
    let jobs: Vec<u64> =
        store.job_spans_between(t(0), t(1000)).await.unwrap().into_iter().map(|j| j.job_id).collect();
    assert_eq!(jobs, [1, 2, 3]);
}

#[tokio::test]
async fn opening_twice_keeps_the_first_and_pruning_takes_what_ended() {
    let (_dir, store) = store().await;
    let mut tx = store.begin().await.unwrap();
    tx.open_vm_spans(&[vm("1", "n1", 0, Some(100)), vm("2", "n2", 0, None)]).await.unwrap();
    tx.open_vm_spans(&[vm("2", "other", 5, None)]).await.unwrap();
    tx.open_job_spans(&[job(1, "n1", 0, Some(50)), job(2, "n2", 0, None)]).await.unwrap();
    tx.open_job_spans(&[job(2, "n2", 0, None)]).await.unwrap();
    tx.usage_seen(t(0)).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(store.open_vm_spans().await.unwrap()[0].node, "n2");
    assert_eq!(store.open_job_spans().await.unwrap().len(), 1);

    // With the rest of the history, in batches.
    let pruned = store.prune_history(t(200), 1).await.unwrap();
    assert_eq!(pruned.spans, 1);
    let left: Vec<String> =
        store.vm_spans_between(t(-1000), t(1000)).await.unwrap().into_iter().map(|s| s.instance_id).collect();
    assert_eq!(left, ["2"], "the open span stays, however old");
    assert_eq!(store.job_spans_between(t(-1000), t(1000)).await.unwrap().len(), 1);
    assert_eq!(store.usage_data_since().await.unwrap(), Some(t(200)), "complete from the cut-off");
    // An earlier cut-off (history_days raised) does not move it back: what went is gone.
    store.prune_history(t(100), 10).await.unwrap();
    assert_eq!(store.usage_data_since().await.unwrap(), Some(t(200)));
}
