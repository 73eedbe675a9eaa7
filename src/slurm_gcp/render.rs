//! The slurm-dws TOML written from what the import kept, with what it could not keep said in comments.

use std::fmt::Write as _;
use std::path::Path;

use super::{Cluster, ImportedPlacement};

/// A TOML basic string.
fn quoted(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// `text` as `# ` comment lines of at most ~100 columns.
fn comment(out: &mut String, text: &str) {
    let mut line = String::from("#");
    for word in text.split_whitespace() {
        if line.len() + 1 + word.len() > 100 && line.len() > 1 {
            out.push_str(&line);
            out.push('\n');
            line = String::from("#  ");
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
}

pub(super) fn render(c: &Cluster, origin: &Path) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# slurm-dws configuration imported from slurm-gcp's {}", origin.display());
    let _ = writeln!(
        out,
        "# by `slurm-dws import-slurm-gcp` {}. Check it with `slurm-dws check-config`, then",
        env!("CARGO_PKG_VERSION")
    );
    out.push_str("# follow docs/migrating-from-slurm-gcp.md. Every key: docs/configuration.md.\n");
    if c.notes.is_empty() {
        out.push_str("#\n# Everything in it was carried over.\n");
    } else {
        out.push_str("#\n# Not carried over (slurm-dws does not do these, or they live in slurm.conf):\n");
        for note in &c.notes {
            comment(&mut out, &format!("- {note}"));
        }
    }
    out.push('\n');
    out.push_str("# slurm_cluster_name: node names stay {cluster_name}-{nodeset}-{index}.\n");
    let _ = writeln!(out, "cluster_name = {}\n", quoted(&c.cluster_name));
    out.push_str("[gcp]\n");
    let _ = writeln!(out, "project = {}", quoted(&c.project));
    let _ = writeln!(out, "region = {}", quoted(&c.region));
    if c.credentials == "auto" {
        out.push_str(
            "# The controller's service account (or GOOGLE_APPLICATION_CREDENTIALS), as slurm-gcp.\n",
        );
    } else {
        out.push_str("# google_app_cred_path: must be readable by the service user (check-config says).\n");
    }
    let _ = writeln!(out, "credentials = {}\n", quoted(&c.credentials));
    out.push_str("[slurm]\n");
    out.push_str(
        "# slurm_bin_dir: where scontrol, squeue and sinfo are (slurm-gcp images: /usr/local/bin).\n",
    );
    let _ = writeln!(out, "bin_dir = {}", quoted(&c.bin_dir));
    if let Some(conf) = &c.conf {
        out.push_str("# Where slurm-gcp images keep slurm.conf.\n");
        let _ = writeln!(out, "conf = {}", quoted(conf));
    }
    for n in &c.nodesets {
        out.push('\n');
        let _ = writeln!(out, "# slurm-gcp nodeset {}.", n.name);
        for note in &n.notes {
            comment(&mut out, note);
        }
        out.push_str("[[nodeset]]\n");
        let _ = writeln!(out, "name = {}", quoted(&n.name));
        let _ = writeln!(out, "instance_template = {}", quoted(&n.instance_template));
        out.push_str("# zone_policy_allow\n");
        let zones: Vec<String> = n.zones.iter().map(|z| quoted(z)).collect();
        let _ = writeln!(out, "zones = [{}]", zones.join(", "));
        let _ = writeln!(out, "node_count_static = {}", n.node_count_static);
        let _ = writeln!(out, "node_count_dynamic_max = {}", n.node_count_dynamic_max);
        if let Some(p) = &n.partition {
            let _ = writeln!(out, "partition = {}", quoted(p));
        }
        if !n.node_conf.is_empty() {
            let _ = writeln!(out, "node_conf = {}", quoted(&n.node_conf));
        }
        if let Some((key, url)) = &n.reservation {
            out.push_str("provisioning_model = \"reservation\"\n");
            out.push_str("\n# reservation_name / future_reservation\n[nodeset.reservation]\n");
            let _ = writeln!(out, "{key} = {}", quoted(url));
            continue;
        }
        out.push_str("\n[nodeset.dws_flex]\n");
        out.push_str("enabled = true\n");
        let _ = writeln!(out, "max_run_duration = {}", n.max_run_duration);
        out.push_str("# Carried over as set: slurm-gcp's default is false, slurm-dws's is true.\n");
        let _ = writeln!(out, "use_job_duration = {}", n.use_job_duration);
        if n.use_job_duration {
            out.push_str(
                "# slurm-gcp gave a job its TimeLimit; slurm-dws adds boot_allowance (default 600 s)\n",
            );
            out.push_str("# for the time the VM takes to boot before the job starts.\n");
        }
        match &n.placement {
            None => {}
            Some(p) => {
                out.push_str("\n# enable_placement / placement_max_distance / accelerator_topology\n");
                out.push_str("[nodeset.placement]\n");
                match p {
                    ImportedPlacement::Distance(d) => {
                        let _ = writeln!(out, "max_topology_distance = {}", quoted(d.as_str()));
                    }
                    ImportedPlacement::AcceleratorTopology(a) => {
                        let _ = writeln!(out, "accelerator_topology = {}", quoted(a));
                    }
                }
            }
        }
    }
    out
}
