//! Slurm's answers that mean "already so": per command, the error wording that says what the
//! command asks for is already in place (or moot), so the command is done, not a failure, and no
//! pass is degraded by the ordinary races (a job that ends between a pass's read and its command, a
//! node Slurm already moved, a reservation already gone).
//!
//! Measured on 22.05 and 24.11: `update jobid=J starttime=...` of a finished job answers "Job has
//! already finished for job J", of an unknown job "Invalid job id specified for job J" (so does
//! `requeue`); `state=resume` of a node that is not down or drained answers "slurm_update error:
//! Invalid node state specified"; `power_up` of an up node, `power_down_force` of a powered-down
//! one and `undrain` of a node not drained exit 0; deleting a reservation that is gone answers
//! "... Requested reservation is invalid", creating one whose name exists "Error creating the
//! reservation: Duplicate reservation name". (`requeue` of a finished batch job exits 0 and runs
//! the job again: slurm-dws never requeues a job by itself.)
//!
//! The wording is slurmctld's error strings (`slurm_strerror`). Where each was measured
//! (`tests/devcluster.rs`, `already_so_answers_are_done`, which prints every answer as
//! `[wording <slurm>]` and checks it with [`judge`]; the table test below holds the strings): 22.05
//! (the host's), 24.11 (the trixie root) and 26.05 (the forky root), by running the commands on a
//! real cluster. 26.05 answers `state=resume` of a node in service with "Invalid node state
//! transition" where 22.05 and 24.11 say "Invalid node state specified"; the rest is worded alike.

/// A command slurm-dws sends that can find its effect already in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScontrolCall {
    /// `scontrol update nodename=... state=S`, by the state as scontrol spells it.
    NodeState(&'static str),
    /// `scontrol update jobid=... starttime=...`.
    JobsBegin,
    /// `scontrol requeue ...`.
    Requeue,
    /// `scontrol create reservation reservationname=...`.
    CreateReservation,
    /// `scontrol delete reservation=...`.
    DeleteReservation,
}

/// How a failed command's answer is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    /// What it asked for is already so: done. The words say why.
    AlreadySo(&'static str),
    /// A failure: the pass reports it.
    Failed,
}

/// `ESLURM_ALREADY_DONE`.
const ALREADY_DONE: &str = "Job/step already completing or completed";
/// `ESLURM_JOB_FINISHED`.
const JOB_FINISHED: &str = "Job has already finished";
/// `ESLURM_JOB_NOT_PENDING`.
const NOT_PENDING: &str = "Job is no longer pending execution";
/// `ESLURM_INVALID_JOB_ID`: the job left slurmctld's memory (`MinJobAge`) or never was.
const INVALID_JOB: &str = "Invalid job id specified";
/// `ESLURM_INVALID_NODE_STATE`: the node is not in a state the transition starts from.
const INVALID_NODE_STATE: &str = "Invalid node state specified";
/// 26.05's answer to `state=resume` of a node in service (measured on 26.05.5: "slurm_update error:
/// Invalid node state transition"), where 22.05 and 24.11 answer [`INVALID_NODE_STATE`].
const INVALID_NODE_TRANSITION: &str = "Invalid node state transition";
/// `ESLURM_RESERVATION_INVALID`.
const RESERVATION_INVALID: &str = "Requested reservation is invalid";
/// `ESLURM_RESERVATION_NAME_DUP`.
const RESERVATION_DUP: &str = "Duplicate reservation name";

/// Judges a failed command's stderr: "already so" when its wording says so for this command.
pub fn judge(call: ScontrolCall, stderr: &str) -> Judged {
    let table: &[(&str, &'static str)] = match call {
        ScontrolCall::JobsBegin => &[
            (JOB_FINISHED, "the job has already finished: its begin time no longer matters"),
            (ALREADY_DONE, "the job has already finished: its begin time no longer matters"),
            (NOT_PENDING, "the job is no longer pending: its begin time no longer matters"),
            (INVALID_JOB, "slurmctld no longer knows the job: it ended"),
        ],
        ScontrolCall::Requeue => &[
            (JOB_FINISHED, "the job has already finished: nothing to requeue"),
            (ALREADY_DONE, "the job has already finished: nothing to requeue"),
            (INVALID_JOB, "slurmctld no longer knows the job: it ended"),
        ],
        // A node already in the state (or past it): powered up or powering up, powered down or
        // powering down, in service, not drained. `down` and `drain` never answer so.
        ScontrolCall::NodeState(
            "power_up" | "power_down_force" | "power_down_asap" | "resume" | "undrain",
        ) => &[
            (INVALID_NODE_STATE, "the node is already in that state"),
            (INVALID_NODE_TRANSITION, "the node is already in that state"),
        ],
        ScontrolCall::NodeState(_) => &[],
        // slurm-dws names a reservation after its one node: one of that name is the node's.
        ScontrolCall::CreateReservation => &[(RESERVATION_DUP, "the node's reservation exists already")],
        ScontrolCall::DeleteReservation => &[
            (RESERVATION_INVALID, "the reservation is gone already"),
            ("not found", "the reservation is gone already"),
        ],
    };
    table
        .iter()
        .find(|(words, _)| stderr.contains(words))
        .map_or(Judged::Failed, |(_, why)| Judged::AlreadySo(why))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each answer as scontrol prints it (the prefix is the command's; the error is slurmctld's), on
    /// every generation: 22.05 and 24.11 measured, 26.05 from its captures and sources.
    #[test]
    fn already_so_answers_are_judged_done_and_others_fail() {
        use ScontrolCall::*;
        let cases: &[(ScontrolCall, &str, bool)] = &[
            // Measured on 22.05 and 24.11, word for word (tests/devcluster.rs):
            (JobsBegin, "Job has already finished for job 1", true),
            (JobsBegin, "Invalid job id specified for job 999999", true),
            (Requeue, "Invalid job id specified for job 999999", true),
            (NodeState("resume"), "slurm_update error: Invalid node state specified", true),
            // Measured on 26.05.5 (tests/devcluster.rs):
            (NodeState("resume"), "slurm_update error: Invalid node state transition", true),
            (
                DeleteReservation,
                "delete_reservation reservation=slurm-dws-eol-gone: Requested reservation is invalid",
                true,
            ),
            (CreateReservation, "Error creating the reservation: Duplicate reservation name", true),
            // Inferred (the same strings, other commands' prefixes; 26.05's sources):
            (JobsBegin, "Job has already finished", true),
            (JobsBegin, "slurm_update error: Job has already finished", true),
            (JobsBegin, "Job is no longer pending execution for job 3", true),
            (JobsBegin, "slurm_update error: Invalid job id specified", true),
            (JobsBegin, "slurm_update error: Job/step already completing or completed", true),
            (JobsBegin, "slurm_update error: Access/permission denied", false),
            (JobsBegin, "slurm_update error: Unable to contact slurm controller (connect failure)", false),
            (Requeue, "Requeue of JobId=3 returned an error: Job has already finished", true),
            (Requeue, "Requeue of JobId=3 returned an error: Job/step already completing or completed", true),
            (Requeue, "Requeue of JobId=999999 returned an error: Invalid job id specified", true),
            (
                Requeue,
                "Requeue of JobId=3 returned an error: Only batch jobs are accepted or processed",
                false,
            ),
            (Requeue, "Requeue of JobId=3 returned an error: Job is no longer pending execution", false),
            (NodeState("power_up"), "slurm_update error: Invalid node state specified", true),
            (NodeState("power_down_force"), "slurm_update error: Invalid node state specified", true),
            (NodeState("power_down_asap"), "slurm_update error: Invalid node state specified", true),
            (NodeState("resume"), "slurm_update error: Invalid node state specified", true),
            // Measured on 26.05.5 (tests/devcluster.rs):
            (NodeState("resume"), "slurm_update error: Invalid node state transition", true),
            (NodeState("undrain"), "slurm_update error: Invalid node state specified", true),
            (NodeState("down"), "slurm_update error: Invalid node state specified", false),
            (NodeState("drain"), "slurm_update error: Invalid node state specified", false),
            (NodeState("resume"), "slurm_update error: Invalid node name specified", false),
            (CreateReservation, "Error creating the reservation: Duplicate reservation name", true),
            (CreateReservation, "Error creating the reservation: Requested nodes are busy", false),
            (DeleteReservation, "Error deleting reservation: Requested reservation is invalid", true),
            (DeleteReservation, "delete_reservation error: Requested reservation is invalid", true),
            (DeleteReservation, "Error deleting reservation: Access/permission denied", false),
        ];
        for (call, stderr, already) in cases {
            let judged = judge(*call, stderr);
            assert_eq!(matches!(judged, Judged::AlreadySo(_)), *already, "{call:?} {stderr:?}: {judged:?}");
        }
    }
}
