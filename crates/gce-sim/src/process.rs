//! Boot and stop commands: how a simulated VM becomes something real (e.g. a local `slurmd`).

use std::process::Stdio;

/// Runs `template` with `{name}` replaced by the VM name, through `sh -c`, fully detached: its own
/// session, stdio on /dev/null, an empty signal mask and default signal dispositions (the simulator's
/// own handlers and ignored signals must not leak into a daemon the command may start). The child is
/// reaped in the background; its exit status is only logged.
pub fn spawn_detached(template: &str, vm: &str) {
    let command = template.replace("{name}", vm);
    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.arg("-c").arg(&command).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe calls
    // (setsid, sigprocmask, signal).
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid().map_err(std::io::Error::from)?;
            let empty = nix::sys::signal::SigSet::empty();
            nix::sys::signal::sigprocmask(nix::sys::signal::SigmaskHow::SIG_SETMASK, Some(&empty), None)
                .map_err(std::io::Error::from)?;
            for sig in 1..32 {
                if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                    libc::signal(sig, libc::SIG_DFL);
                }
            }
            Ok(())
        });
    }
    match cmd.spawn() {
        Ok(mut child) => {
            let command = command.clone();
            tokio::spawn(async move {
                match child.wait().await {
                    Ok(status) if status.success() => tracing::debug!(%command, "command finished"),
                    Ok(status) => tracing::warn!(%command, %status, "command failed"),
                    Err(e) => tracing::warn!(%command, error = %e, "waiting for command failed"),
                }
            });
        }
        Err(e) => tracing::warn!(%command, error = %e, "could not start command"),
    }
}
