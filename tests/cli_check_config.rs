//! `slurm-dws check-config` and `version` as a user runs them: the built binary, exit codes, stdout and stderr.

use std::path::Path;
use std::process::{Command, Output};

fn slurm_dws(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_slurm-dws"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("SLURM_DWS_CONFIG")
        .env_remove("SLURM_CONF")
        .output()
        .expect("the binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The example with one line replaced, written to a temp file.
fn broken_example(from: &str, to: &str) -> (tempfile::TempDir, String) {
    broken_example_n(&[(from, to)])
}

/// The example with each `(from, to)` applied once, written to a temp file.
fn broken_example_n(edits: &[(&str, &str)]) -> (tempfile::TempDir, String) {
    let mut text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/slurm-dws.toml")).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "test bug: {from:?}");
        text = text.replacen(from, to, 1);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slurm-dws.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path.display().to_string())
}

/// Exit 2 and exactly one stderr line, which names `key`.
fn assert_rejected(o: &Output, key: &str) -> String {
    assert_eq!(o.status.code(), Some(2), "stderr: {}", stderr(o));
    let err = stderr(o);
    assert_eq!(err.lines().count(), 1, "one stderr line, got {err:?}");
    assert!(err.starts_with("slurm-dws: "), "{err}");
    assert!(err.contains(key), "{err:?} should name {key}");
    err
}

#[test]
fn example_is_valid_and_printed_resolved() {
    let o = slurm_dws(&["check-config", "--config-only", "conf/slurm-dws.toml"]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(&o));
    assert!(stderr(&o).is_empty());
    let out = stdout(&o);
    assert!(out.starts_with("# slurm-dws config read from conf/slurm-dws.toml is valid."), "{out}");
    for line in [
        "cluster_name = \"hpc\"",
        "calls_per_minute = 1200",
        "retry_deadline = 120",
        "backoff_max = 1800",
        "service_user = \"slurm\"",
        "[[nodeset]]",
        "name = \"h4d\"",
        "node_count_static = 0",
        "boot_allowance = 600",
    ] {
        assert!(out.lines().any(|l| l == line), "missing {line:?} in\n{out}");
    }
    // The printed config is itself a valid config.
    let dir = tempfile::tempdir().unwrap();
    let again = dir.path().join("again.toml");
    std::fs::write(&again, &out).unwrap();
    let o2 = slurm_dws(&["check-config", "--config-only", "--config", again.to_str().unwrap()]);
    assert_eq!(o2.status.code(), Some(0), "{}", stderr(&o2));
}

#[test]
fn config_from_the_environment() {
    let o = Command::new(env!("CARGO_BIN_EXE_slurm-dws"))
        .args(["check-config", "--config-only"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("SLURM_DWS_CONFIG", "conf/slurm-dws.toml")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn unknown_key_exits_2_naming_it() {
    let (_d, path) = broken_example("eol_grace = 600", "eol_grace = 600\nbogus_key = 1");
    let err = assert_rejected(&slurm_dws(&["check-config", &path]), "nodeset[0].dws_flex.bogus_key");
    assert!(err.contains("unknown key"), "{err}");
}

#[test]
fn bad_duration_exits_2_naming_it() {
    let (_d, path) = broken_example("max_run_duration = 86400", "max_run_duration = 60");
    let o = slurm_dws(&["check-config", &path]);
    let err = assert_rejected(&o, "nodeset[1].dws_flex.max_run_duration");
    assert!(err.contains("600..604800"), "{err}");
    // stdout lists every problem, one per line.
    assert!(stdout(&o).contains("nodeset[1].dws_flex.max_run_duration"));
}

#[test]
fn capital_letters_in_a_nodeset_name_exit_2() {
    let (_d, path) = broken_example("name = \"a3u\"", "name = \"A3U\"");
    assert_rejected(&slurm_dws(&["check-config", &path]), "nodeset[0].name");
}

#[test]
fn several_problems_still_one_stderr_line() {
    let (_d, path) =
        broken_example_n(&[("name = \"a3u\"", "name = \"A3U\""), ("queue_timeout = 0", "queue_timeout = 5")]);
    let o = slurm_dws(&["check-config", "--config-only", &path]);
    let err = assert_rejected(&o, "nodeset[0].name");
    assert!(err.contains("(and 1 more problem)"), "{err}");
    assert_eq!(stdout(&o).lines().count(), 2, "{}", stdout(&o));
}

#[test]
fn missing_file_exits_2() {
    let err = assert_rejected(
        &slurm_dws(&["check-config", "/nonexistent/slurm-dws.toml"]),
        "/nonexistent/slurm-dws.toml",
    );
    assert!(err.contains("cannot read config"), "{err}");
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(slurm_dws(&["no-such-command"]).status.code(), Some(2));
    assert_eq!(slurm_dws(&["check-config", "--config-only", "--bogus"]).status.code(), Some(2));
    let o = slurm_dws(&["check-config", "--config", "a.toml", "b.toml"]);
    assert_rejected(&o, "disagree");
    let o = slurm_dws(&["check-config", "--print-slurm-conf", "--hook-dir", "rel", "conf/slurm-dws.toml"]);
    assert_rejected(&o, "--hook-dir");
}

#[test]
fn print_slurm_conf() {
    let o = slurm_dws(&[
        "check-config",
        "--config-only",
        "--print-slurm-conf",
        "--hook-dir",
        "/usr/local/sbin",
        "conf/slurm-dws.toml",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    for line in [
        "ResumeProgram=/usr/local/sbin/slurm-dws-resume",
        "SuspendExcNodes=hpc-a3u-[0-1]",
        "NodeName=hpc-a3u-[0-15] State=CLOUD CPUs=208 RealMemory=1800000 Gres=gpu:8",
        "NodeName=hpc-h4d-[0-63] State=CLOUD CPUs=192 RealMemory=720000",
        "PartitionName=a3u Nodes=hpc-a3u-[0-15] ResumeTimeout=65533 State=UP",
        // h4d is exclusive = true: one job per node.
        "PartitionName=cpu Nodes=hpc-h4d-[0-63] ResumeTimeout=65533 OverSubscribe=EXCLUSIVE State=UP",
    ] {
        assert!(out.lines().any(|l| l == line), "missing {line:?} in\n{out}");
    }
    // Without --hook-dir the hooks are expected beside the executable.
    let o = slurm_dws(&["check-config", "--config-only", "--print-slurm-conf", "conf/slurm-dws.toml"]);
    let exe_dir = Path::new(env!("CARGO_BIN_EXE_slurm-dws")).parent().unwrap();
    let want = format!("ResumeProgram={}", exe_dir.join("slurm-dws-resume").display());
    assert!(stdout(&o).lines().any(|l| l == want), "{}", stdout(&o));
}

#[test]
fn version() {
    let o = slurm_dws(&["version"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stdout(&o), format!("slurm-dws {}\n", env!("CARGO_PKG_VERSION")));
}

/// A machine slurm-dws would run on: Slurm's three commands, a slurm.conf and the hook links, all in
/// a temp dir; the config names them and `extra` is appended to its `[slurm]` table.
struct Machine {
    dir: tempfile::TempDir,
    config: String,
}

fn machine(slurm_extra: &str, top_extra: &str) -> Machine {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("bin")).unwrap();
    std::fs::create_dir_all(d.join("sbin")).unwrap();
    for c in ["scontrol", "squeue", "sinfo"] {
        std::fs::write(d.join("bin").join(c), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(d.join("bin").join(c), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for h in ["slurm-dws-resume", "slurm-dws-suspend", "slurm-dws-resume-fail"] {
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_slurm-dws"), d.join("sbin").join(h)).unwrap();
    }
    std::fs::write(d.join("slurm.conf"), "ClusterName=hpc\n").unwrap();
    let text = format!(
        "cluster_name = \"hpc\"\n{top_extra}\n[slurm]\nbin_dir = \"{bin}\"\nconf = \"{conf}\"\n{slurm_extra}\n\
         [[nodeset]]\nname = \"a\"\ninstance_template = \"projects/p/global/instanceTemplates/t\"\n\
         zones = [\"us-central1-a\"]\nnode_count_dynamic_max = 2\n",
        bin = d.join("bin").display(),
        conf = d.join("slurm.conf").display(),
    );
    let config = d.join("slurm-dws.toml");
    std::fs::write(&config, text).unwrap();
    Machine { config: config.display().to_string(), dir }
}

const GCP: &str = "[gcp]\nproject = \"p\"\nregion = \"us-central1\"";

impl Machine {
    fn hook_dir(&self) -> String {
        self.dir.path().join("sbin").display().to_string()
    }

    fn check(&self, extra: &[&str]) -> Output {
        let hook_dir = self.hook_dir();
        let mut args = vec!["check-config", "--hook-dir", &hook_dir, &self.config];
        args.extend_from_slice(extra);
        slurm_dws(&args)
    }
}

#[test]
fn a_machine_with_everything_in_place_passes() {
    let m = machine("", &format!("{GCP}\n[daemon]\nservice_user = \"\""));
    let o = m.check(&[]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let o = m.check(&["--print-slurm-conf", "--slurm-version", "24.11"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let want = format!("ResumeProgram={}/slurm-dws-resume", m.hook_dir());
    assert!(stdout(&o).lines().any(|l| l == want), "{}", stdout(&o));
}

#[test]
fn every_machine_problem_in_one_run_with_file_line_and_key() {
    // A key file under /root (hidden by the unit's ProtectHome=yes), a missing slurm.conf, no
    // squeue, no hooks where slurm.conf would run them, and a config problem, all at once.
    let m = machine(
        "",
        "[gcp]\nproject = \"p\"\nregion = \"us-central1\"\ncredentials = \"/root/sa.json\"\n\
         [daemon]\nservice_user = \"\"\n[reconcile]\ninterval = 0",
    );
    std::fs::remove_file(m.dir.path().join("bin/squeue")).unwrap();
    std::fs::remove_file(m.dir.path().join("slurm.conf")).unwrap();
    std::fs::remove_file(m.dir.path().join("sbin/slurm-dws-suspend")).unwrap();
    let o = m.check(&[]);
    let err = assert_rejected(&o, "reconcile.interval");
    assert!(err.contains("(and 5 more problems)"), "{err}");
    let out = stdout(&o);
    let text = std::fs::read_to_string(&m.config).unwrap();
    let line_of = |needle: &str| text.lines().position(|l| l.starts_with(needle)).unwrap() + 1;
    let file = &m.config;
    for want in [
        format!("{file}:{}: reconcile.interval: 0 is below the minimum 1", line_of("interval")),
        format!("{file}:{}: slurm.bin_dir: {}/bin has no executable squeue", line_of("bin_dir"), m.dir.path().display()),
        format!("{file}:{}: slurm.conf: {}/slurm.conf does not exist", line_of("conf ="), m.dir.path().display()),
        format!("{file}:{}: gcp.credentials: /root/sa.json is under /root, which the systemd unit hides from the daemon (ProtectHome=yes)", line_of("credentials")),
        format!("{file}:{}: gcp.credentials: cannot read key file /root/sa.json", line_of("credentials")),
        format!("{file}: the hooks slurm.conf will run do not exist: {}/slurm-dws-suspend (`make install` links them", m.hook_dir()),
    ] {
        assert!(out.lines().any(|l| l.starts_with(&want)), "missing {want:?} in\n{out}");
    }
    assert_eq!(out.lines().count(), 6, "{out}");
    // --config-only looks at the file alone.
    let o = m.check(&["--config-only"]);
    assert_eq!(stdout(&o).lines().count(), 1, "{}", stdout(&o));
}

#[test]
fn the_key_file_must_be_readable_by_the_service_user() {
    use std::os::unix::fs::PermissionsExt;
    let m = machine("", "");
    let key = m.dir.path().join("key.json");
    std::fs::write(&key, "{}").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let gcp =
        format!("[gcp]\nproject = \"p\"\nregion = \"us-central1\"\ncredentials = \"{}\"", key.display());
    // A user that does not exist is a problem of its own.
    let text = std::fs::read_to_string(&m.config).unwrap().replacen(
        "\n",
        &format!("\n{gcp}\n[daemon]\nservice_user = \"nosuchuser17a\"\n"),
        1,
    );
    std::fs::write(&m.config, &text).unwrap();
    // (The temp dir is under /tmp, which the unit's PrivateTmp=yes hides: said too.)
    let o = m.check(&[]);
    assert_eq!(o.status.code(), Some(2));
    let out = stdout(&o);
    assert!(out.contains("which the systemd unit hides from the daemon (PrivateTmp=yes)"), "{out}");
    assert!(
        out.contains("daemon.service_user: user \"nosuchuser17a\" does not exist on this machine"),
        "{out}"
    );
    // An existing user other than the file's owner cannot read a 0600 file (root can read anything).
    if std::fs::metadata(&key).map(|md| std::os::unix::fs::MetadataExt::uid(&md)).unwrap() != 65534 {
        std::fs::write(&m.config, text.replace("nosuchuser17a", "nobody")).unwrap();
        let out = stdout(&m.check(&[]));
        assert!(out.contains("is not readable by the service user \"nobody\""), "{out}");
        assert!(out.contains("mode 600"), "{out}");
    }
}

/// `check-config --online` against the simulator: it reads each nodeset's instance template (global
/// or regional, as the config names it) and exits 2 naming the nodeset, the field and the value DWS
/// Flex Start needs; a config whose templates fit passes; GCE not answering is exit 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn online_check_reads_each_template_and_names_what_does_not_fit() {
    let sim = gce_sim::start(gce_sim::SimOptions::default()).await.unwrap();
    let http = reqwest::Client::new();
    let control = format!("http://{}/_sim/templates", sim.addr());
    let good = devcluster::stack::flex_template("good-flex");
    let mut bad = devcluster::stack::flex_template("bad-std");
    bad["properties"]["scheduling"]["provisioningModel"] = serde_json::json!("STANDARD");
    bad["properties"]["reservationAffinity"]["consumeReservationType"] = serde_json::json!("ANY_RESERVATION");
    for t in [&good, &bad] {
        let r = http.post(&control).json(t).send().await.unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    }
    let dir = tempfile::tempdir().unwrap();
    let config = |templates: &[(&str, &str)], endpoint: &str| {
        let mut text = format!(
            "cluster_name = \"hpc\"\nstate_dir = \"{}\"\n[gcp]\nproject = \"p\"\nregion = \"us-central1\"\n\
             endpoint = \"{endpoint}\"\ncredentials = \"none\"\nrequest_timeout = 2\nretry_deadline = 3\n",
            dir.path().join("state").display()
        );
        for (ns, t) in templates {
            text.push_str(&format!(
                "[[nodeset]]\nname = \"{ns}\"\ninstance_template = \"{t}\"\nzones = [\"us-central1-a\"]\nnode_count_dynamic_max = 2\n"
            ));
        }
        let path = dir.path().join(format!("c{}.toml", templates.len()));
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let run = |path: String| {
        tokio::task::spawn_blocking(move || slurm_dws(&["check-config", "--config-only", "--online", &path]))
    };
    let url = sim.base_url();

    let fits = config(&[("a", "projects/p/global/instanceTemplates/good-flex")], &url);
    let o = run(fits).await.unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("is valid"), "{}", stdout(&o));

    let mixed = config(
        &[
            ("a", "projects/p/global/instanceTemplates/good-flex"),
            ("b", "projects/p/regions/us-central1/instanceTemplates/bad-std"),
            ("c", "projects/p/global/instanceTemplates/missing"),
        ],
        &url,
    );
    let o = run(mixed).await.unwrap();
    let err = assert_rejected(&o, "nodeset b");
    assert!(
        err.contains("properties.scheduling.provisioningModel is STANDARD, DWS Flex Start needs FLEX_START"),
        "{err}"
    );
    assert!(err.contains("(and 2 more problems)"), "{err}");
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[1].starts_with("nodeset b: instance template projects/p/regions/us-central1/instanceTemplates/bad-std: properties.reservationAffinity.consumeReservationType is ANY_RESERVATION, DWS Flex Start needs NO_RESERVATION"), "{out}");
    assert!(
        lines[2].starts_with(
            "nodeset c: instance template projects/p/global/instanceTemplates/missing: instance_template is"
        ),
        "{out}"
    );
    assert!(
        lines[2].contains("which GCE does not have (404)")
            && lines[2].contains("needs an existing instance template"),
        "{out}"
    );
    assert!(!out.contains("nodeset a"), "{out}");

    // GCE does not answer: nothing can be said, exit 1.
    let down =
        config(&[("a", "projects/p/global/instanceTemplates/good-flex")], "http://127.0.0.1:9/compute/v1/");
    let o = run(down).await.unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("reading the instance template"), "{}", stderr(&o));
    sim.shutdown().await;
}

/// `check-config --online --print-slurm-conf` against the simulator: each nodeset's NodeName line
/// gets CPUs, RealMemory (memoryMb less 400 MB and 30 MB per GB), Gres=gpu:N and Features from the
/// machine type its instance template names, read in its first zone; what node_conf sets wins and
/// appears once. Without --online the lines are the config's alone. A machine type GCE does not
/// have is exit 1 naming the nodeset and the machine type.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn online_print_slurm_conf_takes_the_node_shape_from_the_machine_type() {
    let sim = gce_sim::start(gce_sim::SimOptions::default()).await.unwrap();
    let http = reqwest::Client::new();
    let control = format!("http://{}/_sim/templates", sim.addr());
    let mut a3u = devcluster::stack::flex_template("a3u-flex");
    a3u["properties"]["machineType"] = serde_json::json!("a3-ultragpu-8g");
    let cpu = devcluster::stack::flex_template("cpu-flex"); // n2-standard-4
    let mut n1 = devcluster::stack::flex_template("n1-t4");
    n1["properties"]["machineType"] = serde_json::json!("n2-standard-4");
    n1["properties"]["guestAccelerators"] =
        serde_json::json!([{"acceleratorType": "nvidia-tesla-t4", "acceleratorCount": 2}]);
    let mut unknown = devcluster::stack::flex_template("unknown-type");
    unknown["properties"]["machineType"] = serde_json::json!("z9-mega-1");
    let mut untyped = devcluster::stack::flex_template("no-type");
    untyped["properties"].as_object_mut().unwrap().remove("machineType");
    for t in [&a3u, &cpu, &n1, &unknown, &untyped] {
        let r = http.post(&control).json(t).send().await.unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    }
    let dir = tempfile::tempdir().unwrap();
    let url = sim.base_url();
    let config = |nodesets: &[(&str, &str, &str)]| {
        let mut text = format!(
            "cluster_name = \"hpc\"\nstate_dir = \"{}\"\n[gcp]\nproject = \"p\"\nregion = \"us-central1\"\n\
             endpoint = \"{url}\"\ncredentials = \"none\"\nrequest_timeout = 2\nretry_deadline = 3\n",
            dir.path().join("state").display()
        );
        for (ns, t, node_conf) in nodesets {
            text.push_str(&format!(
                "[[nodeset]]\nname = \"{ns}\"\ninstance_template = \"projects/p/global/instanceTemplates/{t}\"\n\
                 zones = [\"us-central1-a\"]\nnode_count_dynamic_max = 2\nnode_conf = \"{node_conf}\"\n"
            ));
        }
        let path = dir.path().join(format!("c{}.toml", nodesets.len()));
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let run = |path: String, online: bool| {
        tokio::task::spawn_blocking(move || {
            let mut args =
                vec!["check-config", "--config-only", "--print-slurm-conf", "--hook-dir", "/usr/local/sbin"];
            args.extend(["--slurm-version", "24.11"]);
            if online {
                args.push("--online");
            }
            args.push(&path);
            slurm_dws(&args)
        })
    };

    let path = config(&[
        ("a", "a3u-flex", ""),
        ("b", "cpu-flex", "RealMemory=15000 features=cpu Weight=5"),
        ("c", "n1-t4", ""),
    ]);
    let o = run(path.clone(), true).await.unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    // a3-ultragpu-8g: 224 vCPUs, 2952 GB = 3,022,848 MB; 400 + 30 × 2952 = 88,960 MB kept back.
    for line in [
        "NodeName=hpc-a-[0-1] State=CLOUD CPUs=224 RealMemory=2933888 Gres=gpu:8 Features=a3-ultragpu-8g",
        "NodeName=hpc-b-[0-1] State=CLOUD CPUs=4 RealMemory=15000 features=cpu Weight=5",
        "NodeName=hpc-c-[0-1] State=CLOUD CPUs=4 RealMemory=15504 Gres=gpu:2 Features=n2-standard-4",
        "# Gres=gpu:N needs GresTypes=gpu here and a gres.conf on the nodes (AutoDetect=nvml).",
    ] {
        assert!(out.lines().any(|l| l == line), "missing {line:?} in\n{out}");
    }

    // Without --online: the config's lines only.
    let o = run(path, false).await.unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    for line in [
        "NodeName=hpc-a-[0-1] State=CLOUD",
        "NodeName=hpc-b-[0-1] State=CLOUD RealMemory=15000 features=cpu Weight=5",
        "NodeName=hpc-c-[0-1] State=CLOUD",
    ] {
        assert!(out.lines().any(|l| l == line), "missing {line:?} in\n{out}");
    }
    assert!(!out.contains("GresTypes"), "{out}");

    // A machine type GCE does not have: exit 1, naming the nodeset and the machine type.
    let o = run(config(&[("a", "a3u-flex", ""), ("z", "unknown-type", "")]), true).await.unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("nodeset z: instance template projects/p/global/instanceTemplates/unknown-type"),
        "{err}"
    );
    assert!(err.contains("reading machine type z9-mega-1 in zone us-central1-a"), "{err}");
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));

    // A template without a machine type: exit 1, naming the nodeset and the missing field.
    let o = run(config(&[("y", "no-type", "")]), true).await.unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("nodeset y: instance template projects/p/global/instanceTemplates/no-type"),
        "{err}"
    );
    assert!(err.contains("sets no properties.machineType"), "{err}");
    sim.shutdown().await;
}

/// `check-config --online` checks each nodeset's template against its `provisioning_model`: a spot
/// nodeset needs SPOT and `instanceTerminationAction: DELETE`, a standard one must not be FLEX_START.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn online_check_judges_each_template_by_the_nodesets_provisioning_model() {
    let sim = gce_sim::start(gce_sim::SimOptions::default()).await.unwrap();
    let http = reqwest::Client::new();
    let control = format!("http://{}/_sim/templates", sim.addr());
    let flex = devcluster::stack::flex_template("flex");
    let spot = devcluster::stack::model_template("spot", "spot");
    for t in [&flex, &spot] {
        let r = http.post(&control).json(t).send().await.unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    }
    let dir = tempfile::tempdir().unwrap();
    let config = |nodesets: &[(&str, &str, &str)]| {
        let mut text = format!(
            "cluster_name = \"hpc\"\nstate_dir = \"{}\"\n[gcp]\nproject = \"p\"\nregion = \"us-central1\"\n\
             endpoint = \"{}\"\ncredentials = \"none\"\nrequest_timeout = 2\nretry_deadline = 3\n",
            dir.path().join("state").display(),
            sim.base_url()
        );
        for (ns, model, t) in nodesets {
            text.push_str(&format!(
                "[[nodeset]]\nname = \"{ns}\"\ninstance_template = \"projects/p/global/instanceTemplates/{t}\"\n\
                 zones = [\"us-central1-a\"]\nnode_count_dynamic_max = 2\nprovisioning_model = \"{model}\"\n"
            ));
        }
        let path = dir.path().join(format!("c{}.toml", nodesets.len()));
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let run = |path: String| {
        tokio::task::spawn_blocking(move || slurm_dws(&["check-config", "--config-only", "--online", &path]))
    };
    let fits = config(&[("f", "flex", "flex"), ("s", "spot", "spot")]);
    let o = run(fits).await.unwrap();
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));

    let wrong = config(&[("f", "flex", "flex"), ("s", "spot", "flex"), ("d", "standard", "flex")]);
    let o = run(wrong).await.unwrap();
    assert_rejected(&o, "nodeset s");
    let out = stdout(&o);
    assert!(
        out.contains("nodeset s: instance template projects/p/global/instanceTemplates/flex: properties.scheduling.provisioningModel is FLEX_START, a spot nodeset needs SPOT"),
        "{out}"
    );
    assert!(
        out.contains("nodeset d: instance template projects/p/global/instanceTemplates/flex: properties.scheduling.provisioningModel is FLEX_START, a standard nodeset needs STANDARD (or not set)"),
        "{out}"
    );
    assert!(!out.contains("nodeset f"), "{out}");
    sim.shutdown().await;
}

/// `check-config --online` refuses what GCE would refuse of a placement: flex-start H4D with a
/// policy, spot A4X without an accelerator topology; a spot A4X with one and a flex A3 Ultra with
/// a distance pass. Each line names the nodeset, the field and the machine type.
#[tokio::test]
async fn online_check_refuses_placements_gce_refuses() {
    let sim = gce_sim::start(gce_sim::SimOptions::default()).await.unwrap();
    let http = reqwest::Client::new();
    let control = format!("http://{}/_sim/templates", sim.addr());
    let mut a3u = devcluster::stack::flex_template("a3u-flex");
    a3u["properties"]["machineType"] = serde_json::json!("a3-ultragpu-8g");
    let mut h4d = devcluster::stack::flex_template("h4d-flex");
    h4d["properties"]["machineType"] = serde_json::json!("h4d-highmem-192");
    let mut a4x = devcluster::stack::model_template("a4x-spot", "spot");
    a4x["properties"]["machineType"] = serde_json::json!("a4x-highgpu-4g");
    for t in [&a3u, &h4d, &a4x] {
        let r = http.post(&control).json(t).send().await.unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    }
    let dir = tempfile::tempdir().unwrap();
    let url = sim.base_url();
    let config = |name: &str, nodesets: &str| {
        let text = format!(
            "cluster_name = \"hpc\"\nstate_dir = \"{}\"\n[gcp]\nproject = \"p\"\nregion = \"us-central1\"\n\
             endpoint = \"{url}\"\ncredentials = \"none\"\nrequest_timeout = 2\nretry_deadline = 3\n{nodesets}",
            dir.path().join("state").display()
        );
        let path = dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let ns = |name: &str, t: &str, extra: &str| {
        format!(
            "[[nodeset]]\nname = \"{name}\"\ninstance_template = \"projects/p/global/instanceTemplates/{t}\"\n\
             zones = [\"us-central1-a\"]\nnode_count_dynamic_max = 4\n{extra}\n"
        )
    };
    let run = |path: String| {
        tokio::task::spawn_blocking(move || slurm_dws(&["check-config", "--config-only", "--online", &path]))
    };
    let good = config(
        "good",
        &(ns("a3u", "a3u-flex", "[nodeset.placement]\nmax_topology_distance = \"BLOCK\"")
            + &ns(
                "a4x",
                "a4x-spot",
                "provisioning_model = \"spot\"\n[nodeset.placement]\naccelerator_topology = \"1x72\"",
            )),
    );
    let o = run(good).await.unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    let bad = config(
        "bad",
        &(ns("h4d", "h4d-flex", "[nodeset.placement]\nmax_topology_distance = \"BLOCK\"")
            + &ns("a4x", "a4x-spot", "provisioning_model = \"spot\"")),
    );
    let o = run(bad).await.unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("nodeset h4d: placement.max_topology_distance is set, but GCE takes a workload policy for flex-start VMs only on A4 and A3 Ultra, not H4D (h4d-highmem-192)"),
        "{out}"
    );
    // The nodeset, the field, and the value it needs, with the machine type that needs it.
    let a4x_line = out.lines().find(|l| l.starts_with("nodeset a4x: ")).unwrap_or_default();
    assert!(a4x_line.starts_with("nodeset a4x: placement.accelerator_topology is not set"), "{out}");
    assert!(
        a4x_line.contains("a4x-highgpu-4g") && a4x_line.contains("accelerator_topology = \"1x72\""),
        "{out}"
    );
    sim.shutdown().await;
}

/// `check-config --online` of reservation nodesets against the simulator: the template consumes
/// exactly the configured reservation, which exists, is READY, is for the template's machine type
/// and holds as many VMs as the nodeset has nodes; a calendar booking exists. Each problem names
/// the nodeset, the key and the value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn online_check_of_reservation_nodesets() {
    let sim = gce_sim::start(gce_sim::SimOptions::default()).await.unwrap();
    let http = reqwest::Client::new();
    let base = format!("http://{}/_sim", sim.addr());
    let mut bound = devcluster::stack::flex_template("bound");
    let machine_type = bound["properties"]["machineType"].as_str().unwrap().to_string();
    bound["properties"]["scheduling"]["provisioningModel"] = serde_json::json!("RESERVATION_BOUND");
    bound["properties"]["reservationAffinity"] = serde_json::json!({
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["res4"]
    });
    let r = http.post(format!("{base}/templates")).json(&bound).send().await.unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    for (name, mt) in [("res4", machine_type.as_str()), ("other-mt", "a3-highgpu-8g")] {
        let body = serde_json::json!({"project": "p", "zone": "us-central1-a", "name": name, "count": 4,
                                      "machine_type": mt, "in_use_elsewhere": 2});
        let r = http.post(format!("{base}/reservations")).json(&body).send().await.unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    }
    let booking = serde_json::json!({"project": "p", "zone": "us-central1-a", "name": "cal", "total_count": 2,
        "machine_type": machine_type, "starts_in_seconds": 3600, "duration_seconds": 86400});
    let r = http.post(format!("{base}/future-reservations")).json(&booking).send().await.unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());

    let dir = tempfile::tempdir().unwrap();
    let url = sim.base_url();
    let config = |nodesets: &[(&str, &str, u32)]| {
        let mut text = format!(
            "cluster_name = \"hpc\"\nstate_dir = \"{}\"\n[gcp]\nproject = \"p\"\nregion = \"us-central1\"\n\
             endpoint = \"{url}\"\ncredentials = \"none\"\nrequest_timeout = 2\nretry_deadline = 3\n",
            dir.path().join("state").display()
        );
        for (ns, reservation, nodes) in nodesets {
            text.push_str(&format!(
                "[[nodeset]]\nname = \"{ns}\"\ninstance_template = \"projects/p/global/instanceTemplates/bound\"\n\
                 zones = [\"us-central1-a\"]\nnode_count_dynamic_max = {nodes}\nprovisioning_model = \"reservation\"\n\
                 [nodeset.reservation]\n{reservation}\n"
            ));
        }
        let path = dir.path().join(format!("r{}.toml", text.len()));
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let run = |path: String| {
        tokio::task::spawn_blocking(move || slurm_dws(&["check-config", "--config-only", "--online", &path]))
    };
    let res4 = "name = \"projects/p/zones/us-central1-a/reservations/res4\"";
    let o = run(config(&[("a", res4, 4)])).await.unwrap();
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));

    let o = run(config(&[
        ("a", res4, 6),
        ("b", "name = \"projects/p/zones/us-central1-a/reservations/missing\"", 2),
        ("c", "name = \"projects/p/zones/us-central1-a/reservations/other-mt\"", 2),
    ]))
    .await
    .unwrap();
    assert_rejected(&o, "nodeset a");
    let out = stdout(&o);
    assert!(
        out.contains("nodeset a: reservation.name projects/p/zones/us-central1-a/reservations/res4: the reservation holds 4 VMs, the nodeset has 6 nodes"),
        "{out}"
    );
    assert!(
        out.contains("nodeset b: reservation.name projects/p/zones/us-central1-a/reservations/missing: GCE has no such reservation (404)"),
        "{out}"
    );
    // c's template names res4, not other-mt; and other-mt is for another machine type.
    assert!(out.contains("nodeset c: instance template projects/p/global/instanceTemplates/bound: properties.reservationAffinity.values is [\"res4\"]"), "{out}");
    assert!(out.contains("nodeset c: reservation.name projects/p/zones/us-central1-a/reservations/other-mt: the reservation is for machine type a3-highgpu-8g"), "{out}");

    // A calendar booking: it exists (its delivery is checked once delivered); one that does not.
    let o = run(config(&[(
        "a",
        "future_reservation = \"projects/p/zones/us-central1-a/futureReservations/cal\"",
        2,
    )]))
    .await
    .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let o = run(config(&[(
        "a",
        "future_reservation = \"projects/p/zones/us-central1-a/futureReservations/nope\"",
        2,
    )]))
    .await
    .unwrap();
    assert!(stdout(&o).contains("nodeset a: reservation.future_reservation projects/p/zones/us-central1-a/futureReservations/nope: GCE has no such future reservation (404)"), "{}", stdout(&o));
    let o = run(config(&[(
        "a",
        "future_reservation = \"projects/p/zones/us-central1-a/futureReservations/cal\"",
        3,
    )]))
    .await
    .unwrap();
    assert!(stdout(&o).contains("the booking holds 2 VMs, the nodeset has 3 nodes"), "{}", stdout(&o));
}
