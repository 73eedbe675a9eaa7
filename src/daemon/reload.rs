//! SIGHUP: which config changes a running daemon may take, decided by a pure function of (old, new).
//!
//! A reload happens between two passes, never during one, so no work is dropped: everything in flight is
//! in the store, and the next pass (run at once) carries it on under the new settings. The reconciler is
//! rebuilt from the new config, the way it is built at start-up (it holds no state the store does not).
//!
//! Taken: nodesets added; a nodeset's template, zones, partition, node_conf, `dws_flex` settings, and more
//! dynamic nodes; every `[gcp]`, `[slurm]` and `[reconcile]` key.
//!
//! Refused (the running config stays, and the log and `slurm_dws_config_last_reload_ok` say why):
//! - `cluster_name`, `state_dir`, `socket`, `[daemon]`: the identity of what the daemon owns, where its
//!   database and socket are, who may talk to it. They need a restart.
//! - removing a nodeset, fewer dynamic nodes, or a different `node_count_static`: every node records
//!   whether it is static when it is first seen, and the reconciler does not re-classify nodes it
//!   already tracks, so such a change would leave nodes out of range or with the wrong role.
//! - a nodeset's `provisioning_model`: its groups in flight were made for the old model (a resize
//!   request, or VMs created by name) and are followed by what their nodeset's model says; change it
//!   with a restart once the nodeset has no request in flight.

use crate::config::Config;

/// What a reload would change, in words for the log; or why it is refused.
pub fn check(old: &Config, new: &Config) -> Result<Vec<String>, String> {
    let mut refused = Vec::new();
    if old.cluster_name != new.cluster_name {
        refused.push("cluster_name".to_string());
    }
    if old.state_dir != new.state_dir {
        refused.push("state_dir".to_string());
    }
    if old.socket != new.socket {
        refused.push("socket".to_string());
    }
    if old.daemon != new.daemon {
        refused.push("[daemon]".to_string());
    }
    let mut changes = Vec::new();
    for o in &old.nodesets {
        match new.nodeset(&o.name) {
            None => refused.push(format!("nodeset {} removed", o.name)),
            Some(n) => {
                if n.node_count_static != o.node_count_static {
                    refused.push(format!("nodeset {} node_count_static", o.name));
                }
                if n.provisioning_model != o.provisioning_model {
                    refused.push(format!("nodeset {} provisioning_model", o.name));
                }
                if n.node_count_dynamic_max < o.node_count_dynamic_max {
                    refused.push(format!("nodeset {} node_count_dynamic_max lowered", o.name));
                }
                if n != o {
                    changes.push(format!("nodeset {} changed", o.name));
                }
            }
        }
    }
    for n in &new.nodesets {
        if old.nodeset(&n.name).is_none() {
            changes.push(format!("nodeset {} added", n.name));
        }
    }
    if !refused.is_empty() {
        return Err(format!(
            "cannot change on reload: {} (the running config stays; see docs/operations.md, Reload)",
            refused.join(", ")
        ));
    }
    for (section, differs) in [
        ("[gcp]", old.gcp != new.gcp),
        ("[slurm]", old.slurm != new.slurm),
        ("[reconcile]", old.reconcile != new.reconcile),
        ("log_file", old.log_file != new.log_file),
    ] {
        if differs {
            changes.push(format!("{section} changed"));
        }
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const BASE: &str = r#"cluster_name = "hpc"
[gcp]
project = "p"
region = "us-central1"
[[nodeset]]
name = "a"
instance_template = "projects/p/global/instanceTemplates/t"
zones = ["us-central1-a"]
node_count_static = 1
node_count_dynamic_max = 4
"#;

    fn cfg(extra_top: &str, tail: &str) -> Config {
        let text = format!("{extra_top}\n{BASE}{tail}");
        Config::from_toml_str(&text, Path::new("/x/slurm-dws.toml")).unwrap_or_else(|e| panic!("{e}"))
    }

    /// (case, new config, the changes logged or a word of the refusal).
    type Case<'a> = (&'a str, Config, Result<Vec<&'a str>, &'a str>);

    #[test]
    fn reload_rules() {
        let old = cfg("", "");
        let add = "[[nodeset]]\nname = \"b\"\ninstance_template = \"projects/p/global/instanceTemplates/t2\"\nzones = [\"us-central1-b\"]\nnode_count_dynamic_max = 2\n";
        let table: &[Case] = &[
            ("same file", cfg("", ""), Ok(vec![])),
            ("nodeset added", cfg("", add), Ok(vec!["nodeset b added"])),
            (
                "more dynamic nodes",
                cfg("", "").with(|c| c.nodesets[0].node_count_dynamic_max = 8),
                Ok(vec!["nodeset a changed"]),
            ),
            (
                "run duration",
                cfg("", "").with(|c| c.nodesets[0].dws_flex.max_run_duration = 3600),
                Ok(vec!["nodeset a changed"]),
            ),
            ("reconcile", cfg("", "[reconcile]\ninterval = 5\n"), Ok(vec!["[reconcile] changed"])),
            ("state_dir", cfg("state_dir = \"/elsewhere\"", ""), Err("state_dir")),
            ("socket", cfg("socket = \"/run/x.sock\"", ""), Err("socket")),
            ("daemon", cfg("", "[daemon]\nmetrics_listen = \"127.0.0.1:9\"\n"), Err("[daemon]")),
            (
                "static count",
                cfg("", "").with(|c| c.nodesets[0].node_count_static = 2),
                Err("node_count_static"),
            ),
            (
                "fewer dynamic",
                cfg("", "").with(|c| c.nodesets[0].node_count_dynamic_max = 2),
                Err("node_count_dynamic_max lowered"),
            ),
            (
                "provisioning model",
                cfg("", "")
                    .with(|c| c.nodesets[0].provisioning_model = crate::config::ProvisioningModel::Spot),
                Err("nodeset a provisioning_model"),
            ),
            (
                "nodeset removed",
                cfg("", "").with(|c| c.nodesets[0].name = "z".into()),
                Err("nodeset a removed"),
            ),
        ];
        for (what, new, want) in table {
            let got = check(&old, new);
            match (want, &got) {
                (Ok(w), Ok(g)) => assert_eq!(g, w, "{what}"),
                (Err(w), Err(g)) => {
                    assert!(g.contains(w) && g.starts_with("cannot change on reload"), "{what}: {g}")
                }
                _ => panic!("{what}: got {got:?}, want {want:?}"),
            }
        }
    }

    trait With {
        fn with(self, f: impl FnOnce(&mut Self)) -> Self;
    }
    impl With for Config {
        fn with(mut self, f: impl FnOnce(&mut Self)) -> Self {
            f(&mut self);
            self
        }
    }
}
