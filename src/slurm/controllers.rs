//! Slurm's controllers: the `SlurmctldHost` entries and which of them `scontrol ping` finds up.
//!
//! Measured on 22.05.8 with two controllers (docs/slurm-facts.md, "Two controllers"):
//! - `scontrol show config` prints one line per entry, in slurm.conf's order, the first the primary:
//!   `SlurmctldHost[0]        = ctla(10.213.1.2)` (the name, and the address in parentheses when one
//!   is given); only a controller in charge answers it.
//! - `scontrol ping` asks every controller itself and prints one line each, in the same order:
//!   `Slurmctld(primary) at ctla is UP`, `Slurmctld(backup) at ctlb is DOWN` (`backupN` past two);
//!   exit 0 when one is up. A standby backup answers too: UP is not "in charge". A backup takes
//!   control only while the controllers before it do not answer, and a primary that starts takes
//!   control back from a backup at once, so the controller in charge is the first one UP.

/// One line of `scontrol ping`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerPing {
    /// The name of its `SlurmctldHost` entry.
    pub name: String,
    pub up: bool,
}

/// The names of the `SlurmctldHost[i] = name(addr)` lines of `scontrol show config`, in order.
pub fn parse_show_config(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let (key, value) = l.split_once('=')?;
            key.trim().starts_with("SlurmctldHost[").then(|| entry_name(value.trim()))
        })
        .filter(|n| !n.is_empty())
        .collect()
}

/// The names of the `SlurmctldHost=` lines of a slurm.conf file, in order (the key is
/// case-insensitive; a line may hold other keys after it). Used when no controller answers.
pub fn parse_slurm_conf(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .flat_map(str::split_whitespace)
        .filter_map(|word| {
            let (key, value) = word.split_once('=')?;
            key.eq_ignore_ascii_case("SlurmctldHost").then(|| entry_name(value))
        })
        .filter(|n| !n.is_empty())
        .collect()
}

/// `name(addr)` -> `name`.
fn entry_name(value: &str) -> String {
    value.split('(').next().unwrap_or("").trim().to_string()
}

/// The controllers of `scontrol ping`, in its order.
pub fn parse_ping(text: &str) -> Vec<ControllerPing> {
    text.lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("Slurmctld(")?;
            let (_, rest) = rest.split_once(") at ")?;
            let (name, state) = rest.rsplit_once(" is ")?;
            Some(ControllerPing { name: name.trim().to_string(), up: state.trim() == "UP" })
        })
        .collect()
}

/// The controller in charge: the first one up (see the module docs); `None` when none is.
pub fn in_charge(pings: &[ControllerPing]) -> Option<&str> {
    pings.iter().find(|p| p.up).map(|p| p.name.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn show_config_names_each_entry_in_order() {
        let text = "ReturnToService         = 1\nSlurmctldHost[0]        = ctla(10.213.1.2)\n\
                    SlurmctldHost[1]        = ctlb\nSlurmctldLogFile        = /x\n";
        assert_eq!(parse_show_config(text), ["ctla", "ctlb"]);
        // 26.05's capture of a one-controller cluster.
        assert_eq!(parse_show_config("SlurmctldHost[0]        = vm(localhost)\n"), ["vm"]);
        assert!(parse_show_config("SlurmctldPort = 6817\n").is_empty());
    }

    #[test]
    fn slurm_conf_entries_are_read_case_insensitively_and_comments_skipped() {
        let text = "# SlurmctldHost=old\nslurmctldhost=ctla(10.0.0.1)\nSlurmctldHost=ctlb SlurmctldPort=1\n";
        assert_eq!(parse_slurm_conf(text), ["ctla", "ctlb"]);
    }

    #[test]
    fn ping_lines_give_each_controller_and_the_first_up_is_in_charge() {
        let both = "Slurmctld(primary) at ctla is UP\nSlurmctld(backup) at ctlb is UP\n";
        let p = parse_ping(both);
        assert_eq!(p.len(), 2);
        assert_eq!(in_charge(&p), Some("ctla"), "a standby backup answers ping too");
        let primary_down = "Slurmctld(primary) at ctla is DOWN\nSlurmctld(backup) at ctlb is UP\n\
                            *****************************************\n\
                            ** RESTORE SLURMCTLD DAEMON TO SERVICE **\n\
                            *****************************************\n";
        let p = parse_ping(primary_down);
        assert_eq!(
            p,
            [
                ControllerPing { name: "ctla".into(), up: false },
                ControllerPing { name: "ctlb".into(), up: true }
            ]
        );
        assert_eq!(in_charge(&p), Some("ctlb"));
        let none = "Slurmctld(primary) at ctla is DOWN\nSlurmctld(backup2) at ctlc is DOWN\n";
        assert_eq!(in_charge(&parse_ping(none)), None);
    }
}
