//! Two controllers: which daemon acts. Only the one beside the controller Slurm has in charge does.
//!
//! slurm-dws runs beside every slurmctld of slurm.conf's `SlurmctldHost` entries. With one entry
//! nothing here runs (no call is added to a pass). With several, before each pass the daemon asks
//! `scontrol ping` (`slurm::controllers`): the first controller up is the one in charge. The daemon
//! whose `daemon.controller` it is acts; every other is standby (no pass: no GCE call, no Slurm
//! update) and says so in `status` and the metrics. When no controller answers, nobody acts.
//! When this daemon becomes the one in charge after another's (a takeover, or the primary back),
//! it first takes the newest state of `daemon.shared_state_dir` (`shared_state.rs`).

use crate::config::Config;
use crate::protocol::ControllerRole;
use crate::slurm::controllers::{self, ControllerPing};
use crate::slurm::sacct;
use crate::slurm::Slurm;
use std::path::PathBuf;
use std::time::Duration;

/// The two-controller setup of one daemon, when slurm.conf has several `SlurmctldHost` entries.
#[derive(Debug, Clone)]
pub struct Controllers {
    /// This daemon's controller (`daemon.controller`, or the short host name).
    pub this: String,
    /// slurm.conf's `SlurmctldHost` names, in order.
    pub hosts: Vec<String>,
}

/// Whether the daemon acts this pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    InCharge,
    Standby,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::InCharge => "in_charge",
            Role::Standby => "standby",
        }
    }
}

/// The role of `this` given `scontrol ping`'s lines, and the controller in charge.
pub fn decide(this: &str, pings: &[ControllerPing]) -> (Role, Option<String>) {
    let in_charge = controllers::in_charge(pings).map(String::from);
    let role = if in_charge.as_deref() == Some(this) { Role::InCharge } else { Role::Standby };
    (role, in_charge)
}

impl Controllers {
    /// Asks Slurm (`scontrol ping`) who is in charge now. A ping that fails is "nobody": standby.
    pub async fn ask(&self, slurm: &Slurm) -> (Role, ControllerRole) {
        let (role, in_charge) = match slurm.ping_controllers().await {
            Ok(pings) => decide(&self.this, &pings),
            Err(error) => {
                tracing::warn!(%error, "cannot ask Slurm which controller is in charge: standing by");
                (Role::Standby, None)
            }
        };
        #[allow(clippy::disallowed_methods)] // an edge: when the role was asked, for status
        let now = chrono::Utc::now();
        let report = ControllerRole {
            role: role.as_str().to_string(),
            controller: self.this.clone(),
            in_charge,
            asked_at: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        };
        (role, report)
    }
}

/// What the daemon reads of slurm.conf, once at start: the `SlurmctldHost` names and whether
/// `AccountingStorageType` is slurmdbd (then the usage spans of jobs that ended while the daemon
/// was down end at `sacct`'s end: `plan/usage.rs`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlurmConfFacts {
    pub hosts: Vec<String>,
    pub slurmdbd: bool,
}

/// The `SlurmctldHost` names: as `scontrol show config` reports them, or, when no controller
/// answers it, from the slurm.conf file (`slurm.conf`, `$SLURM_CONF`, `/etc/slurm/slurm.conf`).
pub async fn controller_hosts(cfg: &Config) -> Result<Vec<String>, String> {
    slurm_conf_facts(cfg).await.map(|f| f.hosts)
}

/// [`SlurmConfFacts`] from `scontrol show config`, or, when no controller answers it (or it names
/// no `SlurmctldHost`), from the slurm.conf file as [`controller_hosts`] says.
pub async fn slurm_conf_facts(cfg: &Config) -> Result<SlurmConfFacts, String> {
    let file = cfg
        .slurm
        .conf
        .clone()
        .or_else(|| std::env::var_os("SLURM_CONF").filter(|v| !v.is_empty()).map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/etc/slurm/slurm.conf"));
    // Without its slurm.conf, Slurm's commands retry for a minute: not asked then.
    let asked = if file.exists() {
        let timeout = Duration::from_secs(cfg.slurm.command_timeout.clamp(1, 10));
        let slurm = Slurm::new(cfg.slurm.bin_dir.clone(), cfg.slurm.conf.clone(), timeout);
        match slurm.show_config().await {
            Ok(text) => {
                let hosts = controllers::parse_show_config(&text);
                if !hosts.is_empty() {
                    return Ok(SlurmConfFacts { hosts, slurmdbd: sacct::uses_slurmdbd(&text) });
                }
                "`scontrol show config` names no SlurmctldHost".to_string()
            }
            Err(e) => e.to_string(),
        }
    } else {
        "no slurm.conf".to_string()
    };
    match std::fs::read_to_string(&file) {
        Ok(text) => Ok(SlurmConfFacts {
            hosts: controllers::parse_slurm_conf(&text),
            slurmdbd: sacct::uses_slurmdbd(&text),
        }),
        Err(e) => Err(format!("{asked}; and reading {}: {e}", file.display())),
    }
}

/// The problems of the two-controller keys, as (key, message): a `daemon.controller` that is not
/// among `hosts` (when it was set, or when there are several; not judged when `hosts` could not be
/// read), a `shared_state_dir` that is not a
/// directory this process can list and write.
pub fn problems(cfg: &Config, hosts: &[String]) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let this = cfg.daemon.controller_name();
    let judged = !hosts.is_empty() && (cfg.daemon.controller.is_some() || hosts.len() > 1);
    if judged && !hosts.contains(&this) {
        let how = if cfg.daemon.controller.is_some() { "" } else { " (the short host name)" };
        out.push((
            "daemon.controller",
            format!(
                "{this:?}{how} is not among slurm.conf's SlurmctldHost entries ({}): set it to this host's entry",
                hosts.join(", ")
            ),
        ));
    }
    if let Some(dir) = &cfg.daemon.shared_state_dir {
        if let Err(why) = super::shared_state::check_dir(dir) {
            out.push(("daemon.shared_state_dir", format!("{}: {why}", dir.display())));
        }
    }
    out
}

/// At start: the two-controller setup (`None` with one `SlurmctldHost`) and what else slurm.conf
/// says ([`SlurmConfFacts`], read in the same call), or the first problem of the keys (the daemon
/// then exits 2). A slurm.conf that cannot be read at all is one controller, as before this
/// existed, without slurmdbd, with a warning.
pub async fn setup(cfg: &Config) -> Result<(Option<Controllers>, SlurmConfFacts), String> {
    let facts = match slurm_conf_facts(cfg).await {
        Ok(f) => f,
        Err(why) => {
            tracing::warn!(%why, "cannot read slurm.conf's SlurmctldHost entries: acting as the only controller");
            SlurmConfFacts::default()
        }
    };
    let hosts = facts.hosts.clone();
    if let Some((key, message)) = problems(cfg, &hosts).into_iter().next() {
        return Err(format!("{}: {key}: {message}", cfg.source.display()));
    }
    if hosts.len() < 2 {
        return Ok((None, facts));
    }
    let this = cfg.daemon.controller_name();
    tracing::info!(controller = %this, controllers = %hosts.join(","), "several controllers: acting only while ours is in charge");
    Ok((Some(Controllers { this, hosts }), facts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ping(name: &str, up: bool) -> ControllerPing {
        ControllerPing { name: name.into(), up }
    }

    #[test]
    fn only_the_daemon_beside_the_first_controller_up_acts() {
        let both = [ping("ctla", true), ping("ctlb", true)];
        assert_eq!(decide("ctla", &both), (Role::InCharge, Some("ctla".into())));
        assert_eq!(decide("ctlb", &both), (Role::Standby, Some("ctla".into())));
        let taken_over = [ping("ctla", false), ping("ctlb", true)];
        assert_eq!(decide("ctlb", &taken_over).0, Role::InCharge);
        assert_eq!(decide("ctla", &taken_over).0, Role::Standby);
        let none = [ping("ctla", false), ping("ctlb", false)];
        assert_eq!(decide("ctla", &none), (Role::Standby, None), "nobody acts when Slurm cannot say");
        assert_eq!(decide("ctlb", &none), (Role::Standby, None));
        // A name that only starts like the one in charge is not it.
        assert_eq!(decide("ctl", &both).0, Role::Standby);
    }
}
