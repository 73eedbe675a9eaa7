//! A stand-in for Slurm 22.05's client commands at 10,000 nodes, for the scale section: `sinfo --json`
//! prints a document in the captured 22.05 shape (every field real sinfo prints, ~1.4 KB a node), `squeue
//! --json` the 1,000 jobs, and `scontrol` keeps the reservations it is asked to create so that `scontrol -o
//! show reservation` lists them, as slurmctld would. Real Slurm cannot run 10,000 slurmds on one machine;
//! what the daemon parses and holds in memory is what a real 10,000-node cluster would hand it.

use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The captured 22.05.8 `sinfo --json` output the node template comes from.
const SINFO_SAMPLE: &str = include_str!("../../src/slurm/testdata/sinfo-22.05-powered-down.json");
/// The captured 22.05.8 `squeue --json` output the job template comes from.
const SQUEUE_SAMPLE: &str = include_str!("../../src/slurm/testdata/squeue-22.05.json");

/// Slurm's view of the nodes, as the bench moves it along.
#[derive(Debug, Clone, Copy)]
pub enum NodeView {
    /// Allocated to their jobs and powering up (`allocated#`): the resume is in progress.
    PoweringUp,
    /// Allocated and responding: slurmd registered on every VM.
    Running,
}

pub struct FakeSlurm {
    pub bin_dir: PathBuf,
    dir: PathBuf,
    nodes: u32,
    per_job: u32,
    /// Nodes `hpc-a-{nodes}..` beyond the jobs' nodes: powered down (`idle~`) until a bench resumes
    /// one (see [`FakeSlurm::resume_spare`]).
    spares: u32,
    /// Spares resumed so far, with the view Slurm has of each.
    spare_views: std::cell::RefCell<Vec<NodeView>>,
    view: std::cell::Cell<NodeView>,
}

impl FakeSlurm {
    /// Writes the three commands into `dir/bin` for `nodes` nodes `hpc-a-0..` in jobs of `per_job`.
    pub fn create(dir: &Path, nodes: u32, per_job: u32) -> std::io::Result<FakeSlurm> {
        Self::with_spares(dir, nodes, per_job, 0)
    }

    /// [`FakeSlurm::create`] with `spares` more nodes, powered down.
    pub fn with_spares(dir: &Path, nodes: u32, per_job: u32, spares: u32) -> std::io::Result<FakeSlurm> {
        let bin_dir = dir.join("bin");
        std::fs::create_dir_all(&bin_dir)?;
        let d = dir.display();
        let scripts = [
            ("sinfo", format!("#!/bin/sh\nexec cat '{d}/sinfo.json'\n")),
            ("squeue", format!("#!/bin/sh\nexec cat '{d}/squeue.json'\n")),
            (
                "scontrol",
                format!(
                    r#"#!/bin/sh
res='{d}/reservations'
case "$1 $2 $3" in
  "--version  ")
    echo "slurm 22.05.8" ;;
  "-o show reservation")
    if [ -s "$res" ]; then exec cat "$res"; else echo "No reservations in the system"; fi ;;
  "create reservation "*)
    name= nodes= start= end=
    for a in "$@"; do
      case "$a" in
        reservationname=*) name="${{a#*=}}" ;;
        nodes=*) nodes="${{a#*=}}" ;;
        starttime=*) start="${{a#*=}}" ;;
        endtime=*) end="${{a#*=}}" ;;
      esac
    done
    echo "ReservationName=$name StartTime=$start EndTime=$end Duration=01:00:00 Nodes=$nodes NodeCnt=1 CoreCnt=1 Features=(null) PartitionName=(null) Flags=MAINT,IGNORE_JOBS,SPEC_NODES TRES=cpu=1 Users=root Groups=(null) Accounts=(null) Licenses=(null) State=INACTIVE BurstBuffer=(null) Watts=n/a MaxStartDelay=(null)" >> "$res"
    echo "Reservation created: $name" ;;
  *) exit 0 ;;
esac
"#
                ),
            ),
        ];
        for (name, text) in scripts {
            let path = bin_dir.join(name);
            std::fs::write(&path, text)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        }
        let fake = FakeSlurm {
            bin_dir,
            dir: dir.to_path_buf(),
            nodes,
            per_job,
            spares,
            spare_views: Default::default(),
            view: std::cell::Cell::new(NodeView::PoweringUp),
        };
        fake.set_nodes(NodeView::PoweringUp)?;
        std::fs::write(dir.join("squeue.json"), fake.squeue())?;
        Ok(fake)
    }

    /// Slurm resumes spare `i` (node `hpc-a-{nodes + i}`) for job `job` of one node, as slurmctld does
    /// before it runs the ResumeProgram: the node shows `allocated#`, the job is in `squeue`. Returns
    /// the node's name and the resume file the hook gets.
    pub fn resume_spare(&self, i: u32, job: u32) -> std::io::Result<(String, String)> {
        let name = format!("hpc-a-{}", self.nodes + i);
        {
            let mut views = self.spare_views.borrow_mut();
            while views.len() <= i as usize {
                views.push(NodeView::PoweringUp);
            }
            views[i as usize] = NodeView::PoweringUp;
        }
        self.set_nodes(self.view.get())?;
        let mut doc: Value = serde_json::from_str(&self.squeue()).expect("json");
        let template = doc["jobs"][0].clone();
        let jobs = doc["jobs"].as_array_mut().expect("jobs");
        for (k, _) in self.spare_views.borrow().iter().enumerate() {
            let mut j = template.clone();
            j["job_id"] = json!(job - i + k as u32);
            j["nodes"] = json!(format!("hpc-a-{}", self.nodes + k as u32));
            jobs.push(j);
        }
        std::fs::write(self.dir.join("squeue.json"), serde_json::to_string_pretty(&doc).expect("json"))?;
        let resume = json!({"jobs": [{"job_id": job, "nodes": name}], "all_nodes": name}).to_string();
        Ok((name, resume))
    }

    /// The resumed spare `i` runs (slurmd registered on its VM).
    pub fn spare_running(&self, i: u32) -> std::io::Result<()> {
        self.spare_views.borrow_mut()[i as usize] = NodeView::Running;
        self.set_nodes(self.view.get())
    }

    /// Rewrites what `sinfo --json` prints.
    pub fn set_nodes(&self, view: NodeView) -> std::io::Result<()> {
        self.view.set(view);
        let mut doc: Value = serde_json::from_str(SINFO_SAMPLE).expect("captured sinfo parses");
        let template = doc["nodes"][0].clone();
        let spare_views = self.spare_views.borrow();
        let nodes: Vec<Value> = (0..self.nodes + self.spares)
            .map(|i| {
                let view = if i < self.nodes {
                    Some(view)
                } else {
                    spare_views.get((i - self.nodes) as usize).copied()
                };
                let flags: &[&str] = match view {
                    Some(NodeView::PoweringUp) => &["CLOUD", "NOT_RESPONDING", "POWERING_UP"],
                    Some(NodeView::Running) => &["CLOUD"],
                    None => &["CLOUD", "POWERED_DOWN"],
                };
                let mut n = template.clone();
                let name = format!("hpc-a-{i}");
                n["name"] = json!(name);
                n["hostname"] = json!(name);
                n["state"] = json!(if view.is_some() { "allocated" } else { "idle" });
                n["state_flags"] = json!(flags);
                n["partitions"] = json!(["a"]);
                n["port"] = json!(6818);
                n["alloc_cpus"] = json!(if view.is_some() { 1 } else { 0 });
                n["idle_cpus"] = json!(if view.is_some() { 0 } else { 1 });
                n
            })
            .collect();
        doc["nodes"] = Value::Array(nodes);
        // Real sinfo pretty-prints with two-space indents.
        std::fs::write(self.dir.join("sinfo.json"), serde_json::to_string_pretty(&doc).expect("json"))
    }

    /// Bytes `sinfo --json` prints now.
    pub fn sinfo_bytes(&self) -> u64 {
        std::fs::metadata(self.dir.join("sinfo.json")).map_or(0, |m| m.len())
    }

    /// Reservations created so far.
    pub fn reservations(&self) -> usize {
        std::fs::read_to_string(self.dir.join("reservations")).map_or(0, |s| s.lines().count())
    }

    fn squeue(&self) -> String {
        let mut doc: Value = serde_json::from_str(SQUEUE_SAMPLE).expect("captured squeue parses");
        let template = doc["jobs"][0].clone();
        let jobs: Vec<Value> = (0..self.nodes / self.per_job)
            .map(|j| {
                let mut job = template.clone();
                job["job_id"] = json!(j + 1);
                job["job_state"] = json!("RUNNING");
                job["time_limit"] = json!(60);
                job["partition"] = json!("a");
                job["nodes"] = json!(format!("hpc-a-[{}-{}]", j * self.per_job, (j + 1) * self.per_job - 1));
                job
            })
            .collect();
        doc["jobs"] = Value::Array(jobs);
        serde_json::to_string_pretty(&doc).expect("json")
    }
}
