//! `slurm-dws import-slurm-gcp` as an admin runs it: slurm-gcp's config.yaml in, a config our own loader takes out.

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

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn the_fixture_becomes_a_config_check_config_takes() {
    let o = slurm_dws(&["import-slurm-gcp", "tests/data/slurm-gcp/config.yaml"]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", text(&o.stderr));
    assert!(o.stderr.is_empty(), "{}", text(&o.stderr));
    let toml = text(&o.stdout);
    assert!(toml.contains("cluster_name = \"hpc\""), "{toml}");
    assert!(toml.contains("use_job_duration = false"), "{toml}");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slurm-dws.toml");
    std::fs::write(&path, &toml).unwrap();
    let check = slurm_dws(&["check-config", "--config-only", path.to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(0), "{}\n{}", text(&check.stdout), text(&check.stderr));
    let resolved = text(&check.stdout);
    for line in
        ["name = \"a3u\"", "name = \"h4d\"", "region = \"us-central1\"", "bin_dir = \"/usr/local/bin\""]
    {
        assert!(resolved.lines().any(|l| l == line), "missing {line:?} in\n{resolved}");
    }
}

#[test]
fn problems_exit_2_print_nothing_on_stdout_and_name_file_line_key() {
    let fixture = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/slurm-gcp/config.yaml"),
    )
    .unwrap();
    let broken = fixture
        .replace("    node_count_static: 2\n", "    node_count_static: -2\n")
        .replace("project: hpc-research-4411\n", "");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, &broken).unwrap();
    let file = path.to_str().unwrap();
    let o = slurm_dws(&["import-slurm-gcp", file]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(o.stdout.is_empty(), "nothing half-written: {}", text(&o.stdout));
    let err = text(&o.stderr);
    let line = broken.lines().position(|l| l == "    node_count_static: -2").unwrap() + 1;
    assert!(
        err.contains(&format!("slurm-dws: {file}:{line}: nodeset.h4d.node_count_static: is an integer")),
        "{err}"
    );
    // A missing key is reported at the mapping that lacks it: the top level starts after the comments.
    let top = broken.lines().position(|l| !l.starts_with('#')).unwrap() + 1;
    assert!(err.contains(&format!("{file}:{top}: project: is missing")), "{err}");
    assert!(
        err.lines().last().unwrap().contains(&format!("2 problems in {file}; no config printed")),
        "{err}"
    );

    let o = slurm_dws(&["import-slurm-gcp", "/nonexistent/config.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(text(&o.stderr).lines().count(), 1);
    assert!(text(&o.stderr).contains("cannot read /nonexistent/config.yaml"), "{}", text(&o.stderr));

    let o = slurm_dws(&["import-slurm-gcp"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("<FILE>"), "{}", text(&o.stderr));
}

/// slurm-gcp's placement keys of an A3 Ultra flex nodeset (`enable_placement: true`,
/// `placement_max_distance: 2`) come out as `[nodeset.placement]`, which check-config takes; a
/// distance no policy can take stops the import with exit 2, naming the key and its line.
#[test]
fn placement_settings_are_carried_into_nodeset_placement() {
    let fixture = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/slurm-gcp/config.yaml"),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let with = |enable: &str, distance: &str| {
        let text = fixture
            .replacen("enable_placement: false", &format!("enable_placement: {enable}"), 1)
            .replacen("placement_max_distance: null", &format!("placement_max_distance: {distance}"), 1);
        let path = dir.path().join(format!("config-{enable}-{distance}.yaml"));
        std::fs::write(&path, text).unwrap();
        path
    };
    let input = with("true", "2");
    let o = slurm_dws(&["import-slurm-gcp", input.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "stderr: {}", text(&o.stderr));
    let toml = text(&o.stdout);
    assert!(toml.contains("[nodeset.placement]\nmax_topology_distance = \"BLOCK\"\n"), "{toml}");
    assert!(!toml.contains("enable_placement = true: not carried over"), "{toml}");
    let path = dir.path().join("slurm-dws.toml");
    std::fs::write(&path, &toml).unwrap();
    let check = slurm_dws(&["check-config", "--config-only", path.to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(0), "{}\n{}", text(&check.stdout), text(&check.stderr));
    assert!(text(&check.stdout).contains("max_topology_distance = \"BLOCK\""), "{}", text(&check.stdout));

    let bad = with("true", "5");
    let o = slurm_dws(&["import-slurm-gcp", bad.to_str().unwrap()]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("nodeset.a3u.placement_max_distance") && err.contains("is 5; expected 1, 2 or 3"),
        "{err}"
    );
    assert!(err.contains(":76:"), "the line of the value: {err}");
}
