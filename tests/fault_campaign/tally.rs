//! What a part tried and what held, the campaign's summary line, and the checks every part shares:
//! "one clear line, the documented exit code, and nothing changed in the store".

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

/// What a tally counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Bad input to one entry point.
    Input,
    /// A process fault injected (kill, disk full, lock, Slurm down, clock jump).
    Fault,
    /// A security property checked.
    Security,
}

#[derive(Debug)]
pub struct Tally {
    pub name: String,
    pub kind: Kind,
    /// Inputs tried / faults injected / properties checked.
    pub tried: usize,
    /// Inputs that should have been refused and were accepted.
    pub accepted_wrongly: usize,
    /// Refused inputs after which the store was not what it was before.
    pub state_changes: usize,
    /// Everything that did not hold, one line each.
    pub failures: Vec<String>,
    /// What was skipped and why (said in the summary, never silent).
    pub skipped: Vec<String>,
    pub elapsed: Duration,
}

impl Tally {
    pub fn new(name: &str, kind: Kind) -> Tally {
        Tally {
            name: name.into(),
            kind,
            tried: 0,
            accepted_wrongly: 0,
            state_changes: 0,
            failures: Vec::new(),
            skipped: Vec::new(),
            elapsed: Duration::ZERO,
        }
    }

    pub fn fail(&mut self, what: impl Into<String>) {
        let what = what.into();
        // A storm of the same failure says nothing more after the first few.
        if self.failures.len() < 40 {
            self.failures.push(what);
        } else if self.failures.len() == 40 {
            self.failures.push("... (more failures not shown)".into());
        }
    }

    pub fn accepted_wrongly(&mut self, what: impl Into<String>) {
        self.accepted_wrongly += 1;
        self.fail(format!("accepted wrongly: {}", what.into()));
    }

    pub fn state_changed(&mut self, what: impl Into<String>) {
        self.state_changes += 1;
        self.fail(format!("state changed on rejection: {}", what.into()));
    }

    /// Counts one try and records a failure when `ok` is false.
    pub fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        self.tried += 1;
        if !ok {
            self.fail(what());
        }
    }

    pub fn line(&self) -> String {
        let kind = match self.kind {
            Kind::Input => "inputs",
            Kind::Fault => "faults",
            Kind::Security => "checks",
        };
        let mut s = format!(
            "  {:<34} {:>6} {kind:<6} {:>3} failed  {:>5.1}s",
            self.name,
            self.tried,
            self.failures.len(),
            self.elapsed.as_secs_f64()
        );
        for sk in &self.skipped {
            s.push_str(&format!("\n  {:<34} SKIPPED: {sk}", ""));
        }
        s
    }
}

/// The one line the campaign ends with.
pub fn summary(tallies: &[Tally], elapsed: Duration) -> String {
    let of = |k: Kind| tallies.iter().filter(move |t| t.kind == k);
    let inputs: usize = of(Kind::Input).map(|t| t.tried).sum();
    // "hostlist: fuzz" and "hostlist: vs scontrol" are two tallies of one entry point.
    let mut entries: Vec<&str> = of(Kind::Input).map(|t| t.name.split(':').next().unwrap_or("")).collect();
    entries.dedup();
    let entry_points = entries.len();
    let wrong: usize = tallies.iter().map(|t| t.accepted_wrongly).sum();
    let changes: usize = tallies.iter().map(|t| t.state_changes).sum();
    let faults: usize = of(Kind::Fault).map(|t| t.tried).sum();
    let faults_failed: usize = of(Kind::Fault).map(|t| t.failures.len()).sum();
    let checks: usize = of(Kind::Security).map(|t| t.tried).sum();
    let checks_failed: usize = of(Kind::Security).map(|t| t.failures.len()).sum();
    let input_failed: usize = of(Kind::Input).map(|t| t.failures.len()).sum();
    let skipped: usize = tallies.iter().map(|t| t.skipped.len()).sum();
    format!(
        "fault campaign: {inputs} inputs tried across {entry_points} entry points, {wrong} accepted wrongly, \
         {changes} state changes on rejection, {input_failed} other input failures; \
         {faults} process faults injected, {} held; {checks} security checks, {} held; \
         {skipped} skipped; {:.0}s",
        faults - faults_failed.min(faults),
        checks - checks_failed.min(checks),
        elapsed.as_secs_f64()
    )
}

// ---- shared checks ----------------------------------------------------------------------------------

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A refusal as the CLI promises it (`src/cli/mod.rs`): exit `code`, exactly one line on stderr that says `slurm-dws:` and
/// contains every word of `names` (what is wrong). `None` when it holds, else what is off.
pub fn refusal_problem(o: &Output, code: i32, names: &[&str]) -> Option<String> {
    let err = stderr(o);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    if o.status.code() != Some(code) {
        return Some(format!("exit {:?}, want {code}; stderr: {}", o.status.code(), err.trim()));
    }
    // A hook also writes its log line to stderr; the error line is the last one.
    let last = lines.last().copied().unwrap_or("");
    if !last.starts_with("slurm-dws: ") && !last.contains("FAILED") {
        return Some(format!("last stderr line is not a slurm-dws error: {err:?}"));
    }
    let error_lines = lines.iter().filter(|l| !l.contains(": FAILED (exit")).count();
    if error_lines != 1 {
        return Some(format!("want one error line, got {error_lines}: {err:?}"));
    }
    for n in names {
        if !last.contains(n) {
            return Some(format!("error does not name {n:?}: {last:?}"));
        }
    }
    None
}

/// The store's content, table by table, as JSON text; or why there is none. Opening it changes no row.
pub type Snapshot = BTreeMap<String, String>;

pub async fn snapshot(state_dir: &Path) -> Snapshot {
    use sqlx::sqlite::SqliteConnectOptions;
    use sqlx::{ConnectOptions, Row};
    let mut out = Snapshot::new();
    let db = state_dir.join(slurm_dws::store::DB_FILE);
    if !state_dir.exists() {
        out.insert("<state_dir>".into(), "absent".into());
        return out;
    }
    if !db.exists() {
        out.insert("<database>".into(), "absent".into());
        return out;
    }
    let mut conn = SqliteConnectOptions::new()
        .filename(&db)
        .create_if_missing(false)
        .busy_timeout(Duration::from_secs(20))
        .connect()
        .await
        .expect("open the store to snapshot it");
    let tables: Vec<String> =
        sqlx::query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .fetch_all(&mut conn)
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<String, _>(0))
            .collect();
    for t in tables {
        let cols: Vec<String> = sqlx::query(&format!("SELECT name FROM pragma_table_info('{t}')"))
            .fetch_all(&mut conn)
            .await
            .unwrap()
            .iter()
            .map(|r| format!("\"{}\"", r.get::<String, _>(0)))
            .collect();
        let rows: Option<String> = sqlx::query(&format!(
            "SELECT json_group_array(json_array({})) FROM (SELECT * FROM \"{t}\" ORDER BY rowid)",
            cols.join(", ")
        ))
        .fetch_one(&mut conn)
        .await
        .unwrap()
        .get(0);
        out.insert(t, rows.unwrap_or_default());
    }
    out
}

/// Tables that differ between two snapshots.
pub fn changed_tables(before: &Snapshot, after: &Snapshot) -> Vec<String> {
    let mut keys: Vec<&String> = before.keys().chain(after.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter().filter(|k| before.get(*k) != after.get(*k)).cloned().collect()
}

/// Rows of one table in a snapshot (parsed back from JSON).
pub fn rows(s: &Snapshot, table: &str) -> Vec<Vec<serde_json::Value>> {
    s.get(table).and_then(|t| serde_json::from_str::<Vec<Vec<serde_json::Value>>>(t).ok()).unwrap_or_default()
}

/// A small seedable generator (splitmix64): the same inputs on every machine, so a failure reproduces.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, options: &'a [T]) -> &'a T {
        &options[self.below(options.len() as u64) as usize]
    }
}

/// A current-thread tokio runtime for a part's async bits.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}
