//! `check-config --online`: reads each nodeset's instance template from GCE (read-only:
//! `instanceTemplates.get` / `regionInstanceTemplates.get`) and says which cannot work for its
//! provisioning model (DWS Flex Start, spot, standard) — the same check the daemon makes at start and
//! reload (`gce::check_template`). With
//! `--print-slurm-conf` it also reads each template's machine type (`machineTypes.get`) for the
//! NodeName lines' CPUs, RealMemory, Gres and Features.

use std::collections::BTreeMap;

use super::CliError;
use crate::config::Config;
use crate::gce;

/// One line per problem, `nodeset N: instance template T: FIELD is X, DWS Flex Start needs Y` (or
/// `a spot nodeset needs Y`, `a standard nodeset needs Y`);
/// empty when every template fits. A template GCE did not answer for is a run-time error (exit 1):
/// nothing can be said about it.
pub fn template_problems(config: &Config) -> Result<Vec<String>, CliError> {
    let (client, rt) = client_and_runtime(config)?;
    let mut lines = Vec::new();
    for ns in &config.nodesets {
        let t = &ns.instance_template;
        let problems = rt
            .block_on(gce::check_template(&client, t, ns.provisioning_model, ns.consumes()))
            .map_err(|e| {
                CliError::runtime(format!(
                    "check-config --online: reading the instance template {t} of nodeset {}: {e}",
                    ns.name
                ))
            })?;
        lines.extend(problems.iter().map(|p| format!("nodeset {}: instance template {t}: {p}", ns.name)));
        // A template GCE could not give is one of the problems above already.
        let Ok(template) = rt.block_on(client.get_instance_template_ref(t)) else { continue };
        // Its region: a regional template, or a subnetwork, of another region cannot work there.
        let wrong = gce::template_region_problems(&template, &ns.region);
        lines.extend(wrong.iter().map(|p| format!("nodeset {}: instance template {t}: {p}", ns.name)));
        // What GCE would refuse of the nodeset's placement for this machine family and model.
        let mt = template.properties.as_ref().map(|p| p.machine_type.clone()).unwrap_or_default();
        for (field, message) in
            gce::placement_rules::placement_problems(&mt, ns.provisioning_model, ns.placement.as_ref())
        {
            lines.push(format!("nodeset {}: {field} {message}", ns.name));
        }
    }
    Ok(lines)
}

/// `--online --print-slurm-conf`: for each nodeset, by name, the NodeName keys its instance template
/// and machine type imply (CPUs, RealMemory, Gres, Features; `gce::node_shape`). The machine type
/// is read in the nodeset's first zone. A template or machine type GCE cannot read is a run-time
/// error (exit 1) naming the nodeset and what failed: the lines would otherwise be wrong.
pub fn node_shapes(config: &Config) -> Result<BTreeMap<String, Vec<(String, String)>>, CliError> {
    let (client, rt) = client_and_runtime(config)?;
    let mut shapes = BTreeMap::new();
    for ns in &config.nodesets {
        let t = &ns.instance_template;
        let Some(zone) = ns.zones.first() else { continue };
        let shape = rt.block_on(gce::read_node_shape(&client, t, zone)).map_err(|e| {
            CliError::runtime(format!(
                "check-config --online: nodeset {}: instance template {t}: {e}",
                ns.name
            ))
        })?;
        shapes.insert(ns.name.clone(), shape.slurm_keys());
    }
    Ok(shapes)
}

/// The GCE client of `config` and a runtime to drive its calls from this synchronous command.
fn client_and_runtime(config: &Config) -> Result<(gce::Client, tokio::runtime::Runtime), CliError> {
    let client = crate::reconcile::gce_edge::client(config)
        .map_err(|e| CliError::runtime(format!("check-config --online: cannot reach GCE: {e}")))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::runtime(format!("cannot start the async runtime: {e}")))?;
    Ok((client, rt))
}
