//! Each nodeset's instance template, read once a run and judged against the nodeset's provisioning
//! model (`gce::check_template`): a template that cannot work refuses its nodeset, visibly, until
//! the config names one that does. With it, the nodeset's machine type and GPUs
//! (`gce::read_node_shape`) for the usage spans: a read that fails leaves them `unknown` / 0, with
//! a warning, and never holds the nodeset back.

use crate::config::Config;
use crate::gce;
use crate::model::EventKind;
use crate::reconcile::plan::NodesetShape;
use crate::reconcile::types::NewEvent;
use std::collections::BTreeMap;

/// The judgement of each nodeset's template this run (start-up, and again after a reload, which
/// builds a new `Reconciler`): `None` when it fits, else why the nodeset is refused. A nodeset
/// missing here was not read yet (or GCE did not answer): the next pass reads it.
#[derive(Debug, Default)]
pub struct Templates {
    judged: BTreeMap<String, Option<String>>,
    /// Each nodeset's machine type and GPUs, read with its template.
    shapes: BTreeMap<String, NodesetShape>,
}

impl Templates {
    /// Each nodeset's machine type and GPUs, as read this run (a nodeset missing: not read yet).
    pub fn shapes(&self) -> &BTreeMap<String, NodesetShape> {
        &self.shapes
    }

    /// The refused nodesets and why.
    pub fn refused(&self) -> BTreeMap<String, String> {
        self.judged.iter().filter_map(|(ns, why)| Some((ns.clone(), why.clone()?))).collect()
    }

    /// Reads the template of each nodeset not read yet this run, all at once: a template that does
    /// not answer delays the pass by one client deadline at most. A refusal is logged and returned
    /// as a `nodeset_refused` event once; a template GCE did not answer for is an error of this
    /// pass and is read again next pass.
    pub async fn check(
        &mut self,
        client: &gce::Client,
        cfg: &Config,
        errors: &mut Vec<String>,
    ) -> Vec<NewEvent> {
        let mut reads = tokio::task::JoinSet::new();
        for n in cfg.nodesets.iter().filter(|n| !self.judged.contains_key(&n.name)) {
            let (gce, ns, template) = (client.clone(), n.name.clone(), n.instance_template.clone());
            let model = n.provisioning_model;
            let consumes = n.consumes().cloned();
            let zone = n.zones.first().cloned().unwrap_or_default();
            let shape_wanted = !self.shapes.contains_key(&n.name);
            reads.spawn(async move {
                let checked = gce::check_template(&gce, &template, model, consumes.as_ref()).await;
                let shape = if shape_wanted {
                    Some(gce::read_node_shape(&gce, &template, &zone).await)
                } else {
                    None
                };
                (ns, template, checked, shape)
            });
        }
        let mut checked = Vec::new();
        while let Some(joined) = reads.join_next().await {
            match joined {
                Ok(c) => checked.push(c),
                Err(e) => errors.push(format!("reading an instance template: {e}")),
            }
        }
        checked.sort_by(|a, b| a.0.cmp(&b.0));
        let mut events = Vec::new();
        for (ns, template, result, shape) in checked {
            match shape {
                Some(Ok(s)) => {
                    self.shapes
                        .insert(ns.clone(), NodesetShape { machine_type: s.machine_type, gpus: s.gpus });
                }
                Some(Err(e)) => {
                    tracing::warn!(nodeset = %ns, %template, error = %e, "could not read the nodeset's machine type and GPUs: its usage is recorded with machine type \"unknown\" and 0 GPUs this run");
                    self.shapes.insert(ns.clone(), NodesetShape::unknown());
                }
                None => {}
            }
            match result {
                Ok(problems) if problems.is_empty() => {
                    tracing::info!(nodeset = %ns, %template, "instance template fits the nodeset's provisioning model");
                    self.judged.insert(ns, None);
                }
                Ok(problems) => {
                    let list: Vec<String> = problems.iter().map(ToString::to_string).collect();
                    let why = format!("instance template {template}: {}", list.join("; "));
                    tracing::error!(
                        nodeset = %ns,
                        reason = %why,
                        "nodeset refused: its instance template cannot work for its provisioning model; its nodes get no VM until the config names one that does (then reload)"
                    );
                    events.push(NewEvent {
                        kind: EventKind::NodesetRefused,
                        nodes: vec![],
                        message: format!(
                            "nodeset {ns} refused: {why}; its nodes get no VM until it is fixed"
                        ),
                    });
                    self.judged.insert(ns, Some(why));
                }
                Err(e) => {
                    errors.push(format!("reading the instance template {template} of nodeset {ns}: {e}"))
                }
            }
        }
        events
    }
}
