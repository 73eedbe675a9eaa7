//! The config as an admin meets it: the shipped example, defaults, search order, every validation rule, docs drift.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use slurm_dws::config::raw::{RawConfig, KEYS};
use slurm_dws::config::slurm_conf::render_slurm_conf_for;
use slurm_dws::config::{render_slurm_conf, Config, ConfigError, Credentials, NodeAddr, DEFAULT_PATH};
use slurm_dws::slurm::SlurmVersion;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

#[test]
fn a_nodeset_may_live_in_another_region_with_a_global_or_own_regional_template() {
    for template in
        ["projects/p/global/instanceTemplates/t", "projects/p/regions/us-east5/instanceTemplates/t"]
    {
        let text = edited(&[
            ("name = \"a3u\"", "name = \"a3u\"\nregion = \"us-east5\""),
            ("[\"us-central1-a\"]", "[\"us-east5-a\", \"us-east5-b\"]"),
            ("projects/p/global/instanceTemplates/t", template),
        ]);
        let c = parse(&text).unwrap_or_else(|e| panic!("{template}: {e}"));
        assert_eq!((c.gcp.region.as_str(), c.nodesets[0].region.as_str()), ("us-central1", "us-east5"));
    }
    let c = parse(&edited(&[])).unwrap();
    assert_eq!(c.nodesets[0].region, "us-central1", "default: gcp.region");
}

fn example() -> Config {
    let path = repo("conf/slurm-dws.toml");
    Config::load(Some(&path)).expect("the shipped example is valid")
}

const BASE: &str = r#"cluster_name = "hpc"
[gcp]
project = "p"
region = "us-central1"
[[nodeset]]
name = "a3u"
instance_template = "projects/p/global/instanceTemplates/t"
zones = ["us-central1-a"]
node_count_dynamic_max = 4
[nodeset.dws_flex]
max_run_duration = 3600
"#;

/// `(from, to)` replacements applied to [`BASE`].
type Edits<'a> = &'a [(&'a str, &'a str)];

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::from_toml_str(text, Path::new("/etc/slurm-dws/test.toml"))
}

/// BASE with each `(from, to)` replacement applied (each `from` must occur).
fn edited(edits: &[(&str, &str)]) -> String {
    let mut text = BASE.to_string();
    for (from, to) in edits {
        assert!(text.contains(from), "test bug: {from:?} not in BASE");
        text = text.replacen(from, to, 1);
    }
    text
}

#[test]
fn example_parses_with_the_values_it_shows() {
    let c = example();
    assert!(c.source.ends_with("conf/slurm-dws.toml"));
    assert_eq!(c.cluster_name, "hpc");
    assert_eq!(c.state_dir, Path::new("/var/lib/slurm-dws"));
    assert_eq!(c.socket, Path::new("/run/slurm-dws/slurm-dws.sock"));
    assert_eq!(c.log_file, Path::new("/var/lib/slurm-dws/slurm-dws.log"));
    assert_eq!(c.gcp.project, "my-project");
    assert_eq!(c.gcp.region, "us-central1");
    assert_eq!(c.gcp.endpoint, "https://compute.googleapis.com/compute/v1/");
    assert_eq!(c.gcp.credentials, Credentials::Auto);
    assert_eq!((c.gcp.calls_per_minute, c.gcp.request_timeout, c.gcp.retry_deadline), (1200, 30, 120));
    assert_eq!(
        (c.gcp.read_calls_per_minute, c.gcp.write_calls_per_minute),
        (900, 600),
        "reads ¾ and writes ½ of calls_per_minute"
    );
    assert_eq!(c.slurm.bin_dir, Path::new("/usr/bin"));
    assert_eq!(c.slurm.conf.as_deref(), Some(Path::new("/etc/slurm/slurm.conf")));
    assert_eq!(c.slurm.node_addr, NodeAddr::None);
    assert_eq!(c.slurm.command_timeout, 30);
    assert_eq!(c.slurm.topology.kind, slurm_dws::config::TopologyKind::Block);
    assert_eq!(c.slurm.topology.file.as_deref(), Some(Path::new("/etc/slurm/topology.yaml")));
    let r = &c.reconcile;
    assert_eq!(
        (r.interval, r.orphan_grace, r.mig_gc_grace, r.backoff_initial, r.backoff_max),
        (30, 300, 300, 60, 1800)
    );
    assert_eq!(c.daemon.metrics_listen, Some("127.0.0.1:9464".parse::<SocketAddr>().unwrap()));
    assert_eq!(c.daemon.service_user.as_deref(), Some("slurm"));
    assert_eq!(c.daemon.history_days, 30);
    assert_eq!(c.daemon.readers.as_deref(), Some("slurmops"));
    assert_eq!((c.pricing.currency.as_str(), c.pricing.catalog), ("USD", false));
    let a3 = c.pricing.per_hour["a3-ultragpu-8g"];
    let h = |p: Option<slurm_dws::config::HourPrice>| p.map(|p| p.get());
    assert_eq!(
        (h(a3.flex), h(a3.spot), h(a3.standard), h(a3.reservation)),
        (Some(40.0), Some(30.0), Some(85.0), Some(60.0))
    );
    let h4d = c.pricing.per_hour["h4d-highmem-192"];
    assert_eq!(
        (h(h4d.flex), h(h4d.spot), h(h4d.standard), h(h4d.reservation)),
        (Some(4.5), None, Some(9.0), None)
    );

    assert_eq!(c.nodesets.len(), 2);
    let a3u = c.nodeset("a3u").unwrap();
    assert_eq!(a3u.instance_template, "projects/my-project/regions/us-central1/instanceTemplates/a3u-flex");
    assert_eq!(a3u.zones, ["us-central1-a", "us-central1-c"]);
    assert_eq!((a3u.node_count_static, a3u.node_count_dynamic_max), (2, 14));
    assert_eq!((a3u.static_indices(), a3u.dynamic_indices()), (0..2, 2..16));
    assert_eq!(a3u.partition, "a3u");
    assert_eq!(a3u.node_conf, "CPUs=208 RealMemory=1800000 Gres=gpu:8");
    let f = &a3u.dws_flex;
    assert!(f.enabled && f.use_job_duration);
    assert_eq!((f.max_run_duration, f.boot_allowance, f.queue_timeout, f.eol_grace), (604800, 600, 0, 600));
    assert_eq!(
        a3u.placement,
        Some(slurm_dws::config::Placement::Owned {
            max_topology_distance: Some(slurm_dws::config::TopologyDistance::Block),
            accelerator_topology: None
        })
    );

    let h4d = c.nodeset("h4d").unwrap();
    assert_eq!((h4d.node_count_static, h4d.node_count_dynamic_max), (0, 64));
    assert_eq!(h4d.partition, "cpu");
    assert_eq!((a3u.exclusive, a3u.fallback_after), (false, 0));
    assert_eq!((h4d.exclusive, h4d.fallback_after), (true, 600));
    assert_eq!((a3u.maintenance_reservation, h4d.maintenance_reservation), (true, false));
    assert_eq!((h4d.dws_flex.max_run_duration, h4d.dws_flex.queue_timeout), (86400, 3600));
    assert!(h4d.dws_flex.enabled && h4d.dws_flex.use_job_duration);
    assert!(c.nodeset("nope").is_none());
}

#[test]
fn defaults_fill_everything_not_written() {
    let c = parse(
        r#"cluster_name = "hpc"
[gcp]
project = "p"
region = "us-central1"
[[nodeset]]
name = "a3u"
instance_template = "projects/p/global/instanceTemplates/t"
zones = ["us-central1-a"]
node_count_dynamic_max = 1
"#,
    )
    .unwrap();
    assert_eq!(c.state_dir, Path::new("/var/lib/slurm-dws"));
    assert_eq!(c.socket, Path::new("/run/slurm-dws/slurm-dws.sock"));
    assert_eq!(c.log_file, Path::new("/var/lib/slurm-dws/slurm-dws.log"));
    assert_eq!(c.gcp.endpoint, "https://compute.googleapis.com/compute/v1/");
    assert_eq!(c.gcp.credentials, Credentials::Auto);
    assert_eq!((c.gcp.calls_per_minute, c.gcp.request_timeout, c.gcp.retry_deadline), (1200, 30, 120));
    assert_eq!(c.slurm.bin_dir, Path::new("/usr/bin"));
    assert_eq!(c.slurm.conf, None);
    assert_eq!(c.slurm.node_addr, NodeAddr::None);
    assert_eq!(c.slurm.command_timeout, 30);
    let r = &c.reconcile;
    assert_eq!(
        (r.interval, r.orphan_grace, r.mig_gc_grace, r.backoff_initial, r.backoff_max),
        (30, 300, 300, 60, 1800)
    );
    assert_eq!(c.daemon.metrics_listen, None);
    assert_eq!(c.daemon.service_user.as_deref(), Some("slurm"));
    assert_eq!((c.daemon.history_days, c.daemon.readers.as_deref()), (30, None));
    let n = &c.nodesets[0];
    assert_eq!((n.node_count_static, n.node_count_dynamic_max), (0, 1));
    assert_eq!(n.partition, "a3u");
    assert_eq!(n.node_conf, "");
    assert_eq!((n.exclusive, n.fallback_after), (false, 0), "not exclusive; fallback only on a failure");
    assert!(n.maintenance_reservation, "a maintenance window is reserved by default");
    let f = &n.dws_flex;
    assert!(f.enabled && f.use_job_duration);
    assert_eq!((f.max_run_duration, f.boot_allowance, f.queue_timeout, f.eol_grace), (604800, 600, 0, 600));
}

#[test]
fn derived_and_normalised_values() {
    let c = parse(&edited(&[
        (
            "cluster_name = \"hpc\"",
            "cluster_name = \"hpc\"\nstate_dir = \"/srv/dws\"",
        ),
        (
            "region = \"us-central1\"",
            "region = \"us-central1\"\nendpoint = \"http://127.0.0.1:8080/compute/v1\"\ncredentials = \"none\"",
        ),
        ("[[nodeset]]", "[slurm]\nnode_addr = \"internal_ip\"\n[daemon]\nservice_user = \"\"\n[[nodeset]]"),
    ]))
    .unwrap();
    assert_eq!(c.log_file, Path::new("/srv/dws/slurm-dws.log"));
    assert_eq!(c.gcp.endpoint, "http://127.0.0.1:8080/compute/v1/");
    assert_eq!(c.gcp.credentials, Credentials::None);
    assert_eq!(c.slurm.node_addr, NodeAddr::InternalIp);
    assert_eq!(c.daemon.service_user, None);

    for (cred, want) in [
        ("metadata", Credentials::Metadata),
        ("/etc/slurm-dws/key.json", Credentials::KeyFile("/etc/slurm-dws/key.json".into())),
    ] {
        let text = edited(&[(
            "region = \"us-central1\"",
            &format!("region = \"us-central1\"\ncredentials = \"{cred}\""),
        )]);
        assert_eq!(parse(&text).unwrap().gcp.credentials, want);
    }
    for endpoint in ["http://localhost:1/", "http://[::1]:9/compute/v1/", "http://127.1.2.3/"] {
        let text = edited(&[(
            "region = \"us-central1\"",
            &format!("region = \"us-central1\"\nendpoint = \"{endpoint}\"\ncredentials = \"none\""),
        )]);
        assert!(parse(&text).is_ok(), "{endpoint}");
    }
}

#[test]
fn resolved_config_prints_as_toml_that_parses_back_to_itself() {
    let c = example();
    let again = Config::from_toml_str(&c.to_toml(), &c.source).unwrap();
    assert_eq!(again, c);
}

/// Every validation rule: the edit, the key the error must name, and words the message must say.
#[test]
fn each_rule_names_its_key() {
    let cases: &[(Edits, &str, &str)] = &[
        (&[("cluster_name = \"hpc\"", "")], "cluster_name", "is required"),
        (&[("\"hpc\"", "\"Hpc\"")], "cluster_name", "[a-z][a-z0-9]{0,9}"),
        (&[("\"hpc\"", "\"hpc12345678\"")], "cluster_name", "[a-z][a-z0-9]{0,9}"),
        (&[("\"hpc\"", "\"9hpc\"")], "cluster_name", "[a-z][a-z0-9]{0,9}"),
        (&[("\"hpc\"", "\"hpc\"\nstate_dir = \"var/lib\"")], "state_dir", "absolute"),
        (&[("\"hpc\"", "\"hpc\"\nsocket = \"x.sock\"")], "socket", "absolute"),
        (&[("\"hpc\"", "\"hpc\"\nlog_file = \"x.log\"")], "log_file", "absolute"),
        (&[("project = \"p\"\n", "")], "gcp.project", "is required"),
        (&[("project = \"p\"", "project = \"My Project\"")], "gcp.project", "project id"),
        (&[("region = \"us-central1\"\n", "")], "gcp.region", "is required"),
        (&[("region = \"us-central1\"", "region = \"us-central1-a\"")], "gcp.region", "region name"),
        (&[("project = \"p\"", "project = \"p\"\nendpoint = \"ftp://x/\"")], "gcp.endpoint", "https://"),
        (&[("project = \"p\"", "project = \"p\"\nendpoint = \"https://\"")], "gcp.endpoint", "invalid host"),
        (&[("project = \"p\"", "project = \"p\"\ncredentials = \"none\"")], "gcp.credentials", "loopback"),
        (
            &[("project = \"p\"", "project = \"p\"\ncredentials = \"none\"\nendpoint = \"https://127.0.0.1/\"")],
            "gcp.credentials",
            "http:// endpoint on a loopback",
        ),
        (
            &[("project = \"p\"", "project = \"p\"\ncredentials = \"none\"\nendpoint = \"http://10.1.2.3/\"")],
            "gcp.credentials",
            "loopback",
        ),
        (
            &[("project = \"p\"", "project = \"p\"\ncredentials = \"none\"\nendpoint = \"http://localhost.evil.com/\"")],
            "gcp.credentials",
            "loopback",
        ),
        (&[("project = \"p\"", "project = \"p\"\ncredentials = \"key.json\"")], "gcp.credentials", "absolute path"),
        (&[("project = \"p\"", "project = \"p\"\nread_calls_per_minute = 0")], "gcp.read_calls_per_minute", "minimum is 1"),
        (&[("project = \"p\"", "project = \"p\"\ncalls_per_minute = 0")], "gcp.calls_per_minute", "minimum is 1"),
        (&[("project = \"p\"", "project = \"p\"\nrequest_timeout = 0")], "gcp.request_timeout", "minimum 1"),
        (&[("project = \"p\"", "project = \"p\"\nretry_deadline = 10")], "gcp.retry_deadline", "request_timeout"),
        (&[("[[nodeset]]", "[slurm]\nbin_dir = \"bin\"\n[[nodeset]]")], "slurm.bin_dir", "absolute"),
        (&[("[[nodeset]]", "[slurm]\nconf = \"slurm.conf\"\n[[nodeset]]")], "slurm.conf", "absolute"),
        (&[("[[nodeset]]", "[slurm]\nnode_addr = \"external\"\n[[nodeset]]")], "slurm.node_addr", "none or internal_ip"),
        (&[("[[nodeset]]", "[slurm]\ncommand_timeout = 0\n[[nodeset]]")], "slurm.command_timeout", "minimum 1"),
        (&[("[[nodeset]]", "[reconcile]\ninterval = 0\n[[nodeset]]")], "reconcile.interval", "minimum 1"),
        (&[("[[nodeset]]", "[reconcile]\nbackoff_initial = 0\n[[nodeset]]")], "reconcile.backoff_initial", "minimum 1"),
        (&[("[[nodeset]]", "[reconcile]\nbackoff_max = 10\n[[nodeset]]")], "reconcile.backoff_max", "backoff_initial"),
        (&[("[[nodeset]]", "[daemon]\nmetrics_listen = \"9464\"\n[[nodeset]]")], "daemon.metrics_listen", "IP address and port"),
        (&[("[[nodeset]]", "[daemon]\nservice_user = \"a b\"\n[[nodeset]]")], "daemon.service_user", "user name"),
        (&[("[[nodeset]]", "[daemon]\nhistory_days = 0\n[[nodeset]]")], "daemon.history_days", "minimum 1"),
        (&[("[[nodeset]]", "[daemon]\nreaders = \"ops team\"\n[[nodeset]]")], "daemon.readers", "group name"),
        (&[("name = \"a3u\"\n", "")], "nodeset[0].name", "is required"),
        (&[("name = \"a3u\"", "name = \"A3U\"")], "nodeset[0].name", "[a-z0-9]{1,14}"),
        (&[("name = \"a3u\"", "name = \"a-3\"")], "nodeset[0].name", "[a-z0-9]{1,14}"),
        (&[("name = \"a3u\"", "name = \"abcdefghijklmno\"")], "nodeset[0].name", "[a-z0-9]{1,14}"),
        (&[("instance_template = \"projects/p/global/instanceTemplates/t\"\n", "")], "nodeset[0].instance_template", "is required"),
        (&[("global/instanceTemplates/t", "regions/europe-west4/instanceTemplates/t")], "nodeset[0].instance_template", "its own region"),
        (&[("projects/p/global/instanceTemplates/t", "my-template")], "nodeset[0].instance_template", "not an instance template"),
        (&[("zones = [\"us-central1-a\"]\n", "")], "nodeset[0].zones", "is required"),
        (&[("[\"us-central1-a\"]", "[]")], "nodeset[0].zones", "at least one zone"),
        (&[("[\"us-central1-a\"]", "[\"europe-west4-a\"]")], "nodeset[0].zones", "not a zone of gcp.region"),
        (&[("[\"us-central1-a\"]", "[\"us-central1\"]")], "nodeset[0].zones", "not a zone of gcp.region"),
        (&[("[\"us-central1-a\"]", "[\"us-central1-a\", \"us-central1-a\"]")], "nodeset[0].zones", "twice"),
        (&[("name = \"a3u\"", "name = \"a3u\"\nregion = \"us-east5-a\"")], "nodeset[0].region", "not a region name"),
        (&[("name = \"a3u\"", "name = \"a3u\"\nregion = \"us-east5\"")], "nodeset[0].zones", "not a zone of nodeset[0].region \"us-east5\""),
        (
            &[("name = \"a3u\"", "name = \"a3u\"\nregion = \"us-east5\""), ("[\"us-central1-a\"]", "[\"us-east5-b\"]"), ("global/instanceTemplates/t", "regions/us-central1/instanceTemplates/t")],
            "nodeset[0].instance_template",
            "but nodeset[0].region is \"us-east5\"",
        ),
        (&[("node_count_dynamic_max = 4", "node_count_dynamic_max = 0")], "nodeset[0].node_count_dynamic_max", "at least one node"),
        (&[("node_count_dynamic_max = 4\n", "")], "nodeset[0].node_count_dynamic_max", "at least one node"),
        (
            &[("node_count_dynamic_max = 4", "node_count_static = 50000\nnode_count_dynamic_max = 50001")],
            "nodeset[0].node_count_dynamic_max",
            "above 100000",
        ),
        (&[("node_count_dynamic_max = 4", "node_count_dynamic_max = 4\npartition = \"a b\"")], "nodeset[0].partition", "letters, digits"),
        (&[("node_count_dynamic_max = 4", "node_count_dynamic_max = 4\npartition = \"DEFAULT\"")], "nodeset[0].partition", "DEFAULT"),
        (&[("node_count_dynamic_max = 4", "node_count_dynamic_max = 4\nnode_conf = \"State=IDLE\"")], "nodeset[0].node_conf", "State="),
        (&[("node_count_dynamic_max = 4", "node_count_dynamic_max = 4\nnode_conf = \"CPUs=2 # x\"")], "nodeset[0].node_conf", "'#'"),
        (&[("max_run_duration = 3600", "max_run_duration = 599")], "nodeset[0].dws_flex.max_run_duration", "600..604800"),
        (&[("max_run_duration = 3600", "max_run_duration = 604801")], "nodeset[0].dws_flex.max_run_duration", "600..604800"),
        (&[("max_run_duration = 3600", "max_run_duration = 3600\nboot_allowance = 604201")], "nodeset[0].dws_flex.boot_allowance", "604200"),
        (&[("max_run_duration = 3600", "max_run_duration = 3600\nqueue_timeout = 59")], "nodeset[0].dws_flex.queue_timeout", "at least 60"),
        (&[("max_run_duration = 3600", "max_run_duration = 3600\neol_grace = 3600")], "nodeset[0].dws_flex.eol_grace", "below max_run_duration"),
        (&[("[[nodeset]]\nname = \"a3u\"\ninstance_template = \"projects/p/global/instanceTemplates/t\"\nzones = [\"us-central1-a\"]\nnode_count_dynamic_max = 4\n[nodeset.dws_flex]\nmax_run_duration = 3600\n", "")], "nodeset", "at least one [[nodeset]]"),
    ];
    for (edits, key, words) in cases {
        let text = edited(edits);
        let err = parse(&text).expect_err(&format!("{edits:?} should be rejected"));
        let ConfigError::Invalid { file, problems } = &err else {
            panic!("{edits:?}: expected a validation error, got {err}");
        };
        assert_eq!(file, Path::new("/etc/slurm-dws/test.toml"));
        assert_eq!(problems.len(), 1, "{edits:?}: one problem, got {err}");
        assert_eq!(problems[0].key, *key, "{edits:?}: {err}");
        assert!(problems[0].message.contains(words), "{edits:?}: {err}");
        let line = err.first_line();
        assert!(!line.contains('\n'));
        assert!(line.starts_with("/etc/slurm-dws/test.toml"), "{line}");
        assert!(line.contains(&format!(": {key}: ")), "{line}");
    }
}

#[test]
fn validation_errors_point_at_the_line_and_all_are_reported() {
    let text = edited(&[
        ("name = \"a3u\"", "name = \"A3U\""),
        ("max_run_duration = 3600", "max_run_duration = 100"),
    ]);
    let err = parse(&text).unwrap_err();
    let ConfigError::Invalid { problems, .. } = &err else { panic!("{err}") };
    let got: Vec<(&str, Option<usize>)> = problems.iter().map(|p| (p.key.as_str(), p.line)).collect();
    assert_eq!(got, [("nodeset[0].name", Some(6)), ("nodeset[0].dws_flex.max_run_duration", Some(11))]);
    assert_eq!(err.to_string().lines().count(), 2);
    assert_eq!(
        err.first_line(),
        "/etc/slurm-dws/test.toml:6: nodeset[0].name: \"A3U\" must match [a-z0-9]{1,14} \
         (lowercase: it is part of node and MIG names) (and 1 more problem)"
    );
}

#[test]
fn duplicate_nodesets_are_rejected() {
    let second = "[[nodeset]]\nname = \"a3u\"\ninstance_template = \"global/instanceTemplates/t\"\nzones = [\"us-central1-b\"]\nnode_count_dynamic_max = 1\n";
    let err = parse(&format!("{BASE}{second}")).unwrap_err();
    let ConfigError::Invalid { problems, .. } = &err else { panic!("{err}") };
    assert_eq!(problems.len(), 1, "{err}");
    assert_eq!(problems[0].key, "nodeset[1].name");
    assert_eq!(problems[0].line, Some(13));
    assert!(problems[0].message.contains("duplicate nodeset \"a3u\" (also nodeset[0])"));
    // A name that is a prefix of another is fine.
    let ok = second.replace("\"a3u\"", "\"a3u2\"");
    assert_eq!(parse(&format!("{BASE}{ok}")).unwrap().nodesets.len(), 2);
}

#[test]
fn unknown_keys_and_wrong_types_name_the_key_and_line() {
    let cases: &[(Edits, &str, usize, &str)] = &[
        (
            &[("cluster_name = \"hpc\"", "cluster_name = \"hpc\"\nbogus = 1")],
            "bogus",
            2,
            "unknown key `bogus`",
        ),
        (&[("project = \"p\"", "project = \"p\"\nzone = \"x\"")], "gcp.zone", 4, "unknown key `zone`"),
        (
            &[("node_count_dynamic_max = 4", "node_count_dynamic_max = 4\nmax_run_duration = 5")],
            "nodeset[0].max_run_duration",
            10,
            "unknown key",
        ),
        (
            &[("max_run_duration = 3600", "max_run_duration = 3600\nenable = true")],
            "nodeset[0].dws_flex.enable",
            12,
            "unknown key `enable`",
        ),
        (&[("[gcp]", "[gpc]")], "gpc", 2, "unknown key `gpc`"),
        (
            &[("max_run_duration = 3600", "max_run_duration = \"1h\"")],
            "nodeset[0].dws_flex.max_run_duration",
            11,
            "invalid type",
        ),
        (
            &[("max_run_duration = 3600", "max_run_duration = -5")],
            "nodeset[0].dws_flex.max_run_duration",
            11,
            "u64",
        ),
        (
            &[("node_count_dynamic_max = 4", "node_count_dynamic_max = 4.5")],
            "nodeset[0].node_count_dynamic_max",
            9,
            "invalid type",
        ),
        (
            &[("zones = [\"us-central1-a\"]", "zones = \"us-central1-a\"")],
            "nodeset[0].zones",
            8,
            "invalid type",
        ),
    ];
    for (edits, key, line, words) in cases {
        let err = parse(&edited(edits)).unwrap_err();
        let ConfigError::Parse { file, line: l, key: k, message, .. } = &err else {
            panic!("{edits:?}: expected a parse error, got {err}");
        };
        assert_eq!(file, Path::new("/etc/slurm-dws/test.toml"));
        assert_eq!(k.as_deref(), Some(*key), "{err}");
        assert_eq!(*l, Some(*line), "{err}");
        assert!(message.contains(words), "{err}");
        assert!(!err.first_line().contains('\n'));
        assert!(err.first_line().starts_with(&format!("/etc/slurm-dws/test.toml:{line}:")), "{err}");
    }
    // Not TOML at all: still one line with a position.
    let err = parse("cluster_name = \n").unwrap_err();
    assert!(matches!(err, ConfigError::Parse { line: Some(1), .. }), "{err}");
    assert!(!err.first_line().contains('\n'));
}

#[test]
fn search_order() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, cluster: &str| {
        let p = dir.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, BASE.replace("\"hpc\"", &format!("\"{cluster}\""))).unwrap();
        p
    };
    let explicit = write("explicit.toml", "explicit");
    let from_env = write("env.toml", "env");
    let beside = write("etc/slurm/slurm-dws.toml", "beside");
    let slurm_conf: OsString = dir.path().join("etc/slurm/slurm.conf").into();
    let env_config: OsString = from_env.clone().into();
    let env = |config: Option<OsString>, slurm: Option<OsString>| {
        move |k: &str| match k {
            "SLURM_DWS_CONFIG" => config.clone(),
            "SLURM_CONF" => slurm.clone(),
            _ => None,
        }
    };
    let cluster = |r: Result<Config, ConfigError>| r.unwrap().cluster_name;

    let all = env(Some(env_config.clone()), Some(slurm_conf.clone()));
    assert_eq!(cluster(Config::load_with_env(Some(&explicit), &all)), "explicit");
    assert_eq!(cluster(Config::load_with_env(None, &all)), "env");
    let no_env = env(Some(OsString::new()), Some(slurm_conf.clone()));
    assert_eq!(cluster(Config::load_with_env(None, no_env)), "beside");
    let c = Config::load_with_env(None, env(None, Some(slurm_conf))).unwrap();
    assert_eq!(c.source, beside);

    // A named file that is missing is an error that says which path and why it was chosen.
    let missing = dir.path().join("missing.toml");
    let err = Config::load_with_env(Some(&missing), env(None, None)).unwrap_err();
    assert!(matches!(err, ConfigError::Read { .. }));
    let msg = err.to_string();
    assert!(msg.contains(&missing.display().to_string()) && msg.contains("--config"), "{msg}");
    let err = Config::load_with_env(None, env(Some(missing.clone().into()), None)).unwrap_err();
    assert!(err.to_string().contains("$SLURM_DWS_CONFIG"), "{err}");

    // Nothing beside SLURM_CONF: fall through to the default path, and say both.
    let elsewhere: OsString = dir.path().join("nowhere/slurm.conf").into();
    let err = Config::load_with_env(None, env(None, Some(elsewhere))).unwrap_err();
    let msg = err.to_string();
    if !Path::new(DEFAULT_PATH).exists() {
        assert!(msg.contains(DEFAULT_PATH), "{msg}");
        assert!(msg.contains("nowhere/slurm-dws.toml"), "{msg}");
    }
}

#[test]
fn slurm_conf_example_is_the_rendered_example() {
    let rendered =
        render_slurm_conf_for(&example(), Path::new("/usr/local/sbin"), Some(SlurmVersion::new(26, 5, 0)));
    let shipped = std::fs::read_to_string(repo("conf/slurm.conf.example")).unwrap();
    assert_eq!(
        shipped, rendered,
        "conf/slurm.conf.example is stale: regenerate it with \
         `slurm-dws check-config conf/slurm-dws.toml --print-slurm-conf --hook-dir /usr/local/sbin --slurm-version 26.05`"
    );
}

#[test]
fn slurm_conf_lines() {
    let text = format!(
        "{BASE}[[nodeset]]\nname = \"b\"\ninstance_template = \"global/instanceTemplates/t\"\n\
         zones = [\"us-central1-b\"]\nnode_count_static = 1\nnode_count_dynamic_max = 0\n\
         partition = \"a3u\"\n[nodeset.dws_flex]\nenabled = false\n\
         [[nodeset]]\nname = \"c\"\ninstance_template = \"global/instanceTemplates/t\"\n\
         zones = [\"us-central1-b\"]\nnode_count_static = 3\nnode_count_dynamic_max = 2\n\
         [nodeset.dws_flex]\nenabled = false\n"
    );
    // 22.05: the release that needs PrivateData=cloud.
    let out = render_slurm_conf_for(
        &parse(&text).unwrap(),
        Path::new("/opt/bin"),
        Some(SlurmVersion::new(22, 5, 8)),
    );
    let lines: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
    for want in [
        "ResumeProgram=/opt/bin/slurm-dws-resume",
        "SuspendProgram=/opt/bin/slurm-dws-suspend",
        "ResumeFailProgram=/opt/bin/slurm-dws-resume-fail",
        "ResumeRate=0",
        "SuspendRate=0",
        "PrivateData=cloud",
        "SuspendExcNodes=hpc-b-0,hpc-c-[0-2]",
        "NodeName=hpc-a3u-[0-3] State=CLOUD",
        "NodeName=hpc-b-0 State=CLOUD",
        "NodeName=hpc-c-[0-4] State=CLOUD",
        // Nodesets sharing a partition are merged; flex if any of them is.
        "PartitionName=a3u Nodes=hpc-a3u-[0-3],hpc-b-0 ResumeTimeout=65533 State=UP",
        "PartitionName=c Nodes=hpc-c-[0-4] State=UP",
    ] {
        assert!(lines.contains(&want), "missing {want:?} in\n{out}");
    }
    // Every setting line is explained by a comment right above it (or its group).
    assert!(out.lines().next().unwrap().starts_with('#'));
    assert!(!render_slurm_conf(&parse(BASE).unwrap(), Path::new("/x")).contains("SuspendExcNodes="));
}

/// Collect dotted keys of a TOML value (array of tables contribute their element keys).
fn keys_of(prefix: &str, v: &toml::Value, out: &mut BTreeSet<String>) {
    match v {
        toml::Value::Table(t) => {
            for (k, v) in t {
                // `[pricing.per_hour]` is keyed by machine type: KEYS names it by a placeholder.
                let k = if prefix == "pricing.per_hour" { slurm_dws::config::raw::MACHINE_TYPE } else { k };
                let path = if prefix.is_empty() { k.to_string() } else { format!("{prefix}.{k}") };
                keys_of(&path, v, out);
            }
        }
        toml::Value::Array(a) if a.first().is_some_and(toml::Value::is_table) => {
            for item in a {
                keys_of(prefix, item, out);
            }
        }
        _ => {
            out.insert(prefix.to_string());
        }
    }
}

#[test]
fn key_list_matches_the_schema() {
    // The example sets every optional key but the delegate programs (a program named there must exist
    // where the config is loaded), so its resolved form, with those set, carries every key there is.
    let mut c = example();
    for p in [&mut c.slurm.delegate_resume, &mut c.slurm.delegate_suspend, &mut c.slurm.delegate_resume_fail]
    {
        *p = Some("/usr/local/sbin/slurm-gcp-program".into());
    }
    // One nodeset with an owned policy (both keys), the other with an existing one.
    c.nodesets[0].placement = Some(slurm_dws::config::Placement::Owned {
        max_topology_distance: Some(slurm_dws::config::TopologyDistance::Block),
        accelerator_topology: Some("1x72".into()),
    });
    c.nodesets[1].placement = Some(slurm_dws::config::Placement::Existing {
        url: "projects/my-project/regions/us-central1/resourcePolicies/wp".into(),
    });
    // One nodeset on a reservation's block, the other on a calendar-mode booking.
    c.nodesets[0].reservation = Some(slurm_dws::config::ReservedCapacity {
        source: slurm_dws::config::ReservationSource::Reservation(
            slurm_dws::config::parse_reservation_url(
                "projects/my-project/zones/us-central1-a/reservations/r/reservationBlocks/b",
            )
            .unwrap(),
        ),
        eol_grace: 900,
    });
    c.nodesets[1].reservation = Some(slurm_dws::config::ReservedCapacity {
        source: slurm_dws::config::ReservationSource::Future(
            slurm_dws::config::parse_future_reservation_url(
                "projects/my-project/zones/us-central1-a/futureReservations/f",
            )
            .unwrap(),
        ),
        eol_grace: 600,
    });
    let raw = RawConfig::from(&c);
    let mut serialized = BTreeSet::new();
    keys_of("", &toml::Value::try_from(&raw).unwrap(), &mut serialized);
    let listed: BTreeSet<String> = KEYS.iter().map(|k| k.to_string()).collect();
    assert_eq!(serialized, listed, "raw::KEYS and the raw structs disagree");
}

#[test]
fn docs_describe_exactly_the_schema() {
    let doc = std::fs::read_to_string(repo("docs/configuration.md")).unwrap();
    // Table rows whose first cell is a backquoted key path.
    let documented: BTreeSet<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect();
    let listed: BTreeSet<String> = KEYS.iter().map(|k| k.to_string()).collect();
    let undocumented: Vec<_> = listed.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&listed).collect();
    assert!(undocumented.is_empty(), "keys missing from docs/configuration.md: {undocumented:?}");
    assert!(unknown.is_empty(), "docs/configuration.md documents keys that do not exist: {unknown:?}");
}

/// `[slurm] delegate_*`: an absolute path to an executable file on this host, else a problem that
/// names the key and its line; a valid one resolves and reaches `Slurm::delegate`.
#[test]
fn delegate_programs_must_exist_and_be_executable() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let program = dir.path().join("resume.py");
    std::fs::write(&program, "#!/bin/sh\n").unwrap();
    let plain = dir.path().join("notes.txt");
    std::fs::write(&plain, "").unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
    let with = |key: &str, value: &str| format!("{BASE}[slurm]\n{key} = \"{value}\"\n");
    for (key, value, words) in [
        ("delegate_resume", "/nonexistent/resume.py", "No such file"),
        ("delegate_suspend", plain.to_str().unwrap(), "is not executable"),
        ("delegate_resume_fail", dir.path().to_str().unwrap(), "is not a regular file"),
        ("delegate_resume", "resume.py", "must be an absolute path"),
    ] {
        let err = parse(&with(key, value)).unwrap_err();
        let ConfigError::Invalid { problems, .. } = &err else { panic!("{err}") };
        assert_eq!(problems.len(), 1, "{err}");
        assert_eq!(problems[0].key, format!("slurm.{key}"));
        assert_eq!(problems[0].line, Some(BASE.lines().count() + 2), "{err}");
        assert!(problems[0].message.contains(words) && problems[0].message.contains(value), "{err}");
    }
    let c = parse(&with("delegate_resume", program.to_str().unwrap())).unwrap();
    assert_eq!(c.slurm.delegate(slurm_dws::model::HookKind::Resume), Some(program.as_path()));
    assert_eq!(c.slurm.delegate(slurm_dws::model::HookKind::Suspend), None);
    // It prints back and parses back to itself.
    assert_eq!(parse(&c.to_toml()).unwrap().slurm, c.slurm);
}

/// `provisioning_model`: "flex" by default and the only value `dws_flex.enabled = true` allows;
/// `dws_flex.enabled = false` alone means "standard"; a contradiction names both keys.
#[test]
fn provisioning_model_defaults_and_contradictions() {
    use slurm_dws::config::ProvisioningModel;
    let with = |model: Option<&str>, enabled: Option<bool>| {
        let mut text = BASE.replace("[nodeset.dws_flex]\n", "");
        if let Some(m) = model {
            text = text.replace(
                "node_count_dynamic_max = 4\n",
                &format!("node_count_dynamic_max = 4\nprovisioning_model = \"{m}\"\n"),
            );
        }
        text.push_str("[nodeset.dws_flex]\n");
        if let Some(e) = enabled {
            text.push_str(&format!("enabled = {e}\n"));
        }
        text.replace(
            "max_run_duration = 3600\n[nodeset.dws_flex]",
            "[nodeset.dws_flex]\nmax_run_duration = 3600",
        )
    };
    let model =
        |m, e| parse(&with(m, e)).map(|c| (c.nodesets[0].provisioning_model, c.nodesets[0].dws_flex.enabled));
    assert_eq!(model(None, None).unwrap(), (ProvisioningModel::Flex, true));
    assert_eq!(model(None, Some(true)).unwrap(), (ProvisioningModel::Flex, true));
    assert_eq!(model(None, Some(false)).unwrap(), (ProvisioningModel::Standard, false));
    assert_eq!(model(Some("spot"), None).unwrap(), (ProvisioningModel::Spot, false));
    assert_eq!(model(Some("standard"), Some(false)).unwrap(), (ProvisioningModel::Standard, false));
    assert_eq!(model(Some("flex"), Some(true)).unwrap(), (ProvisioningModel::Flex, true));
    for (m, e, words) in [
        (Some("spot"), Some(true), "contradicts nodeset[0].dws_flex.enabled = true"),
        (Some("standard"), Some(true), "contradicts nodeset[0].dws_flex.enabled = true"),
        (Some("flex"), Some(false), "contradicts nodeset[0].dws_flex.enabled = false"),
        (Some("preemptible"), None, "must be one of \"flex\", \"standard\", \"spot\""),
        (Some("SPOT"), None, "must be one of"),
    ] {
        let err = parse(&with(m, e)).expect_err(words).to_string();
        assert!(err.contains("nodeset[0].provisioning_model") && err.contains(words), "{m:?} {e:?}: {err}");
    }
    // What the daemon writes back (last-accepted.toml) loads to the same model.
    let spot = parse(&with(Some("spot"), None)).unwrap();
    let again = toml::to_string(&RawConfig::from(&spot)).unwrap();
    assert_eq!(parse(&again).unwrap().nodesets[0].provisioning_model, ProvisioningModel::Spot);
}

/// `[nodeset.placement]` and `[slurm] topology`: each wrong value is a problem naming nodeset, key
/// and value; a right one resolves.
#[test]
fn placement_and_topology_keys() {
    use slurm_dws::config::{Placement, TopologyDistance, TopologyKind};
    let with = |table: &str| format!("{BASE}[nodeset.placement]\n{table}\n");
    for (table, key, words) in [
        (
            "workload_policy = \"projects/p/regions/us-central1/resourcePolicies/wp\"\nmax_topology_distance = \"BLOCK\"",
            "nodeset[0].placement.workload_policy",
            "not both",
        ),
        ("max_topology_distance = \"block\"", "nodeset[0].placement.max_topology_distance", "\"block\" must be"),
        ("accelerator_topology = \"72\"", "nodeset[0].placement.accelerator_topology", "\"72\" must be like 1x72"),
        ("workload_policy = \"wp\"", "nodeset[0].placement.workload_policy", "\"wp\" must be projects/"),
        (
            "workload_policy = \"projects/p/regions/europe-west4/resourcePolicies/wp\"",
            "nodeset[0].placement.workload_policy",
            "its own region \"us-central1\"",
        ),
        ("", "nodeset[0].placement", "is empty"),
    ] {
        let err = parse(&with(table)).unwrap_err();
        assert_eq!(err.keys(), [key], "{table}: {err}");
        assert!(err.to_string().contains(words), "{table}: {err}");
    }
    let c = parse(&with("max_topology_distance = \"SUBBLOCK\"\naccelerator_topology = \"1x72\"")).unwrap();
    assert_eq!(
        c.nodesets[0].placement,
        Some(Placement::Owned {
            max_topology_distance: Some(TopologyDistance::Subblock),
            accelerator_topology: Some("1x72".into())
        })
    );
    let c = parse(&with("workload_policy = \"projects/p/regions/us-central1/resourcePolicies/wp\"")).unwrap();
    assert!(matches!(&c.nodesets[0].placement, Some(Placement::Existing { url }) if url.ends_with("/wp")));
    assert_eq!(parse(BASE).unwrap().nodesets[0].placement, None);

    let err = parse(&format!("{BASE}[slurm]\ntopology = \"dragonfly\"\n")).unwrap_err();
    assert_eq!(err.keys(), ["slurm.topology"]);
    let err =
        parse(&format!("{BASE}[slurm]\ntopology = \"tree\"\ntopology_file = \"topo.conf\"\n")).unwrap_err();
    assert_eq!(err.keys(), ["slurm.topology_file"]);
    let c = parse(&format!("{BASE}[slurm]\ntopology = \"tree\"\n")).unwrap();
    assert_eq!((c.slurm.topology.kind, c.slurm.topology.file.as_deref()), (TopologyKind::Tree, None));
}

/// `provisioning_model = "reservation"` and `[nodeset.reservation]`: each wrong value is a problem
/// naming nodeset, key and value; a right one resolves.
#[test]
fn reservation_keys() {
    use slurm_dws::config::{ProvisioningModel, ReservationSource};
    let reserved = |table: &str| {
        format!(
            "{}[nodeset.reservation]\n{table}\n",
            BASE.replace(
                "node_count_dynamic_max = 4\n",
                "node_count_dynamic_max = 4\nprovisioning_model = \"reservation\"\n"
            )
        )
    };
    let res = "name = \"projects/p/zones/us-central1-a/reservations/r\"";
    for (text, key, words) in [
        (
            reserved(&format!(
                "{res}\nfuture_reservation = \"projects/p/zones/us-central1-a/futureReservations/f\""
            )),
            "nodeset[0].reservation.name",
            "not both",
        ),
        (reserved(""), "nodeset[0].reservation", "needs name"),
        (
            reserved("name = \"projects/p/zones/us-central1-a/reservations/R\""),
            "nodeset[0].reservation.name",
            "\"R\" is not a GCE resource name",
        ),
        (
            reserved("name = \"projects/p/reservations/r\""),
            "nodeset[0].reservation.name",
            "must be projects/P/zones/Z/reservations/R",
        ),
        (
            reserved("name = \"projects/p/zones/us-central1-b/reservations/r\""),
            "nodeset[0].reservation.name",
            "is in zone us-central1-b",
        ),
        (
            reserved("future_reservation = \"projects/p/zones/us-central1-a/reservations/f\""),
            "nodeset[0].reservation.future_reservation",
            "must be projects/P/zones/Z/futureReservations/F",
        ),
        (reserved(&format!("{res}\neol_grace = 90000")), "nodeset[0].reservation.eol_grace", "above 86400"),
        (
            BASE.replace(
                "node_count_dynamic_max = 4\n",
                "node_count_dynamic_max = 4\nprovisioning_model = \"reservation\"\n",
            ),
            "nodeset[0].reservation",
            "is required with provisioning_model = \"reservation\"",
        ),
        (
            format!("{BASE}[nodeset.reservation]\n{res}\n"),
            "nodeset[0].reservation.name",
            "this nodeset is flex",
        ),
    ] {
        let err = parse(&text).unwrap_err();
        assert_eq!(err.keys(), [key], "{text}: {err}");
        assert!(err.to_string().contains(words), "{text}: {err}");
    }
    let c = parse(&reserved(
        "name = \"projects/p/zones/us-central1-a/reservations/r/reservationBlocks/b1\"\neol_grace = 1200",
    ))
    .unwrap();
    let ns = &c.nodesets[0];
    assert_eq!(ns.provisioning_model, ProvisioningModel::Reservation);
    assert!(!ns.dws_flex.enabled);
    let r = ns.reservation.as_ref().unwrap();
    assert_eq!(r.eol_grace, 1200);
    assert!(matches!(&r.source, ReservationSource::Reservation(x) if x.block.as_deref() == Some("b1")));
    assert_eq!(ns.consumes().unwrap().affinity_value(), "projects/p/reservations/r/reservationBlocks/b1");
    let c = parse(&reserved("future_reservation = \"projects/p/zones/us-central1-a/futureReservations/f\""))
        .unwrap();
    let r = c.nodesets[0].reservation.as_ref().unwrap();
    assert_eq!(
        (r.eol_grace, r.source.url().as_str()),
        (600, "projects/p/zones/us-central1-a/futureReservations/f")
    );
    assert!(c.nodesets[0].consumes().is_none());
    // What the daemon writes back (last-accepted.toml) loads to the same reservation.
    let again = toml::to_string(&RawConfig::from(&c)).unwrap();
    assert_eq!(parse(&again).unwrap().nodesets[0].reservation, c.nodesets[0].reservation);
}

/// `[pricing]`: defaults (USD, no catalog, no prices); every bad price, currency or machine type
/// names its key and line; integers are prices too; an unknown model is a parse error naming it.
#[test]
fn pricing_keys_and_their_rules() {
    let c = parse(BASE).unwrap();
    assert_eq!(c.pricing, slurm_dws::config::Pricing::default());
    assert_eq!(c.pricing.currency, "USD");
    let c = parse(&format!("{BASE}[pricing]\ncurrency = \"EUR\"\ncatalog = true\n[pricing.per_hour]\n\"a3-highgpu-8g\" = {{ flex = 30, spot = 0 }}\n")).unwrap();
    assert_eq!((c.pricing.currency.as_str(), c.pricing.catalog), ("EUR", true));
    let p = c.pricing.per_hour["a3-highgpu-8g"];
    assert_eq!((p.flex.map(|x| x.get()), p.spot.map(|x| x.get()), p.standard), (Some(30.0), Some(0.0), None));
    // It prints back and parses back to itself.
    assert_eq!(parse(&c.to_toml()).unwrap().pricing, c.pricing);
    let line = BASE.lines().count() + 4;
    for (tail, key, words) in [
        ("[pricing]\n\n\ncurrency = \"usd\"\n", "pricing.currency", "ISO 4217"),
        (
            "[pricing]\n\n[pricing.per_hour]\n\"a3-highgpu-8g\" = { flex = -1.0 }\n",
            "pricing.per_hour.a3-highgpu-8g.flex",
            "at least 0",
        ),
        (
            "[pricing]\n\n[pricing.per_hour]\n\"a3-highgpu-8g\" = { spot = nan }\n",
            "pricing.per_hour.a3-highgpu-8g.spot",
            "finite",
        ),
        (
            "[pricing]\n\n[pricing.per_hour]\n\"a3-highgpu-8g\" = { standard = inf }\n",
            "pricing.per_hour.a3-highgpu-8g.standard",
            "finite",
        ),
        (
            "[pricing]\n\n[pricing.per_hour]\n\"A3 big\" = { reservation = 1.0 }\n",
            "pricing.per_hour.A3 big",
            "not a machine type",
        ),
    ] {
        let err = parse(&format!("{BASE}{tail}")).unwrap_err();
        let ConfigError::Invalid { problems, .. } = &err else { panic!("{tail}: {err}") };
        assert_eq!(problems.len(), 1, "{err}");
        assert_eq!(problems[0].key, key, "{err}");
        assert_eq!(problems[0].line, Some(line), "{err}");
        assert!(problems[0].message.contains(words), "{err}");
    }
    // Wrong types and unknown models are parse errors naming the key.
    for (tail, key) in [
        ("[pricing.per_hour]\n\"a3-highgpu-8g\" = { preemptible = 1.0 }\n", "pricing.per_hour"),
        ("[pricing.per_hour]\n\"a3-highgpu-8g\" = { flex = \"40\" }\n", "pricing.per_hour"),
        ("[pricing]\ncatalog = \"yes\"\n", "pricing.catalog"),
    ] {
        let err = parse(&format!("{BASE}{tail}")).unwrap_err();
        assert!(err.keys().iter().any(|k| k.starts_with(key)), "{tail}: {err} ({:?})", err.keys());
    }
}
