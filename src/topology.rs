//! The Slurm topology file kept from GCE's physical host topology (`[slurm] topology`): rendered
//! (pure), written atomically only when it changes, and loaded by Slurm at most once a minute.
//!
//! Each VM behind one of our nodes reports `resourceStatus.physicalHostTopology` (cluster, block,
//! subblock, host), read from the instance list every pass already makes. `tree`: a switch per GCE
//! subblock holding its nodes, under a switch per block, under one per cluster, under one root.
//! `block`: a Slurm block per GCE block. Nodes without a placed VM (powered down, or not yet
//! placed) go under one switch / block of their own, `unplaced`: Slurm keeps scheduling them (a node
//! absent from topology/tree cannot be part of a multi-node job; slurm-gcp likewise keeps every
//! node of a nodeset in its topology), and a job that lands there is placed once it has VMs.
//! Before 25.05 the file is `topology.conf`; from 25.05 `topology.yaml` (docs/slurm-facts.md).

use crate::config::TopologyKind;
use chrono::{DateTime, Duration, Utc};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The least time between two `scontrol reconfigure`s the topology causes. A reconfigure re-reads
/// every config file and, from 23.11, restarts slurmctld in place: cheap once a minute, not on every
/// VM that comes up. A job's ranks are placed when it is scheduled, and the VMs of one request come up
/// within about a minute of each other, so one reload a minute sees a request's VMs together.
pub const MIN_RELOAD_INTERVAL_SECS: i64 = 60;

/// The switch / block holding the nodes without a placed VM.
pub const UNPLACED: &str = "unplaced";

/// `CLUSTER/BLOCK/SUBBLOCK/HOST` split; `None` unless cluster and block are known.
fn parts(t: &str) -> Option<(&str, &str, &str)> {
    let mut it = t.split('/');
    let (c, b, s) = (it.next()?, it.next()?, it.next().unwrap_or_default());
    (!c.is_empty() && !b.is_empty()).then_some((c, b, s))
}

/// The block of a node's `CLUSTER/BLOCK/SUBBLOCK/HOST` (for `explain`).
pub fn block_of(t: &str) -> Option<&str> {
    parts(t).map(|(_, b, _)| b)
}

/// The file's text for `nodes` (every node of ours → its VM's topology, `None` without one).
/// Sorted and deterministic: the same placement always gives the same bytes.
pub fn render(kind: TopologyKind, yaml: bool, nodes: &BTreeMap<String, Option<String>>) -> String {
    // cluster → block → subblock → nodes
    let mut tree: BTreeMap<&str, BTreeMap<&str, BTreeMap<&str, Vec<&str>>>> = BTreeMap::new();
    let mut unplaced: Vec<&str> = Vec::new();
    for (node, t) in nodes {
        match t.as_deref().and_then(parts) {
            Some((c, b, s)) => {
                let s = if s.is_empty() { b } else { s };
                tree.entry(c).or_default().entry(b).or_default().entry(s).or_default().push(node);
            }
            None => unplaced.push(node),
        }
    }
    let hl = |v: &[&str]| crate::hostlist::compress(v);
    let mut out = String::from("# Written by slurm-dws from GCE's physical host topology; do not edit.\n");
    match (kind, yaml) {
        (TopologyKind::None, _) => {}
        (TopologyKind::Tree, false) => {
            let mut top: Vec<&str> = tree.keys().copied().collect();
            if !unplaced.is_empty() {
                top.push(UNPLACED);
            }
            out.push_str(&format!("SwitchName=root Switches={}\n", top.join(",")));
            for (c, blocks) in &tree {
                out.push_str(&format!(
                    "SwitchName={c} Switches={}\n",
                    blocks.keys().copied().collect::<Vec<_>>().join(",")
                ));
                for (b, subs) in blocks {
                    out.push_str(&format!(
                        "SwitchName={b} Switches={}\n",
                        subs.keys().copied().collect::<Vec<_>>().join(",")
                    ));
                    for (s, ns) in subs {
                        out.push_str(&format!("SwitchName={s} Nodes={}\n", hl(ns)));
                    }
                }
            }
            if !unplaced.is_empty() {
                out.push_str(&format!("SwitchName={UNPLACED} Nodes={}\n", hl(&unplaced)));
            }
        }
        (TopologyKind::Block, false) => {
            for blocks in tree.values() {
                for (b, subs) in blocks {
                    let ns: Vec<&str> = subs.values().flatten().copied().collect();
                    out.push_str(&format!("BlockName={b} Nodes={}\n", hl(&ns)));
                }
            }
            if !unplaced.is_empty() {
                out.push_str(&format!("BlockName={UNPLACED} Nodes={}\n", hl(&unplaced)));
            }
            // Slurm takes the first block's node count as the base block size unless told, and a
            // block smaller than that is fatal (24.11: "children count lower than
            // bblock_node_cnt"): GCE's blocks hold any number of our nodes, so the base is 1.
            out.push_str("BlockSizes=1\n");
        }
        (TopologyKind::Tree, true) => {
            out.push_str("- topology: default\n  cluster_default: true\n  tree:\n    switches:\n");
            let mut top: Vec<&str> = tree.keys().copied().collect();
            if !unplaced.is_empty() {
                top.push(UNPLACED);
            }
            let sw = |out: &mut String, name: &str, key: &str, v: String| {
                out.push_str(&format!("      - switch: \"{name}\"\n        {key}: \"{v}\"\n"));
            };
            sw(&mut out, "root", "children", top.join(","));
            for (c, blocks) in &tree {
                sw(&mut out, c, "children", blocks.keys().copied().collect::<Vec<_>>().join(","));
                for (b, subs) in blocks {
                    sw(&mut out, b, "children", subs.keys().copied().collect::<Vec<_>>().join(","));
                    for (s, ns) in subs {
                        sw(&mut out, s, "nodes", hl(ns));
                    }
                }
            }
            if !unplaced.is_empty() {
                sw(&mut out, UNPLACED, "nodes", hl(&unplaced));
            }
        }
        (TopologyKind::Block, true) => {
            out.push_str(
                "- topology: default\n  cluster_default: true\n  block:\n    block_sizes: [1]\n    blocks:\n",
            );
            for blocks in tree.values() {
                for (b, subs) in blocks {
                    let ns: Vec<&str> = subs.values().flatten().copied().collect();
                    out.push_str(&format!("      - block: \"{b}\"\n        nodes: \"{}\"\n", hl(&ns)));
                }
            }
            if !unplaced.is_empty() {
                out.push_str(&format!(
                    "      - block: \"{UNPLACED}\"\n        nodes: \"{}\"\n",
                    hl(&unplaced)
                ));
            }
        }
    }
    out
}

/// What identifies one version of the file on disk: its length and modification time
/// (`None` when it cannot be read).
pub type FileStamp = Option<(u64, std::time::SystemTime)>;

/// The file's [`FileStamp`] now.
pub fn stamp(path: &Path) -> FileStamp {
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()?))
}

/// Keeps the file: what was last written, when Slurm last loaded it.
#[derive(Debug, Clone)]
pub struct Keeper {
    pub path: PathBuf,
    pub kind: TopologyKind,
    pub yaml: bool,
    written: Option<String>,
    /// The file as slurm-dws left it: another stamp means someone else wrote it (or removed it).
    stamp: FileStamp,
    reloaded_at: Option<DateTime<Utc>>,
    /// Written but not loaded by Slurm yet (rate-limited, or the reconfigure failed).
    reload_due: bool,
    /// [`placement_digest`] of the VM list the file was last rendered from.
    rendered_from: Option<u64>,
}

/// A digest of where the listed VMs run (name and topology of each, in list order): the same digest
/// means the same file, so a steady pass renders nothing (at 10,000 nodes the render is the
/// topology's whole cost; `make bench`).
pub fn placement_digest<'a>(vms: impl Iterator<Item = (&'a str, Option<&'a str>)>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for (name, topology) in vms {
        name.hash(&mut h);
        topology.hash(&mut h);
    }
    h.finish()
}

/// What to do this pass (pure: [`Keeper::decide`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// New content to write (it differs from what the file holds).
    pub write: Option<String>,
    /// Run `scontrol reconfigure` now.
    pub reload: bool,
}

impl Keeper {
    /// A keeper for `path`; what the file holds now counts as written (a restart rewrites nothing
    /// and reloads nothing when the placement has not changed).
    pub fn new(path: PathBuf, kind: TopologyKind, yaml: bool) -> Keeper {
        let written = std::fs::read_to_string(&path).ok();
        let stamp = stamp(&path);
        Keeper { path, kind, yaml, written, stamp, reloaded_at: None, reload_due: false, rendered_from: None }
    }

    /// Whether this pass has nothing to do: the VMs are placed as when the file was last rendered
    /// (`digest`), the file is as slurm-dws left it and no reload waits. Otherwise the caller
    /// renders and [`Keeper::decide`]s, then gives the digest to [`Keeper::rendered`].
    pub fn unchanged(&self, digest: u64, on_disk: &FileStamp) -> bool {
        self.rendered_from == Some(digest)
            && *on_disk == self.stamp
            && self.written.is_some()
            && !self.reload_due
    }

    /// The file was rendered (and written when it changed) from VMs placed as `digest` says.
    pub fn rendered(&mut self, digest: u64) {
        self.rendered_from = Some(digest);
    }

    /// The file on disk is `now` (one `stat` a pass): when it is not as slurm-dws left it (edited,
    /// replaced or removed by someone else), its content is unknown, so this pass writes it again.
    pub fn seen_on_disk(&mut self, now: FileStamp) {
        if now != self.stamp {
            self.written = None;
        }
    }

    /// Given the file's text for this pass, what to do at `now`.
    pub fn decide(&mut self, content: String, now: DateTime<Utc>) -> Decision {
        let write = (self.written.as_deref() != Some(content.as_str())).then_some(content);
        if write.is_some() {
            self.reload_due = true;
        }
        let may = self.reloaded_at.is_none_or(|t| now - t >= Duration::seconds(MIN_RELOAD_INTERVAL_SECS));
        Decision { write, reload: self.reload_due && may }
    }

    /// The file now holds `content`, and is `stamp` on disk.
    pub fn written(&mut self, content: String, stamp: FileStamp) {
        self.written = Some(content);
        self.stamp = stamp;
    }

    /// Slurm loaded it at `now`.
    pub fn reloaded(&mut self, now: DateTime<Utc>) {
        self.reloaded_at = Some(now);
        self.reload_due = false;
    }
}

/// Writes `content` to `path` atomically: a temporary file beside it, synced, renamed over it.
pub fn write_atomically(path: &Path, content: &str) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.slurm-dws.tmp",
        path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default()
    ));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(content.as_bytes())?;
    f.sync_all()?;
    drop(f);
    std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o644))?;
    std::fs::rename(&tmp, path)
}

/// The file's default path: beside slurm.conf, `topology.yaml` from 25.05, `topology.conf` before.
pub fn default_path(slurm_conf: Option<&Path>, yaml: bool) -> PathBuf {
    let dir = slurm_conf.and_then(Path::parent).unwrap_or(Path::new("/etc/slurm"));
    dir.join(if yaml { "topology.yaml" } else { "topology.conf" })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn nodes(v: &[(&str, Option<&str>)]) -> BTreeMap<String, Option<String>> {
        v.iter().map(|(n, t)| (n.to_string(), t.map(str::to_string))).collect()
    }

    #[test]
    fn files_for_each_kind_and_release() {
        let n = nodes(&[
            ("hpc-a3u-0", Some("c1/b1/s1/h1")),
            ("hpc-a3u-1", Some("c1/b1/s1/h2")),
            ("hpc-a3u-2", Some("c1/b1/s2/h3")),
            ("hpc-a3u-3", Some("c1/b2/s3/h4")),
            ("hpc-a3u-4", None),
            ("hpc-a3u-5", None),
        ]);
        let body = |s: String| s.lines().skip(1).collect::<Vec<_>>().join("\n");
        assert_eq!(
            body(render(TopologyKind::Tree, false, &n)),
            "SwitchName=root Switches=c1,unplaced\nSwitchName=c1 Switches=b1,b2\nSwitchName=b1 Switches=s1,s2\n\
             SwitchName=s1 Nodes=hpc-a3u-[0-1]\nSwitchName=s2 Nodes=hpc-a3u-2\nSwitchName=b2 Switches=s3\n\
             SwitchName=s3 Nodes=hpc-a3u-3\nSwitchName=unplaced Nodes=hpc-a3u-[4-5]"
        );
        assert_eq!(
            body(render(TopologyKind::Block, false, &n)),
            "BlockName=b1 Nodes=hpc-a3u-[0-2]\nBlockName=b2 Nodes=hpc-a3u-3\nBlockName=unplaced Nodes=hpc-a3u-[4-5]\nBlockSizes=1"
        );
        let y = render(TopologyKind::Block, true, &n);
        assert!(
            y.contains("  block:\n    block_sizes: [1]\n    blocks:\n      - block: \"b1\"\n        nodes: \"hpc-a3u-[0-2]\"\n"),
            "{y}"
        );
        let y = render(TopologyKind::Tree, true, &n);
        assert!(y.contains("      - switch: \"s1\"\n        nodes: \"hpc-a3u-[0-1]\"\n"), "{y}");
        assert!(y.contains("      - switch: \"root\"\n        children: \"c1,unplaced\"\n"), "{y}");
        // Nothing placed yet: every node is still in the file.
        let none = nodes(&[("hpc-a3u-0", None)]);
        assert_eq!(
            body(render(TopologyKind::Block, false, &none)),
            "BlockName=unplaced Nodes=hpc-a3u-0\nBlockSizes=1"
        );
        assert_eq!(block_of("c1/b1/s1/h1"), Some("b1"));
        assert_eq!(block_of("//"), None);
    }

    #[test]
    fn written_only_on_change_and_loaded_at_most_once_a_minute() {
        let t0 = Utc.with_ymd_and_hms(2026, 11, 25, 12, 0, 0).unwrap();
        let dir = std::env::temp_dir().join(format!("slurm-dws-topo-test-{}", std::process::id()));
        let mut k = Keeper::new(dir.join("none.conf"), TopologyKind::Block, false);
        let d = k.decide("a".into(), t0);
        assert_eq!(d, Decision { write: Some("a".into()), reload: true });
        k.written("a".into(), None);
        k.reloaded(t0);
        assert_eq!(k.decide("a".into(), t0 + Duration::seconds(5)), Decision { write: None, reload: false });
        // Changed 10 s later: written now, loaded once a minute has passed.
        assert_eq!(
            k.decide("b".into(), t0 + Duration::seconds(10)),
            Decision { write: Some("b".into()), reload: false }
        );
        k.written("b".into(), None);
        assert_eq!(k.decide("b".into(), t0 + Duration::seconds(30)), Decision { write: None, reload: false });
        assert_eq!(k.decide("b".into(), t0 + Duration::seconds(60)), Decision { write: None, reload: true });
        k.reloaded(t0 + Duration::seconds(60));
        assert_eq!(
            k.decide("b".into(), t0 + Duration::seconds(200)),
            Decision { write: None, reload: false }
        );
        // Someone else wrote the file (another stamp): written again, loaded at once (a minute passed).
        k.seen_on_disk(None);
        assert_eq!(
            k.decide("b".into(), t0 + Duration::seconds(201)),
            Decision { write: None, reload: false }
        );
        let edited = Some((7, std::time::SystemTime::UNIX_EPOCH));
        k.seen_on_disk(edited);
        assert_eq!(
            k.decide("b".into(), t0 + Duration::seconds(202)),
            Decision { write: Some("b".into()), reload: true }
        );
        k.written("b".into(), edited);
        k.reloaded(t0 + Duration::seconds(202));
        k.seen_on_disk(edited);
        assert_eq!(
            k.decide("b".into(), t0 + Duration::seconds(300)),
            Decision { write: None, reload: false }
        );
    }

    #[test]
    fn a_steady_pass_renders_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("topology.conf");
        let t0 = Utc.with_ymd_and_hms(2026, 11, 25, 12, 0, 0).unwrap();
        let placed = [("hpc-a-0", Some("c/b/s/h")), ("hpc-a-1", None)];
        let digest = placement_digest(placed.iter().copied());
        let mut k = Keeper::new(path.clone(), TopologyKind::Block, false);
        assert!(!k.unchanged(digest, &stamp(&path)), "nothing written yet");
        let d = k.decide("x\n".into(), t0);
        write_atomically(&path, d.write.as_deref().unwrap()).unwrap();
        k.written("x\n".into(), stamp(&path));
        k.rendered(digest);
        assert!(!k.unchanged(digest, &stamp(&path)), "the reload is still due");
        k.reloaded(t0);
        assert!(k.unchanged(digest, &stamp(&path)));
        // A VM placed elsewhere, or one more VM: another digest.
        let moved = placement_digest([("hpc-a-0", Some("c/b2/s/h")), ("hpc-a-1", None)].into_iter());
        let grown =
            placement_digest([("hpc-a-0", Some("c/b/s/h")), ("hpc-a-1", Some("c/b/s/h2"))].into_iter());
        assert!(moved != digest && grown != digest);
        assert!(!k.unchanged(moved, &stamp(&path)));
        // The file changed behind slurm-dws's back.
        std::fs::write(&path, "edited\n").unwrap();
        assert!(!k.unchanged(digest, &stamp(&path)));
    }

    #[test]
    fn a_file_someone_else_changed_is_written_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("topology.conf");
        let t0 = Utc.with_ymd_and_hms(2026, 11, 25, 12, 0, 0).unwrap();
        let mut k = Keeper::new(path.clone(), TopologyKind::Tree, false);
        let d = k.decide("ours\n".into(), t0);
        write_atomically(&path, d.write.as_deref().unwrap()).unwrap();
        k.written("ours\n".into(), stamp(&path));
        k.seen_on_disk(stamp(&path));
        assert_eq!(k.decide("ours\n".into(), t0).write, None, "as we left it");
        std::fs::write(&path, "ours\n# an admin's line\n").unwrap();
        k.seen_on_disk(stamp(&path));
        assert_eq!(k.decide("ours\n".into(), t0).write.as_deref(), Some("ours\n"));
        // A restart reads the file as it is: the same content is not written again.
        write_atomically(&path, "ours\n").unwrap();
        let mut k = Keeper::new(path.clone(), TopologyKind::Tree, false);
        k.seen_on_disk(stamp(&path));
        assert_eq!(k.decide("ours\n".into(), t0).write, None);
    }
}
