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
