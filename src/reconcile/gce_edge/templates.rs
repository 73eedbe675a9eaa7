//! Each nodeset's instance template, read once a run and judged against the nodeset's provisioning
//! model (`gce::check_template`): a template that cannot work refuses its nodeset, visibly, until
//! the config names one that does.

use crate::config::Config;
use crate::gce;
use crate::model::EventKind;
use crate::reconcile::types::NewEvent;
use std::collections::BTreeMap;

/// The judgement of each nodeset's template this run (start-up, and again after a reload, which
/// builds a new `Reconciler`): `None` when it fits, else why the nodeset is refused. A nodeset
/// missing here was not read yet (or GCE did not answer): the next pass reads it.
#[derive(Debug, Default)]
pub struct Templates {
    judged: BTreeMap<String, Option<String>>,
}

impl Templates {
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
            reads.spawn(async move {
                let checked = gce::check_template(&gce, &template, model, consumes.as_ref()).await;
                (ns, template, checked)
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
        for (ns, template, result) in checked {
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
