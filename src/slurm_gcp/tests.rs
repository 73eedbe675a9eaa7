use std::path::Path;

use super::*;

const FIXTURE: &str = include_str!("../../tests/data/slurm-gcp/config.yaml");

fn fixture_path() -> &'static Path {
    Path::new("/slurm/scripts/config.yaml")
}

fn imported() -> (String, Config) {
    let toml = import(FIXTURE, fixture_path()).unwrap_or_else(|e| panic!("{e}"));
    let cfg = Config::from_toml_str(&toml, Path::new("/etc/slurm-dws/slurm-dws.toml"))
        .unwrap_or_else(|e| panic!("{e}\n{toml}"));
    (toml, cfg)
}

#[test]
fn the_real_shape_imports_and_loads() {
    let (toml, cfg) = imported();
    assert_eq!(cfg.cluster_name, "hpc");
    assert_eq!(cfg.gcp.project, "hpc-research-4411");
    // No top-level region in slurm-gcp v6: it comes from the subnetwork and the zones.
    assert_eq!(cfg.gcp.region, "us-central1");
    assert_eq!(cfg.gcp.credentials.to_string(), "auto");
    assert_eq!(cfg.slurm.bin_dir, Path::new("/usr/local/bin"));
    assert_eq!(cfg.slurm.conf.as_deref(), Some(Path::new("/usr/local/etc/slurm/slurm.conf")));
    let names: Vec<&str> = cfg.nodesets.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["a3u", "h4d", "n2"], "n2 is on a reservation, v5p is TPU:\n{toml}");
    // n2 is not flex but consumes a reservation: a reservation nodeset, in its one zone.
    let n2 = cfg.nodeset("n2").unwrap();
    assert_eq!(n2.provisioning_model, crate::config::ProvisioningModel::Reservation);
    assert_eq!(
        n2.reservation.as_ref().map(|r| r.source.url()).as_deref(),
        Some("projects/hpc-research-4411/zones/us-central1-b/reservations/n2-res")
    );

    let a3u = cfg.nodeset("a3u").unwrap();
    assert_eq!(
        a3u.instance_template,
        "https://www.googleapis.com/compute/v1/projects/hpc-research-4411/global/instanceTemplates/hpc-compute-a3u-20260212093011448900000001"
    );
    assert_eq!(a3u.zones, ["us-central1-a", "us-central1-c"]);
    assert_eq!((a3u.node_count_static, a3u.node_count_dynamic_max), (0, 16));
    assert_eq!(a3u.partition, "a3u");
    assert_eq!(a3u.node_conf, "");
    assert!(a3u.dws_flex.enabled && a3u.dws_flex.use_job_duration);
    assert_eq!(a3u.dws_flex.max_run_duration, 604800);

    let h4d = cfg.nodeset("h4d").unwrap();
    assert_eq!((h4d.node_count_static, h4d.node_count_dynamic_max), (2, 62));
    assert_eq!(h4d.partition, "cpu");
    assert_eq!(h4d.node_conf, "Features=h4d,cpu Weight=10");
    // slurm-gcp's explicit false is kept although slurm-dws defaults to true.
    assert!(!h4d.dws_flex.use_job_duration);
    // 2 weeks (slurm-gcp's old default) is above GCE's limit.
    assert_eq!(h4d.dws_flex.max_run_duration, 604800);
}

#[test]
fn what_is_not_kept_is_said() {
    let (toml, _) = imported();
    let comments = comments_of(&toml);
    for words in [
        "nodeset_tpu v5p (v5p-8): not imported",
        "partition a3u: enable_job_exclusive = true is not carried over",
        "add `MaxTime=2-00:00:00 OverSubscribe=EXCLUSIVE` to its PartitionName line",
        "partition cpu: partition_conf is not carried over; add `Default=YES`",
        "cloud_parameters (resume_rate=0, resume_timeout=300",
        "dws_flex.max_run_duration was 1209600",
        "also in partition debug",
        "enable_maintenance_reservation is not true: slurm-dws reserves a node over a maintenance window",
    ] {
        assert!(comments.contains(words), "missing {words:?} in\n{toml}");
    }
    // A nodeset neither flex nor on a reservation is not imported, and says so.
    let plain = FIXTURE.replace("    reservation_name: projects/hpc-research-4411/reservations/n2-res\n", "");
    let toml = import(&plain, fixture_path()).unwrap();
    assert!(comments_of(&toml).contains("nodeset n2: not imported; dws_flex is not enabled"), "{toml}");
    assert!(!toml.contains("name = \"n2\""), "{toml}");
}

#[test]
fn reservations_and_calendar_bookings_are_carried_in_the_nodesets_one_zone() {
    let with = |from: &str, to: &str| {
        let text = FIXTURE.replace(from, to);
        import(&text, fixture_path())
    };
    let n2_res = "    reservation_name: projects/hpc-research-4411/reservations/n2-res\n";
    for (value, url) in [
        ("n2-res", "projects/hpc-research-4411/zones/us-central1-b/reservations/n2-res"),
        (
            "projects/other/reservations/big/reservationBlocks/b1",
            "projects/other/zones/us-central1-b/reservations/big/reservationBlocks/b1",
        ),
    ] {
        let toml = with(n2_res, &format!("    reservation_name: {value}\n")).unwrap();
        assert!(toml.contains(&format!("[nodeset.reservation]\nname = \"{url}\"")), "{toml}");
    }
    let toml = with(n2_res, "    reservation_name: ''\n").unwrap();
    assert!(!toml.contains("name = \"n2\""), "no reservation, not flex: not imported\n{toml}");
    // A calendar booking (the n2 nodeset's own future_reservation key).
    let fixture = FIXTURE.replace(n2_res, "    reservation_name: ''\n");
    let i = fixture.find("  n2:").unwrap();
    let booked = format!(
        "{}{}",
        &fixture[..i],
        fixture[i..].replacen("    future_reservation: ''\n", "    future_reservation: cal-a\n", 1)
    );
    let toml = import(&booked, fixture_path()).unwrap();
    assert!(
        toml.contains("future_reservation = \"projects/hpc-research-4411/zones/us-central1-b/futureReservations/cal-a\""),
        "{toml}"
    );
    let cfg = Config::from_toml_str(&toml, Path::new("/etc/slurm-dws/slurm-dws.toml")).unwrap();
    assert!(cfg.nodeset("n2").unwrap().reservation.is_some());
    // A reservation on a nodeset of two zones cannot be placed: the import stops, naming the key.
    let two = FIXTURE.replace(
        "    zone_policy_allow:\n    - us-central1-b\n",
        "    zone_policy_allow:\n    - us-central1-b\n    - us-central1-c\n",
    );
    let err = import(&two, fixture_path()).unwrap_err().to_string();
    assert!(err.contains("nodeset.n2.reservation_name") && err.contains("exactly one zone"), "{err}");
}

#[test]
fn use_job_duration_absent_is_slurm_gcps_false() {
    let text = FIXTURE.replace("      use_job_duration: true\n", "");
    let toml = import(&text, fixture_path()).unwrap();
    let cfg = Config::from_toml_str(&toml, Path::new("/x.toml")).unwrap();
    assert!(!cfg.nodeset("a3u").unwrap().dws_flex.use_job_duration);
    assert!(toml.contains("use_job_duration was not set: slurm-gcp's default, false, is kept"), "{toml}");
}

#[test]
fn terraforms_yamlencode_shape_reads_too() {
    // The bucket's core file and nodeset files are written by terraform's yamlencode: quoted keys.
    let text = r#""project": "p-1"
"slurm_cluster_name": "hpc"
"region": "europe-west4"
"nodeset":
  "gpu":
    "dws_flex":
      "enabled": true
      "max_run_duration": 3600
      "use_job_duration": true
    "instance_template": "projects/p-1/regions/europe-west4/instanceTemplates/gpu-flex"
    "node_count_dynamic_max": 4
    "node_count_static": 0
    "nodeset_name": "gpu"
    "zone_policy_allow":
    - "europe-west4-b"
"#;
    let toml = import(text, Path::new("config.yaml")).unwrap();
    let cfg = Config::from_toml_str(&toml, Path::new("/x.toml")).unwrap();
    assert_eq!(cfg.gcp.region, "europe-west4");
    let gpu = cfg.nodeset("gpu").unwrap();
    assert_eq!(gpu.dws_flex.max_run_duration, 3600);
    assert_eq!(gpu.partition, "gpu");
    assert!(toml.contains("in no partition"), "{toml}");
}

#[test]
fn problems_name_file_line_and_key_all_at_once() {
    let text = FIXTURE
        .replace("slurm_cluster_name: hpc", "slurm_cluster_name: HPC-1")
        .replace("    node_count_dynamic_max: 16", "    node_count_dynamic_max: sixteen")
        .replace(
            "    zone_policy_allow:\n    - us-central1-a\n    - us-central1-c\n",
            "    zone_policy_allow: []\n",
        );
    let err = import(&text, fixture_path()).unwrap_err();
    let ImportError::Invalid { problems, .. } = &err else { panic!("{err}") };
    let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
    assert!(keys.contains(&"slurm_cluster_name"), "{err}");
    assert!(keys.contains(&"nodeset.a3u.node_count_dynamic_max"), "{err}");
    assert!(keys.contains(&"nodeset.a3u.zone_policy_allow"), "{err}");
    let text_err = err.to_string();
    let line_of = |needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    assert!(
        text_err.contains(&format!(
            "/slurm/scripts/config.yaml:{}: nodeset.a3u.node_count_dynamic_max: is a string; expected a whole number",
            line_of("sixteen")
        )),
        "{text_err}"
    );
    assert!(err.first_line().contains("(and 2 more problems)"), "{}", err.first_line());
}

#[test]
fn missing_required_keys_and_wrong_shapes() {
    for (text, key, words) in [
        ("project: p\n", "slurm_cluster_name", "is missing"),
        ("- a\n- b\n", "(top level)", "is a list"),
        ("slurm_cluster_name: hpc\nproject: p\nnodeset: 3\n", "nodeset", "expected a mapping"),
        ("slurm_cluster_name: hpc\nproject: p\nnodeset: {}\n", "nodeset", "no nodeset has dws_flex.enabled"),
        (
            "slurm_cluster_name: hpc\nproject: p\nnodeset:\n  a:\n    dws_flex: {enabled: true}\n    zone_policy_allow: [us-east1-b]\n",
            "nodeset.a.instance_template",
            "is missing",
        ),
        (
            "slurm_cluster_name: hpc\nproject: p\nnodeset:\n  a:\n    dws_flex: {enabled: true}\n    instance_template: projects/p/global/instanceTemplates/t\n    zone_policy_allow: [us-east1-b]\n    subnetwork: projects/p/regions/us-west1/subnetworks/s\n",
            "nodeset.a.",
            "one slurm-dws config manages one region",
        ),
    ] {
        let err = import(text, Path::new("/c.yaml")).unwrap_err();
        let ImportError::Invalid { problems, .. } = &err else { panic!("{text}: {err}") };
        assert!(
            problems.iter().any(|p| p.key.starts_with(key) && p.message.contains(words)),
            "{text}: want {key} / {words}, got {err}"
        );
    }
}

#[test]
fn values_slurm_dws_refuses_are_an_error_not_a_bad_file() {
    // A valid slurm-gcp value that slurm-dws's loader refuses: a node name longer than 63 characters
    // cannot happen, but a template in another region can.
    let text = FIXTURE.replace(
        "global/instanceTemplates/hpc-compute-a3u-20260212093011448900000001",
        "regions/us-central1/instanceTemplates/Bad_Name",
    );
    let err = import(&text, fixture_path()).unwrap_err();
    assert!(matches!(err, ImportError::Config { .. }), "{err}");
    assert!(err.to_string().contains("nodeset[0].instance_template"), "{err}");
}

#[test]
fn not_yaml_says_where() {
    let err = import("a: [1,\n", Path::new("/c.yaml")).unwrap_err();
    assert!(err.to_string().starts_with("/c.yaml:"), "{err}");
    assert!(err.to_string().contains("not YAML"), "{err}");
}

/// The fixture with nodeset a3u's placement keys as given (YAML text of each value).
fn a3u_placement(accelerator_topology: &str, enable_placement: &str, placement_max_distance: &str) -> String {
    FIXTURE
        .replacen("accelerator_topology: null", &format!("accelerator_topology: {accelerator_topology}"), 1)
        .replacen("enable_placement: false", &format!("enable_placement: {enable_placement}"), 1)
        .replacen(
            "placement_max_distance: null",
            &format!("placement_max_distance: {placement_max_distance}"),
            1,
        )
}

#[test]
fn placement_settings_become_nodeset_placement() {
    use crate::config::{Placement, TopologyDistance::*};
    let owned = |d, a: Option<&str>| Placement::Owned {
        max_topology_distance: d,
        accelerator_topology: a.map(str::to_string),
    };
    // (accelerator_topology, enable_placement, placement_max_distance) → a3u's placement, a comment
    let cases = [
        ("null", "false", "null", None, ""),
        (
            "null",
            "false",
            "2",
            None,
            "placement_max_distance = 2: not carried over; enable_placement is not true",
        ),
        ("null", "true", "null", Some(owned(Some(Cluster), None)), "max_topology_distance = \"CLUSTER\""),
        (
            "null",
            "true",
            "1",
            Some(owned(Some(Subblock), None)),
            "placement_max_distance = 1: max_topology_distance = \"SUBBLOCK\"",
        ),
        (
            "null",
            "true",
            "2",
            Some(owned(Some(Block), None)),
            "placement_max_distance = 2: max_topology_distance = \"BLOCK\"",
        ),
        // Terraform numbers that went through arithmetic are floats.
        (
            "null",
            "true",
            "3.0",
            Some(owned(Some(Cluster), None)),
            "placement_max_distance = 3: max_topology_distance = \"CLUSTER\"",
        ),
        (
            "'1x72'",
            "true",
            "null",
            Some(owned(None, Some("1x72"))),
            "acceleratorTopology for the nodeset's MIGs",
        ),
        ("1x72", "false", "null", Some(owned(None, Some("1x72"))), "accelerator_topology = \"1x72\""),
        (
            "'1x72'",
            "true",
            "2",
            Some(owned(None, Some("1x72"))),
            "placement_max_distance = 2: not carried over; a workload policy with an acceleratorTopology",
        ),
    ];
    for (accel, enable, dist, want, note) in cases {
        let text = a3u_placement(accel, enable, dist);
        let toml = import(&text, fixture_path()).unwrap_or_else(|e| panic!("{accel} {enable} {dist}: {e}"));
        let cfg = Config::from_toml_str(&toml, Path::new("/etc/slurm-dws/slurm-dws.toml")).unwrap();
        let a3u = cfg.nodeset("a3u").unwrap();
        assert_eq!(a3u.placement, want, "{accel} {enable} {dist}:\n{toml}");
        let comments = comments_of(&toml);
        assert!(comments.contains(note), "{accel} {enable} {dist}: no {note:?} in\n{toml}");
        // h4d keeps no placement: its enable_placement is false.
        assert_eq!(cfg.nodeset("h4d").unwrap().placement, None);
    }
}

#[test]
fn placement_values_no_policy_takes_stop_the_import_naming_the_key() {
    for (accel, enable, dist, key, words) in [
        ("null", "true", "4", "nodeset.a3u.placement_max_distance", "is 4; expected 1, 2 or 3"),
        ("null", "true", "0", "nodeset.a3u.placement_max_distance", "is 0; expected 1, 2 or 3"),
        ("null", "true", "'near'", "nodeset.a3u.placement_max_distance", "expected 1, 2 or 3"),
        ("'72'", "true", "null", "nodeset.a3u.accelerator_topology", "\"72\" is not an accelerator topology"),
        ("null", "'yes'", "null", "nodeset.a3u.enable_placement", "expected true or false"),
    ] {
        let text = a3u_placement(accel, enable, dist);
        let err = import(&text, fixture_path()).expect_err(key).to_string();
        assert!(err.contains(key) && err.contains(words), "{key}: {err}");
    }
}

/// The comment lines of an imported config, `#` and spaces cut, joined with spaces.
fn comments_of(toml: &str) -> String {
    toml.lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#').trim())
        .collect::<Vec<_>>()
        .join(" ")
}
