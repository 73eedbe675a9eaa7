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
        if let Some(reserved) = &ns.reservation {
            let found =
                rt.block_on(reservation_problems(&client, ns, &reserved.source, &mt)).map_err(|e| {
                    CliError::runtime(format!(
                        "check-config --online: reading {} of nodeset {}: {e}",
                        reserved.source.url(),
                        ns.name
                    ))
                })?;
            lines.extend(found);
        }
        for (field, message) in
            gce::placement_rules::placement_problems(&mt, ns.provisioning_model, ns.placement.as_ref())
        {
            lines.push(format!("nodeset {}: {field} {message}", ns.name));
        }
    }
    Ok(lines)
}

/// A reservation nodeset's reservation as GCE has it: it exists (a calendar booking: the future
/// reservation exists and is not failed or cancelled; the reservation it delivers is checked once
/// delivered), it is for the template's machine type, its zone is the nodeset's (the config
/// checks that), and it holds as many VMs as the nodeset has nodes — more nodes than the
/// reservation holds could never all be provisioned. Each problem names nodeset, field and value.
async fn reservation_problems(
    client: &gce::Client,
    ns: &crate::config::Nodeset,
    source: &crate::config::ReservationSource,
    template_machine_type: &str,
) -> Result<Vec<String>, gce::GceError> {
    use crate::config::ReservationSource;
    let key = match source {
        ReservationSource::Reservation(_) => "reservation.name",
        ReservationSource::Future(_) => "reservation.future_reservation",
    };
    let bad = |why: String| format!("nodeset {}: {key} {}: {why}", ns.name, source.url());
    let nodes = ns.node_count();
    let (machine_type, count, what) = match source {
        ReservationSource::Reservation(r) => {
            let res = match client.get_reservation(&r.project, &r.zone, &r.name).await {
                Ok(x) => x,
                Err(e) if e.is_not_found() => {
                    return Ok(vec![bad("GCE has no such reservation (404)".into())])
                }
                Err(e) => return Err(e),
            };
            let mut problems = Vec::new();
            if res.status != "READY" {
                problems.push(bad(format!("the reservation is {}, not READY", or_unset(&res.status))));
            }
            let specific = res.specific_reservation.unwrap_or_default();
            let mt = specific.instance_properties.map(|p| p.machine_type).unwrap_or_default();
            let count = match (&r.block, &r.sub_block) {
                (None, _) => specific.count,
                (Some(b), sub) => {
                    let read = match sub {
                        Some(s) => client.get_reservation_sub_block(&r.project, &r.zone, &r.name, b, s).await,
                        None => client.get_reservation_block(&r.project, &r.zone, &r.name, b).await,
                    };
                    match read {
                        Ok(block) => block.count,
                        Err(e) if e.is_not_found() => {
                            problems.push(bad("GCE has no such block or sub-block (404)".into()));
                            return Ok(problems);
                        }
                        Err(e) => return Err(e),
                    }
                }
            };
            if let Some(p) = fits(&bad, &mt, template_machine_type, count, nodes, "the reservation") {
                problems.extend(p);
            }
            return Ok(problems);
        }
        ReservationSource::Future(f) => {
            let booking = match client.get_future_reservation(&f.project, &f.zone, &f.name).await {
                Ok(x) => x,
                Err(e) if e.is_not_found() => {
                    return Ok(vec![bad("GCE has no such future reservation (404)".into())])
                }
                Err(e) => return Err(e),
            };
            let status = booking.status.clone().unwrap_or_default().procurement_status;
            if matches!(status.as_str(), "FAILED" | "CANCELLED" | "DECLINED") {
                return Ok(vec![bad(format!("the booking is {status}"))]);
            }
            let sku = booking.specific_sku_properties.unwrap_or_default();
            let mt = sku.instance_properties.map(|p| p.machine_type).unwrap_or_default();
            (mt, sku.total_count, "the booking")
        }
    };
    Ok(fits(&bad, &machine_type, template_machine_type, count, nodes, what).unwrap_or_default())
}

/// The machine type and count problems of a reservation (or booking) for a nodeset of `nodes`.
fn fits(
    bad: &dyn Fn(String) -> String,
    machine_type: &str,
    template_machine_type: &str,
    count: i64,
    nodes: u32,
    what: &str,
) -> Option<Vec<String>> {
    let mut problems = Vec::new();
    let template_mt = gce::last_segment(template_machine_type);
    if !machine_type.is_empty() && !template_mt.is_empty() && gce::last_segment(machine_type) != template_mt {
        problems.push(bad(format!(
            "{what} is for machine type {machine_type}, the instance template's is {template_mt}: its VMs could not consume it"
        )));
    }
    if i64::from(nodes) > count {
        problems.push(bad(format!(
            "{what} holds {count} VMs, the nodeset has {nodes} nodes (node_count_static + node_count_dynamic_max): \
             more than it could ever provision; at most {count}"
        )));
    }
    (!problems.is_empty()).then_some(problems)
}

fn or_unset(s: &str) -> &str {
    if s.is_empty() {
        "unset"
    } else {
        s
    }
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
