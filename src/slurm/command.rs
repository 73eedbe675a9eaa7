//! Running one Slurm command: no shell, a fixed environment, a hard time limit.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

use tokio::io::AsyncReadExt;
use tokio::process::Command;

use super::{ParseError, SlurmError};

/// Nanoseconds Slurm's commands took, in this process, from their start to their first byte of output
/// (slurmctld's answer time: a client command prints once the controller has answered).
static ANSWER_NANOS: AtomicU64 = AtomicU64::new(0);

/// The time Slurm's commands have taken to start answering in this process, in all (see
/// [`ANSWER_NANOS`]); a pass reports its difference.
pub(crate) fn answer_time() -> Duration {
    Duration::from_nanos(ANSWER_NANOS.load(Ordering::Relaxed))
}

fn answered(started: Instant) {
    ANSWER_NANOS.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
}

/// What a finished command printed.
pub(crate) struct Output {
    pub stdout: Vec<u8>,
    pub stderr: String,
    pub success: bool,
    pub status: String,
}

/// `path args...` with the fixed environment, stdout and stderr piped, killed if dropped.
fn command(path: &Path, conf: Option<&Path>, args: &[String]) -> Command {
    let mut cmd = Command::new(path);
    cmd.args(args)
        .env("TZ", "UTC")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(conf) = conf {
        cmd.env("SLURM_CONF", conf);
    }
    cmd
}

/// Runs `bin_dir/program args...` with `SLURM_CONF` (when given), `TZ=UTC` (scontrol prints and
/// parses times in local time; UTC makes them unambiguous) and `LC_ALL=C`. The child is killed
/// and reaped when `timeout` passes, so a hung slurmctld never hangs the caller.
pub(crate) async fn run(
    bin_dir: &Path,
    conf: Option<&Path>,
    timeout: Duration,
    program: &str,
    args: &[String],
) -> Result<Output, SlurmError> {
    let path: PathBuf = bin_dir.join(program);
    let display = display_command(program, args);
    let started = Instant::now();
    let mut child = command(&path, conf, args)
        .spawn()
        .map_err(|source| SlurmError::Spawn { program: path.clone(), source })?;
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let mut stderr = child.stderr.take().expect("stderr is piped");

    let finished = tokio::time::timeout(timeout, async {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let read_out = async {
            let first = stdout.read_buf(&mut out).await;
            answered(started);
            first?;
            stdout.read_to_end(&mut out).await
        };
        let (o, e, status) = tokio::join!(read_out, stderr.read_to_end(&mut err), child.wait());
        o.and(e).and(status).map(|status| (out, err, status))
    })
    .await;

    match finished {
        Err(_elapsed) => {
            // kill() sends SIGKILL and reaps, so no zombie is left behind.
            let _ = child.kill().await;
            Err(SlurmError::Timeout { command: display, timeout })
        }
        Ok(Err(source)) => Err(SlurmError::Io { command: display, source }),
        Ok(Ok((stdout, stderr, status))) => Ok(Output {
            stdout,
            stderr: String::from_utf8_lossy(&stderr).trim().to_string(),
            success: status.success(),
            status: status.to_string(),
        }),
    }
}

/// The pipe a streamed command writes into, and the decoder's reads from it: 12 MB at 10,000 nodes
/// go through 64 KiB (Linux's default pipe) a wake-up at a time otherwise, each a context switch or
/// two of the daemon's CPU per pass (`make bench`, whole pass).
const PIPE_SIZE: i32 = 1 << 20;
const READ_BUFFER: usize = 64 * 1024;

/// `out` as a plain blocking file for the decoder's thread (tokio hands it over deregistered and
/// blocking: each read is one `read(2)`, not a hop through the runtime's reactor), its pipe
/// enlarged to [`PIPE_SIZE`] when the kernel allows (`/proc/sys/fs/pipe-max-size`; best effort).
fn blocking_pipe(out: tokio::process::ChildStdout) -> std::io::Result<std::fs::File> {
    let fd = out.into_owned_fd()?;
    let _ = nix::fcntl::fcntl(
        std::os::fd::AsRawFd::as_raw_fd(&fd),
        nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_SIZE),
    );
    Ok(std::fs::File::from(fd))
}

/// Runs the command and decodes its stdout with `parse` as it arrives, on a blocking thread: the
/// output is never held whole (a 10,000-node `sinfo --json` is 12 MB, which held whole would be most of
/// the daemon's peak memory). Same environment and time limit as [`run`]; a non-zero exit is
/// [`SlurmError::Failed`] with stderr whatever `parse` made of the output.
pub(crate) async fn run_streamed<T, F>(
    bin_dir: &Path,
    conf: Option<&Path>,
    timeout: Duration,
    program: &str,
    args: &[String],
    parse: F,
) -> Result<T, SlurmError>
where
    T: Send + 'static,
    F: FnOnce(&mut dyn std::io::BufRead) -> Result<T, ParseError> + Send + 'static,
{
    let path: PathBuf = bin_dir.join(program);
    let display = display_command(program, args);
    let started = Instant::now();
    let mut child = command(&path, conf, args)
        .spawn()
        .map_err(|source| SlurmError::Spawn { program: path.clone(), source })?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let stdout =
        blocking_pipe(stdout).map_err(|source| SlurmError::Io { command: display.clone(), source })?;
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let decoder = tokio::task::spawn_blocking(move || {
        let mut reader = std::io::BufReader::with_capacity(READ_BUFFER, stdout);
        // The first byte: slurmctld has answered; what follows is our reading and decoding.
        let _ = std::io::BufRead::fill_buf(&mut reader);
        answered(started);
        let parsed = parse(&mut reader);
        // Whatever the parser left is read and dropped, so the child never blocks on a full pipe.
        let drained = std::io::copy(&mut reader, &mut std::io::sink());
        (parsed, drained)
    });
    let finished = tokio::time::timeout(timeout, async {
        let mut err = Vec::new();
        let (e, status, decoded) = tokio::join!(stderr.read_to_end(&mut err), child.wait(), decoder);
        (e.and(status).map(|status| (err, status)), decoded)
    })
    .await;
    match finished {
        Err(_elapsed) => {
            // SIGKILL and reap; the closed pipe ends the decoder too.
            let _ = child.kill().await;
            Err(SlurmError::Timeout { command: display, timeout })
        }
        Ok((Err(source), _)) => Err(SlurmError::Io { command: display, source }),
        Ok((Ok((err, status)), decoded)) => {
            let out = Output {
                stdout: Vec::new(),
                stderr: String::from_utf8_lossy(&err).trim().to_string(),
                success: status.success(),
                status: status.to_string(),
            };
            if !out.success {
                return Err(failed(program, args, &out));
            }
            match decoded {
                Ok((Ok(value), _)) => Ok(value),
                Ok((Err(e), _)) => Err(e.into()),
                Err(join) => Err(SlurmError::Io {
                    command: display,
                    source: std::io::Error::other(format!("decoding the output failed: {join}")),
                }),
            }
        }
    }
}

/// Runs the command and turns a non-zero exit into [`SlurmError::Failed`] carrying stderr.
pub(crate) async fn run_ok(
    bin_dir: &Path,
    conf: Option<&Path>,
    timeout: Duration,
    program: &str,
    args: &[String],
) -> Result<Output, SlurmError> {
    let out = run(bin_dir, conf, timeout, program, args).await?;
    if out.success {
        Ok(out)
    } else {
        Err(failed(program, args, &out))
    }
}

pub(crate) fn failed(program: &str, args: &[String], out: &Output) -> SlurmError {
    SlurmError::Failed {
        command: display_command(program, args),
        status: out.status.clone(),
        stderr: out.stderr.clone(),
    }
}

/// The command as an admin would type it, for error messages and logs.
pub(crate) fn display_command(program: &str, args: &[String]) -> String {
    let mut s = program.to_string();
    for a in args {
        s.push(' ');
        if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$;&|<>\\".contains(c)) {
            s.push('\'');
            s.push_str(&a.replace('\'', r"'\''"));
            s.push('\'');
        } else {
            s.push_str(a);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_quotes_what_a_shell_would_split() {
        let args: Vec<String> =
            ["update", "nodename=a-[1-2]", "reason=it's down; $x", ""].map(String::from).to_vec();
        assert_eq!(
            display_command("scontrol", &args),
            r#"scontrol update nodename=a-[1-2] 'reason=it'\''s down; $x' ''"#
        );
    }

    #[tokio::test]
    async fn timeout_kills_the_child() {
        #[allow(clippy::disallowed_methods)] // times a real child process
        let started = std::time::Instant::now();
        let err = run(Path::new("/bin"), None, Duration::from_millis(200), "sleep", &["30".to_string()])
            .await
            .err()
            .unwrap();
        assert!(matches!(err, SlurmError::Timeout { .. }), "{err}");
        assert!(err.is_timeout());
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn failure_carries_stderr_and_args_are_not_shell_words() {
        let args = vec!["-c".to_string(), "echo 'bad thing' >&2; exit 3".to_string()];
        let err = run_ok(Path::new("/bin"), None, Duration::from_secs(5), "sh", &args).await.err().unwrap();
        match err {
            SlurmError::Failed { stderr, status, .. } => {
                assert_eq!(stderr, "bad thing");
                assert!(status.contains('3'), "{status}");
            }
            other => panic!("unexpected {other}"),
        }
        // An argument with shell syntax reaches the program verbatim.
        let out = run_ok(
            Path::new("/bin"),
            Some(Path::new("/x/slurm.conf")),
            Duration::from_secs(5),
            "sh",
            &[
                "-c".to_string(),
                r#"printf '%s|%s|%s' "$1" "$SLURM_CONF" "$TZ""#.to_string(),
                "sh".to_string(),
                "a b; $(rm -rf /) 'q'".to_string(),
            ],
        )
        .await
        .unwrap();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), "a b; $(rm -rf /) 'q'|/x/slurm.conf|UTC");
    }

    /// `sh -c script` through [`run_streamed`].
    async fn sh_streamed<T: Send + 'static>(
        script: &str,
        timeout: Duration,
        parse: impl FnOnce(&mut dyn std::io::BufRead) -> Result<T, ParseError> + Send + 'static,
    ) -> Result<T, SlurmError> {
        let args = vec!["-c".to_string(), script.to_string()];
        run_streamed(Path::new("/bin"), None, timeout, "sh", &args, parse).await
    }

    #[tokio::test]
    async fn streamed_output_is_decoded_as_it_arrives() {
        // 8 MB through a 64 KB pipe: decoded while the command still writes.
        let count = |r: &mut dyn std::io::BufRead| {
            let mut n = 0usize;
            loop {
                let len = r.fill_buf().map_err(|e| ParseError::new("test", e))?.len();
                if len == 0 {
                    return Ok(n);
                }
                n += len;
                r.consume(len);
            }
        };
        let n = sh_streamed("head -c 8000000 /dev/zero", Duration::from_secs(20), count).await.unwrap();
        assert_eq!(n, 8_000_000);
    }

    #[tokio::test]
    async fn a_failed_command_is_its_stderr_whatever_was_decoded() {
        let err = sh_streamed("echo ok; echo broken >&2; exit 3", Duration::from_secs(5), |_| Ok(()))
            .await
            .unwrap_err();
        match err {
            SlurmError::Failed { stderr, .. } => assert_eq!(stderr, "broken"),
            other => panic!("unexpected {other}"),
        }
        let err = sh_streamed("echo garbage", Duration::from_secs(5), |_| {
            Err::<(), _>(ParseError::new("sinfo --json", "expected value at line 1 column 1"))
        })
        .await
        .unwrap_err();
        assert!(matches!(err, SlurmError::Parse(_)), "{err}");
    }

    #[tokio::test]
    async fn a_decoder_that_stops_early_never_blocks_the_command() {
        let out = sh_streamed("head -c 4000000 /dev/zero", Duration::from_secs(20), |r| {
            let mut first = [0u8; 10];
            r.read_exact(&mut first).map_err(|e| ParseError::new("test", e))?;
            Ok(first.len())
        })
        .await
        .unwrap();
        assert_eq!(out, 10);
    }

    #[tokio::test]
    async fn a_streamed_command_that_hangs_is_killed_at_the_timeout() {
        #[allow(clippy::disallowed_methods)] // times a real child process
        let started = std::time::Instant::now();
        let err = sh_streamed("echo partial; exec sleep 30", Duration::from_millis(300), |r| {
            let mut s = String::new();
            r.read_to_string(&mut s).map_err(|e| ParseError::new("test", e))?;
            Ok(s)
        })
        .await
        .unwrap_err();
        assert!(err.is_timeout(), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn missing_program_is_a_spawn_error() {
        let err = run(Path::new("/nonexistent-dir"), None, Duration::from_secs(1), "scontrol", &[])
            .await
            .err()
            .unwrap();
        assert!(matches!(err, SlurmError::Spawn { .. }), "{err}");
    }
}
