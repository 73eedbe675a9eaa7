//! Configs: every key of `config::raw::KEYS`, wrong in every way (type, range, pattern, missing,
//! duplicated, misspelt), plus structural damage and files that are not configs at all.
//!
//! The cases are generated from the key list, so a key added to the schema without a row in
//! [`KEY_TABLE`] fails this part. Each case must be refused naming the key (`nodeset[0].zones`), in
//! process (`Config::from_toml_str`) and, for one case per key, through the binary: `check-config`
//! exits 2 with one line, and a hook given the config exits 2 without creating its state directory.
//! `tests/config.rs` and `tests/cli_check_config.rs` hold the hand-written rule-by-rule cases.

use super::resume_files::run_with_deadline;
use super::tally::{refusal_problem, Kind, Tally};
use slurm_dws::config::raw::KEYS;
use slurm_dws::config::Config;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

#[derive(Clone, Copy, PartialEq)]
enum Class {
    Str,
    Path,
    U64,
    U32,
    Bool,
    List,
    /// A price (`[pricing.per_hour]`): any finite number ≥ 0, integers included.
    Price,
}

/// Every key: its valid value in the base config, its type, and values of the right type that are
/// still wrong (range, pattern, cross-key rule).
const KEY_TABLE: &[(&str, &str, Class, &[&str])] = &[
    (
        "cluster_name",
        "\"hpc\"",
        Class::Str,
        &["\"\"", "\"Hpc\"", "\"hpc12345678\"", "\"9hpc\"", "\"hp-c\"", "\"hpc\\n\""],
    ),
    ("state_dir", "\"@STATE@\"", Class::Path, &["\"relative/dir\"", "\"\""]),
    ("socket", "\"@DIR@/s.sock\"", Class::Path, &["\"s.sock\"", "\"\""]),
    ("log_file", "\"@DIR@/log\"", Class::Path, &["\"x.log\"", "\"\""]),
    ("gcp.project", "\"p\"", Class::Str, &["\"\"", "\"My Project\"", "\"p/x\""]),
    (
        "gcp.region",
        "\"us-central1\"",
        Class::Str,
        &["\"\"", "\"us-central1-a\"", "\"US-CENTRAL1\"", "\"us central1\""],
    ),
    (
        "gcp.endpoint",
        "\"https://compute.googleapis.com/compute/v1/\"",
        Class::Str,
        &[
            "\"ftp://x/\"",
            "\"https://\"",
            "\"compute.googleapis.com\"",
            "\"https://host:99999/\"",
            "\"https://a b/\"",
            "\"https://x/?q=1\"",
            "\"https://user:pw@host/\"",
            "\"http://10.0.0.1/compute/v1/\"",
        ],
    ),
    ("gcp.credentials", "\"auto\"", Class::Str, &["\"key.json\"", "\"\"", "\"AUTO\"", "\"none\""]),
    ("gcp.calls_per_minute", "1200", Class::U32, &["0"]),
    ("gcp.read_calls_per_minute", "900", Class::U32, &["0"]),
    ("gcp.write_calls_per_minute", "600", Class::U32, &["0"]),
    ("gcp.request_timeout", "30", Class::U64, &["0"]),
    ("gcp.retry_deadline", "120", Class::U64, &["10", "0"]),
    ("slurm.bin_dir", "\"/usr/bin\"", Class::Path, &["\"bin\"", "\"\""]),
    ("slurm.conf", "\"/etc/slurm/slurm.conf\"", Class::Path, &["\"slurm.conf\"", "\"\""]),
    ("slurm.node_addr", "\"none\"", Class::Str, &["\"external\"", "\"\"", "\"INTERNAL_IP\""]),
    ("slurm.command_timeout", "30", Class::U64, &["0"]),
    ("slurm.topology", "\"tree\"", Class::Str, &["\"torus\"", "\"TREE\"", "\"\""]),
    ("slurm.topology_file", "\"@DIR@/topology.conf\"", Class::Path, &["\"topology.conf\""]),
    // A program on this host: absolute, existing, a regular file, executable.
    (
        "slurm.delegate_resume",
        "\"/bin/sh\"",
        Class::Path,
        &["\"sh\"", "\"/nonexistent/resume.py\"", "\"/etc\"", "\"/etc/passwd\""],
    ),
    (
        "slurm.delegate_suspend",
        "\"/bin/sh\"",
        Class::Path,
        &["\"sh\"", "\"/nonexistent/suspend.py\"", "\"/etc\"", "\"/etc/passwd\""],
    ),
    (
        "slurm.delegate_resume_fail",
        "\"/bin/sh\"",
        Class::Path,
        &["\"sh\"", "\"/nonexistent/suspend.py\"", "\"/etc\"", "\"/etc/passwd\""],
    ),
    ("reconcile.interval", "30", Class::U64, &["0"]),
    ("reconcile.orphan_grace", "300", Class::U64, &[]),
    ("reconcile.mig_gc_grace", "300", Class::U64, &[]),
    ("reconcile.backoff_initial", "60", Class::U64, &["0"]),
    ("reconcile.backoff_max", "1800", Class::U64, &["10"]),
    ("reconcile.admin_comment_interval", "300", Class::U64, &["0"]),
    (
        "daemon.metrics_listen",
        "\"127.0.0.1:9464\"",
        Class::Str,
        &["\"9464\"", "\"127.0.0.1\"", "\"127.0.0.1:99999\"", "\"\"", "\"localhost:9464\""],
    ),
    ("daemon.service_user", "\"slurm\"", Class::Str, &["\"a b\"", "\"-root\"", "\"root;id\""]),
    ("daemon.history_days", "30", Class::U64, &["0"]),
    ("daemon.readers", "\"slurm-admins\"", Class::Str, &["\"a b\"", "\"-wheel\"", "\"adm;id\""]),
    ("daemon.controller", "\"\"", Class::Str, &["\"ctl 1\"", "\"a,b\"", "\"x=y\""]),
    ("daemon.shared_state_dir", "\"\"", Class::Str, &["\"relative/dir\""]),
    ("nodeset.name", "\"a3u\"", Class::Str, &["\"\"", "\"A3U\"", "\"a-3\"", "\"abcdefghijklmno\""]),
    (
        "nodeset.instance_template",
        "\"projects/p/global/instanceTemplates/t\"",
        Class::Str,
        &["\"\"", "\"my-template\"", "\"projects/p/regions/europe-west4/instanceTemplates/t\""],
    ),
    (
        "nodeset.zones",
        "[\"us-central1-a\"]",
        Class::List,
        &[
            "[]",
            "[\"europe-west4-a\"]",
            "[\"us-central1\"]",
            "[\"us-central1-a\", \"us-central1-a\"]",
            "[\"\"]",
        ],
    ),
    (
        "nodeset.region",
        "\"us-central1\"",
        Class::Str,
        &["\"\"", "\"us-east5\"", "\"US-CENTRAL1\"", "\"us-central1-a\""],
    ),
    ("nodeset.node_count_static", "1", Class::U32, &["100000"]),
    ("nodeset.node_count_dynamic_max", "4", Class::U32, &["100000"]),
    ("nodeset.partition", "\"a3u\"", Class::Str, &["\"a b\"", "\"DEFAULT\"", "\"\""]),
    (
        "nodeset.node_conf",
        "\"CPUs=2\"",
        Class::Str,
        &["\"State=IDLE\"", "\"CPUs=2 # x\"", "\"NodeName=x\"", "\"a\\nb\""],
    ),
    ("nodeset.provisioning_model", "\"flex\"", Class::Str, &["\"preemptible\"", "\"SPOT\"", "\"\""]),
    ("nodeset.exclusive", "true", Class::Bool, &[]),
    ("nodeset.maintenance_reservation", "true", Class::Bool, &[]),
    ("nodeset.fallback_after", "600", Class::U64, &[]),
    ("nodeset.dws_flex.enabled", "true", Class::Bool, &[]),
    ("nodeset.dws_flex.max_run_duration", "3600", Class::U64, &["599", "604801", "0"]),
    ("nodeset.dws_flex.use_job_duration", "true", Class::Bool, &[]),
    ("nodeset.dws_flex.boot_allowance", "600", Class::U64, &["604201"]),
    ("nodeset.dws_flex.queue_timeout", "0", Class::U64, &["59", "1"]),
    ("nodeset.dws_flex.eol_grace", "600", Class::U64, &["3600"]),
    ("nodeset.dws_flex.capacity_advice", "true", Class::Bool, &[]),
    (
        "nodeset.placement.workload_policy",
        "\"projects/p/regions/us-central1/resourcePolicies/wp\"",
        Class::Str,
        &["\"\"", "\"wp\"", "\"projects/p/regions/us-east5/resourcePolicies/wp\""],
    ),
    ("nodeset.placement.max_topology_distance", "\"BLOCK\"", Class::Str, &["\"block\"", "\"HOST\"", "\"\""]),
    (
        "nodeset.placement.accelerator_topology",
        "\"1x72\"",
        Class::Str,
        &["\"72\"", "\"1x\"", "\"0x72\"", "\"\""],
    ),
    (
        "nodeset.reservation.name",
        "\"projects/p/zones/us-central1-a/reservations/r\"",
        Class::Str,
        &[
            "\"\"",
            "\"r\"",
            "\"projects/p/reservations/r\"",
            "\"projects/p/zones/us-central1-b/reservations/r\"",
            "\"projects/p/zones/us-central1-a/reservations/R\"",
        ],
    ),
    (
        "nodeset.reservation.future_reservation",
        "\"projects/p/zones/us-central1-a/futureReservations/f\"",
        Class::Str,
        &["\"f\"", "\"projects/p/zones/us-central1-a/reservations/f\""],
    ),
    ("nodeset.reservation.eol_grace", "600", Class::U64, &["86401"]),
    ("pricing.currency", "\"USD\"", Class::Str, &["\"\"", "\"usd\"", "\"US\"", "\"DOLLARS\""]),
    ("pricing.catalog", "false", Class::Bool, &[]),
    ("pricing.per_hour.<machine_type>.flex", "40.0", Class::Price, &["-1.0", "nan", "-inf", "inf"]),
    ("pricing.per_hour.<machine_type>.spot", "30", Class::Price, &["-0.01", "nan"]),
    ("pricing.per_hour.<machine_type>.standard", "85.5", Class::Price, &["-85.5", "inf"]),
    ("pricing.per_hour.<machine_type>.reservation", "0", Class::Price, &["-1", "-nan"]),
];

/// The machine type the campaign's `[pricing.per_hour]` entries are for.
const MACHINE_TYPE: &str = "a3-ultragpu-8g";

/// Keys of a reservation nodeset (`provisioning_model = "reservation"`): a case of one makes the
/// base nodeset a reservation one, without the Flex-only keys it cannot have; `name` and
/// `future_reservation` exclude each other.
const RESERVATION_KEYS: &[&str] =
    &["nodeset.reservation.name", "nodeset.reservation.future_reservation", "nodeset.reservation.eol_grace"];

/// What a reservation key's case leaves out of the base: the Flex-only keys and the other way to
/// name the reservation.
fn reservation_excluded(key: &str) -> Vec<&'static str> {
    let mut out = vec!["nodeset.dws_flex.enabled", "nodeset.dws_flex.capacity_advice"];
    if key == "nodeset.reservation.future_reservation" {
        out.push("nodeset.reservation.name");
    } else {
        out.push("nodeset.reservation.future_reservation");
    }
    out
}

/// Keys the base config leaves out: `workload_policy` (an existing policy) excludes the keys of a
/// policy slurm-dws owns, which the base carries. A case of such a key takes those out.
const NOT_IN_BASE: &[(&str, &[&str])] = &[(
    "nodeset.placement.workload_policy",
    &["nodeset.placement.max_topology_distance", "nodeset.placement.accelerator_topology"],
)];

/// Keys an admin must write (everything else has a default).
const REQUIRED: &[&str] = &[
    "cluster_name",
    "gcp.project",
    "gcp.region",
    "nodeset.name",
    "nodeset.instance_template",
    "nodeset.zones",
];

/// Values of the wrong TOML type for a class.
fn wrong_types(c: Class) -> Vec<&'static str> {
    let mut v = vec!["{ a = 1 }", "1979-05-27T07:32:00Z"];
    if c != Class::Price {
        v.push("1.5");
    }
    match c {
        Class::Str | Class::Path => v.extend(["1", "true", "[\"x\"]"]),
        Class::U64 => v.extend(["\"30\"", "-1", "true", "[1]", "nan", "inf", "9223372036854775808"]),
        Class::U32 => v.extend(["\"30\"", "-1", "true", "[1]", "4294967296"]),
        Class::Bool => v.extend(["\"true\"", "1", "\"yes\""]),
        Class::List => v.extend(["\"us-central1-a\"", "[1]", "[[\"us-central1-a\"]]", "true"]),
        Class::Price => v.extend(["\"40\"", "true", "[1.0]"]),
    }
    v
}

fn section_of(key: &str) -> (&str, &str) {
    match key.rsplit_once('.') {
        Some((s, k)) => (s, k),
        None => ("", key),
    }
}

/// The key as an error names it: `nodeset.zones` → `nodeset[0].zones`,
/// `pricing.per_hour.<machine_type>.flex` → `pricing.per_hour.a3-ultragpu-8g.flex`.
fn named(key: &str, nodeset: usize) -> String {
    let key = &key.replace(slurm_dws::config::raw::MACHINE_TYPE, MACHINE_TYPE);
    key.strip_prefix("nodeset.").map_or_else(|| key.to_string(), |rest| format!("nodeset[{nodeset}].{rest}"))
}

/// Renders the full config with `values` (key → value text, None = leave the key out) and extra
/// lines per section.
fn render(dir: &Path, values: &[(&str, Option<String>)], extra: &[(&str, String)]) -> String {
    let sections = [
        "",
        "gcp",
        "slurm",
        "reconcile",
        "daemon",
        "nodeset",
        "nodeset.dws_flex",
        "nodeset.placement",
        "nodeset.reservation",
        "pricing",
        "pricing.per_hour.<machine_type>",
    ];
    let mut out = String::new();
    for s in sections {
        let mut body = String::new();
        for (key, v) in values {
            let (sec, k) = section_of(key);
            if sec == s {
                if let Some(v) = v {
                    body.push_str(&format!("{k} = {v}\n"));
                }
            }
        }
        for (sec, line) in extra {
            if *sec == s {
                body.push_str(line);
                body.push('\n');
            }
        }
        // A table with nothing in it is left out ([nodeset.reservation] is only for a reservation
        // nodeset); the nodeset itself always is there.
        match s {
            "" => {}
            "nodeset" => out.push_str("[[nodeset]]\n"),
            _ if body.is_empty() => continue,
            s => out
                .push_str(&format!("[{}]\n", s.replace(slurm_dws::config::raw::MACHINE_TYPE, MACHINE_TYPE))),
        }
        out.push_str(&body);
    }
    out.replace("@STATE@", &dir.join("state").display().to_string())
        .replace("@DIR@", &dir.display().to_string())
}

fn base_values() -> Vec<(&'static str, Option<String>)> {
    KEY_TABLE
        .iter()
        .map(|(k, v, _, _)| {
            let out = NOT_IN_BASE.iter().any(|(n, _)| n == k) || RESERVATION_KEYS.contains(k);
            (*k, (!out).then(|| v.to_string()))
        })
        .collect()
}

fn with(key: &str, value: Option<String>) -> Vec<(&'static str, Option<String>)> {
    let mut excluded: Vec<&str> =
        NOT_IN_BASE.iter().find(|(n, _)| *n == key).map_or(vec![], |(_, e)| e.to_vec());
    let reserved = RESERVATION_KEYS.contains(&key);
    if reserved {
        excluded.extend(reservation_excluded(key));
    }
    let value_of = |k: &str| KEY_TABLE.iter().find(|r| r.0 == k).map(|r| r.1.to_string());
    base_values()
        .into_iter()
        .map(|(k, v)| {
            if k == key {
                (k, value.clone())
            } else if excluded.contains(&k) {
                (k, None)
            } else if reserved && k == "nodeset.provisioning_model" {
                (k, Some("\"reservation\"".to_string()))
            } else if reserved && RESERVATION_KEYS.contains(&k) {
                // The reservation itself, so that the table is whole.
                (k, value_of(k))
            } else {
                (k, v)
            }
        })
        .collect()
}

struct Case {
    what: String,
    text: String,
    key: String,
}

fn cases(dir: &Path) -> Vec<Case> {
    let mut cs = Vec::new();
    for (key, _, class, invalid) in KEY_TABLE {
        for v in wrong_types(*class).into_iter().chain(invalid.iter().copied()) {
            cs.push(Case {
                what: format!("{key} = {v}"),
                text: render(dir, &with(key, Some(v.to_string())), &[]),
                key: named(key, 0),
            });
        }
        let (sec, k) = section_of(key);
        // Misspelt (unknown) key beside it, and the key written twice.
        let v = KEY_TABLE.iter().find(|r| r.0 == *key).unwrap().1;
        // The base with this key set (a key the base leaves out is put in, what it excludes out).
        let keyed = with(key, Some(v.to_string()));
        cs.push(Case {
            what: format!("unknown key {k}x beside {key}"),
            text: render(dir, &keyed, &[(sec, format!("{k}x = 1"))]),
            key: named(&format!("{sec}{}{k}x", if sec.is_empty() { "" } else { "." }), 0),
        });
        cs.push(Case {
            what: format!("{key} twice"),
            text: render(dir, &keyed, &[(sec, format!("{k} = {v}"))]),
            key: named(key, 0),
        });
        if REQUIRED.contains(key) {
            cs.push(Case {
                what: format!("{key} missing"),
                text: render(dir, &with(key, None), &[]),
                key: named(key, 0),
            });
        }
    }
    // Structure: unknown sections, a second nodeset that repeats the first, a bad second nodeset.
    let base = render(dir, &base_values(), &[]);
    for (what, text, key) in [
        ("unknown section [gcpx]", format!("{base}[gcpx]\na = 1\n"), "gcpx"),
        ("unknown table [nodeset.flex]", format!("{base}[nodeset.flex]\na = 1\n"), "nodeset[0].flex"),
        (
            "duplicate nodeset",
            format!(
                "{base}[[nodeset]]\nname = \"a3u\"\ninstance_template = \"global/instanceTemplates/t\"\nzones = [\"us-central1-b\"]\nnode_count_dynamic_max = 1\n"
            ),
            "nodeset[1].name",
        ),
        (
            "second nodeset without zones",
            format!("{base}[[nodeset]]\nname = \"b\"\ninstance_template = \"global/instanceTemplates/t\"\nnode_count_dynamic_max = 1\n"),
            "nodeset[1].zones",
        ),
        ("no nodeset", base.split("[[nodeset]]").next().unwrap().to_string(), "nodeset"),
        ("nodeset as a table", base.replace("[[nodeset]]", "[nodeset]"), "nodeset"),
        ("gcp as a value", base.replace("[gcp]\n", "gcp = 1\n[gcpq]\n"), "gcp"),
    ] {
        cs.push(Case { what: what.into(), text, key: key.into() });
    }
    cs
}

pub fn run() -> Vec<Tally> {
    let mut t = Tally::new("config file", Kind::Input);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The table covers the schema exactly.
    let table: Vec<&str> = KEY_TABLE.iter().map(|r| r.0).collect();
    for k in KEYS {
        t.check(table.contains(k), || format!("key {k} has no row in the campaign's KEY_TABLE"));
    }
    let base = render(d, &base_values(), &[]);
    if let Err(e) = Config::from_toml_str(&base, Path::new("/base.toml")) {
        t.fail(format!("the campaign's base config is invalid: {}", e.first_line()));
        return vec![t];
    }
    let bin = env!("CARGO_BIN_EXE_slurm-dws");
    let mut through_binary: Vec<String> = Vec::new();
    for (i, c) in cases(d).into_iter().enumerate() {
        t.tried += 1;
        match Config::from_toml_str(&c.text, Path::new("/case.toml")) {
            Ok(_) => t.accepted_wrongly(format!("{} (config accepted)", c.what)),
            Err(e) => {
                let line = e.first_line();
                // The full path, or (for a rule over two keys, reported on the other one) the
                // nodeset and the key's own name.
                let (scope, leaf) = c.key.rsplit_once('.').unwrap_or(("", &c.key));
                let names = line.contains(&c.key) || (line.contains(scope) && line.contains(leaf));
                if !names || line.contains('\n') {
                    t.fail(format!("{}: the error does not name {}: {line}", c.what, c.key));
                }
            }
        }
        // One case per key (and every structural one) also goes through the real binary.
        let key_root = c.key.clone();
        if through_binary.contains(&key_root) {
            continue;
        }
        through_binary.push(key_root);
        let path = d.join(format!("case-{i}.toml"));
        std::fs::write(&path, &c.text).unwrap();
        let out = Command::new(bin).args(["check-config", "--config"]).arg(&path).output().unwrap();
        t.tried += 1;
        if let Some(p) = refusal_problem(&out, 2, &[&c.key]) {
            t.fail(format!("check-config with {}: {p}", c.what));
        }
        // The hooks load the same config (found through $SLURM_DWS_CONFIG): exit 2, nothing created.
        if i % 3 == 0 {
            t.tried += 1;
            let mut cmd = Command::new(bin);
            cmd.args(["resume", "hpc-a3u-1"]).env_clear().env("SLURM_DWS_CONFIG", &path);
            let out = run_with_deadline(cmd, Duration::from_secs(10)).expect("hook finishes");
            if let Some(p) = refusal_problem(&out, 2, &[&c.key]) {
                t.fail(format!("resume hook with {}: {p}", c.what));
            }
            if d.join("state").exists() {
                t.state_changed(format!("resume hook with {} created the state directory", c.what));
                let _ = std::fs::remove_dir_all(d.join("state"));
            }
        }
    }
    // Files that are not configs.
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("empty", vec![]),
        ("not UTF-8", b"cluster_name = \"\xff\"\n".to_vec()),
        ("binary junk", (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect()),
        ("an unterminated string", b"cluster_name = \"hpc\n".to_vec()),
        ("10 MB of comments", vec![b'#'; 10 << 20]),
    ];
    for (what, bytes) in files {
        let path = d.join("bad-file.toml");
        std::fs::write(&path, bytes).unwrap();
        t.tried += 1;
        let out = Command::new(bin).args(["check-config", "--config"]).arg(&path).output().unwrap();
        if let Some(p) = refusal_problem(&out, 2, &["bad-file.toml"]) {
            t.fail(format!("config file that is {what}: {p}"));
        }
    }
    for (what, path) in
        [("a directory", "/"), ("missing", "/nonexistent/x.toml"), ("endless (/dev/zero)", "/dev/zero")]
    {
        t.tried += 1;
        let mut cmd = Command::new(bin);
        cmd.args(["check-config", "--config", path]);
        match run_with_deadline(cmd, Duration::from_secs(10)) {
            None => t.fail(format!("config file that is {what}: check-config did not finish in 10 s")),
            Some(out) => {
                if let Some(p) = refusal_problem(&out, 2, &[path]) {
                    t.fail(format!("config file that is {what}: {p}"));
                }
            }
        }
    }
    vec![t]
}
