//! The files of a local cluster: slurm.conf with the fast settings, and its helper scripts.

use std::path::{Path, PathBuf};

use super::{Auth, ClusterSpec, SlurmGeneration, ROOT_STAMP};

/// Where everything of one cluster lives, all under one private directory.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub dir: PathBuf,
}

impl Layout {
    pub fn conf(&self) -> PathBuf {
        self.dir.join("slurm.conf")
    }
    pub fn state(&self) -> PathBuf {
        self.dir.join("state")
    }
    pub fn spool(&self) -> PathBuf {
        self.dir.join("spool")
    }
    pub fn run(&self) -> PathBuf {
        self.dir.join("run")
    }
    pub fn log(&self) -> PathBuf {
        self.dir.join("log")
    }
    pub fn bin(&self) -> PathBuf {
        self.dir.join("bin")
    }
    pub fn jobs(&self) -> PathBuf {
        self.dir.join("jobs")
    }
    pub fn munge(&self) -> PathBuf {
        self.dir.join("munge")
    }
    pub fn munge_socket(&self) -> PathBuf {
        self.munge().join("munge.socket.2")
    }
    pub fn slurmd_pid_file(&self, node: &str) -> PathBuf {
        self.run().join(format!("slurmd-{node}.pid"))
    }
    pub fn slurmd_start(&self) -> PathBuf {
        self.bin().join("slurmd-start")
    }
    pub fn slurmd_stop(&self) -> PathBuf {
        self.bin().join("slurmd-stop")
    }
    pub fn prolog(&self) -> PathBuf {
        self.bin().join("prolog")
    }
    /// `bin/in-root PROGRAM ARGS`: PROGRAM inside the root (24.11 and 26.05 clusters only).
    pub fn in_root(&self) -> PathBuf {
        self.bin().join("in-root")
    }
    /// One wrapper per Slurm client command that runs it inside the root (24.11 and 26.05 clusters
    /// only): the `bin_dir` handed to slurm-dws.
    pub fn wbin(&self) -> PathBuf {
        self.dir.join("wbin")
    }
    pub fn cgroup_conf(&self) -> PathBuf {
        self.dir.join("cgroup.conf")
    }
    /// A two-line slurm.conf that lets `scontrol show hostnames` run before the real one exists.
    /// The directory that is each controller host's own (its `host-NAME/` there).
    pub fn host(&self) -> PathBuf {
        self.dir.join("host")
    }
    pub fn hostnames_conf(&self) -> PathBuf {
        self.dir.join("hostnames.conf")
    }
}

/// The value of `key` in a `Key=Value ...` line (case-insensitive key), e.g. `NodeName`.
pub(crate) fn line_value<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace().find_map(|word| {
        let (k, v) = word.split_once('=')?;
        k.eq_ignore_ascii_case(key).then_some(v)
    })
}

/// A node line completed for this host: `NodeAddr=127.0.0.1` unless given, and `Port=` with one
/// port per node unless given (several slurmd share the host, so each needs its own port).
pub(crate) fn complete_node_line(line: &str, first_port: u16, count: usize) -> String {
    let mut out = line.trim().to_string();
    if line_value(line, "NodeAddr").is_none() {
        out.push_str(" NodeAddr=127.0.0.1");
    }
    if line_value(line, "Port").is_none() && count > 0 {
        if count == 1 {
            out.push_str(&format!(" Port={first_port}"));
        } else {
            let last = first_port as usize + count - 1;
            out.push_str(&format!(" Port=[{first_port}-{last}]"));
        }
    }
    out
}

/// slurm.conf: the fast single-host settings of docs/slurm-facts.md, then `extra_conf` (a key
/// given there replaces the default instead of appearing twice), then nodes and partitions.
pub(crate) fn render(spec: &ClusterSpec, layout: &Layout, ctld_port: u16, node_lines: &[String]) -> String {
    let p = |path: PathBuf| path.display().to_string();
    let mut settings: Vec<(String, String)> = vec![
        ("ClusterName", spec.cluster_name.clone()),
        ("SlurmctldHost", "localhost".into()),
        ("SlurmctldPort", ctld_port.to_string()),
        ("SlurmUser", "root".into()),
        ("SlurmdUser", "root".into()),
        ("StateSaveLocation", p(layout.state())),
        ("SlurmdSpoolDir", p(layout.spool().join("%n"))),
        ("SlurmctldPidFile", p(layout.run().join("slurmctld.pid"))),
        ("SlurmdPidFile", p(layout.run().join("slurmd-%n.pid"))),
        ("SlurmctldLogFile", p(layout.log().join("slurmctld.log"))),
        ("SlurmdLogFile", p(layout.log().join("slurmd-%n.log"))),
        ("ProctrackType", "proctrack/linuxproc".into()),
        ("TaskPlugin", "task/none".into()),
        ("SelectType", "select/cons_tres".into()),
        ("SelectTypeParameters", "CR_CPU".into()),
        ("ReturnToService", "1".into()),
        ("TreeWidth", "65533".into()),
        ("ResumeRate", "0".into()),
        ("SuspendRate", "0".into()),
        ("SuspendTime", "15".into()),
        ("SuspendTimeout", "5".into()),
        ("ResumeTimeout", "60".into()),
        ("SlurmctldParameters", "idle_on_node_suspend,power_save_interval=1".into()),
        ("DebugFlags", "Power".into()),
        ("PrologSlurmctld", p(layout.prolog())),
        ("MpiDefault", "none".into()),
        ("JobCompType", "jobcomp/none".into()),
        ("MailProg", "/bin/true".into()),
        ("KillWait", "2".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    if spec.slurm == SlurmGeneration::Bookworm {
        // 22.05 only: powered-down cloud nodes are invisible without PrivateData=cloud (23.02 and
        // later list them and drop the word), and NoAddrCache is defunct from 23.11 on (24.11
        // logs an error for it at every start).
        let at = settings.iter().position(|(k, _)| k == "TreeWidth").unwrap_or(settings.len());
        settings.insert(at, ("PrivateData".into(), "cloud".into()));
        settings.insert(at + 1, ("CommunicationParameters".into(), "NoAddrCache".into()));
    }
    if let Some((first, _)) = spec.controllers.split_first() {
        // Each on its own host: its pid and log files in the host's own directory.
        let set = |settings: &mut Vec<(String, String)>, key: &str, value: String| {
            if let Some(slot) = settings.iter_mut().find(|(k, _)| k == key) {
                slot.1 = value;
            }
        };
        set(&mut settings, "SlurmctldHost", format!("{}({})", first.name, first.addr));
        set(&mut settings, "SlurmctldPidFile", p(layout.host().join("slurmctld.pid")));
        set(&mut settings, "SlurmctldLogFile", p(layout.host().join("slurmctld.log")));
        let at = settings.iter().position(|(k, _)| k == "SlurmctldHost").map_or(0, |i| i + 1);
        for (i, c) in spec.controllers.iter().enumerate().skip(1) {
            // Kept apart from the one-per-key settings: every entry is a line.
            settings.insert(at + i - 1, (format!("SlurmctldHost#{i}"), format!("{}({})", c.name, c.addr)));
        }
        settings.push(("SlurmctldTimeout".into(), "6".into()));
    }
    match spec.auth {
        Auth::Munge => {
            settings.push(("AuthType".into(), "auth/munge".into()));
            settings.push(("CredType".into(), "cred/munge".into()));
            settings.push(("AuthInfo".into(), format!("socket={}", layout.munge_socket().display())));
        }
        Auth::None => {
            settings.push(("AuthType".into(), "auth/none".into()));
            settings.push(("CredType".into(), "cred/none".into()));
        }
    }

    let mut free_lines = Vec::new();
    for line in &spec.extra_conf {
        let trimmed = line.trim();
        match trimmed.split_once('=') {
            Some((key, value)) if !trimmed.starts_with('#') && !key.contains(' ') => {
                if let Some(slot) = settings.iter_mut().find(|(k, _)| k.eq_ignore_ascii_case(key)) {
                    slot.1 = value.to_string();
                } else {
                    settings.push((key.to_string(), value.to_string()));
                }
            }
            _ => free_lines.push(trimmed.to_string()),
        }
    }

    let mut out = String::from("# slurm.conf of a slurm-dws devcluster (generated)\n");
    for (k, v) in &settings {
        let k = k.split('#').next().unwrap_or(k);
        out.push_str(&format!("{k}={v}\n"));
    }
    for line in free_lines.iter().chain(node_lines).chain(&spec.partition_lines) {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// PrologSlurmctld: wait until the job's nodes have left the powering states, so the job starts
/// as soon as they registered instead of after slurmctld's ~30 s internal timer
/// (docs/slurm-facts.md). It gets no SLURM_CONF, so the path is baked in. It always exits 0: a prolog
/// failure would requeue/hold the job, and the wait is only an optimisation.
///
/// It stops waiting as soon as a node of the job is drained, down, failed or idle: that node will
/// not come up for this job (slurm-dws set it down after a failed request, and the job is requeued).
/// A requeued job whose prolog still runs is held with `Reason=Cleaning`, so a prolog that waited
/// out its minute kept the job from the partition it falls back to until the drain was lifted, and
/// it went back to the failed one (e2e 13 and 14, under load).
pub(crate) fn prolog_script(conf: &Path) -> String {
    format!(
        r#"#!/bin/sh
# PrologSlurmctld of a slurm-dws devcluster (generated): wait for the job's nodes to be up.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export SLURM_CONF='{conf}'
i=0
while [ "$i" -lt 600 ]; do
    states=$(sinfo -h -N -n "$SLURM_JOB_NODELIST" -o %T 2>/dev/null) || states='unknown~'
    case "$states" in
        *drain*|*down*|*fail*|*idle*) exit 0 ;;
        *'#'*|*'~'*|*'*'*|*'%'*) ;;
        *) exit 0 ;;
    esac
    sleep 0.1
    i=$((i + 1))
done
exit 0
"#,
        conf = conf.display()
    )
}

/// `slurmd-start NODE`: starts `slurmd -b -N NODE -f CONF`, which daemonizes. Perl (Debian's
/// essential perl-base, in the trixie root too) is here to prepare the process first:
///
/// - it clears the signal mask: a program started from a 22.05 hook inherits blocked SIGTERM, and
///   a slurmd started that way could never be stopped with TERM;
/// - it leaves the caller's session (`setsid`, forking first when it leads a process group): on
///   24.11 slurmscriptd kills the hook's process group when the hook exits, and a slurmd still
///   daemonizing in that group died with it (4 of 22 resumes lost a node, docs/slurm-root.md);
/// - it reopens closed fds 0-2 (hooks run with them closed) and marks the environment so that
///   stray processes of this cluster can be found at teardown.
///
/// With `in_root` (24.11), a call from the host first re-runs the script inside the root through
/// that wrapper; a call from a hook is inside already (the root's stamp is at `/`).
pub(crate) fn slurmd_start_script(layout: &Layout, marker: &str, in_root: Option<&Path>) -> String {
    let enter_root = match in_root {
        Some(wrapper) => format!(
            r#"# On the host: run this script again inside the Slurm root (a hook is inside already).
unless (-e '/{stamp}') {{
    exec {{ '{wrapper}' }} '{wrapper}', '/usr/bin/perl', '{script}', @ARGV
        or die "exec {wrapper}: $!\n";
}}
"#,
            stamp = ROOT_STAMP,
            wrapper = wrapper.display(),
            script = layout.slurmd_start().display(),
        ),
        None => String::new(),
    };
    format!(
        r#"#!/usr/bin/perl
# slurmd-start NODE: start the slurmd of NODE for a slurm-dws devcluster (generated).
use strict;
use warnings;
use POSIX ();
{enter_root}my $name = shift @ARGV;
defined $name && $name ne '' or die "usage: slurmd-start NODE\n";
for my $fd (0 .. 2) {{
    next if -e "/proc/self/fd/$fd";
    my $null = POSIX::open('/dev/null', POSIX::O_RDWR());
    POSIX::dup2($null, $fd) if defined $null && $null != $fd;
}}
POSIX::sigprocmask(POSIX::SIG_SETMASK(), POSIX::SigSet->new()) or die "sigprocmask: $!\n";
$SIG{{$_}} = 'DEFAULT' for qw(TERM INT HUP QUIT USR1 USR2 ALRM);
# Out of the caller's session and process group. setsid fails for a process-group leader: then
# the work goes on in a child, and this process waits for it (slurmd -b returns once daemonized).
unless (defined POSIX::setsid()) {{
    my $pid = fork();
    defined $pid or die "fork: $!\n";
    if ($pid) {{
        waitpid($pid, 0);
        exit($? & 127 ? 1 : $? >> 8);
    }}
    defined POSIX::setsid() or die "setsid: $!\n";
}}
$ENV{{'{marker_key}'}} = '{marker}';
$ENV{{'PATH'}} = '/usr/sbin:/usr/bin:/sbin:/bin';
exec {{ '/usr/sbin/slurmd' }} 'slurmd', '-b', '-N', $name, '-f', '{conf}'
    or die "exec /usr/sbin/slurmd: $!\n";
"#,
        marker_key = super::MARKER_ENV,
        marker = marker,
        conf = layout.conf().display(),
    )
}

/// Quotes `s` for a POSIX shell (single quotes).
pub(crate) fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `bin/in-root PROGRAM [ARG...]`: PROGRAM inside the Slurm `root` (trixie or forky), in a private
/// mount namespace in which `/proc`, `/sys`, `/dev` and `bind_dirs` are bind-mounted at the same
/// paths (docs/slurm-root.md). The mounts exist only in that namespace and vanish with its last
/// process: nothing is ever mounted on the host, even after `kill -9`. Every step execs, so the
/// PID a caller gets is PROGRAM's own. Inside the root already (a program slurmctld runs), it just
/// execs PROGRAM.
pub(crate) fn in_root_script(root: &Path, bind_dirs: &[PathBuf]) -> String {
    let dirs: Vec<String> = bind_dirs.iter().map(|d| sh_quote(&d.display().to_string())).collect();
    format!(
        r#"#!/bin/sh
# in-root PROGRAM [ARG...]: PROGRAM inside the Slurm root of a slurm-dws devcluster, in a private
# mount namespace with /proc, /sys, /dev and the cluster's directories bind-mounted at the same paths
# (generated; docs/slurm-root.md).
[ -e /{stamp} ] && exec "$@"
exec /usr/bin/unshare --mount --propagation private -- /bin/sh -ec '
r=$1; n=$2; shift 2
/bin/mount --rbind /proc "$r/proc"
/bin/mount --rbind /sys "$r/sys"
/bin/mount --rbind /dev "$r/dev"
while [ "$n" -gt 0 ]; do
    /bin/mkdir -p "$r$1"
    /bin/mount --bind "$1" "$r$1"
    shift; n=$((n - 1))
done
wd=$PWD; [ -d "$r$wd" ] || wd=/
exec /usr/bin/unshare --root="$r" --wd="$wd" -- "$@"
' in-root {root} {count} {dirs} "$@"
"#,
        stamp = ROOT_STAMP,
        root = sh_quote(&root.display().to_string()),
        count = bind_dirs.len(),
        dirs = dirs.join(" "),
    )
}

/// The Slurm programs that get a wrapper in `wbin/` (24.11 and 26.05 clusters), with their path in
/// the root.
pub(crate) const WRAPPED: &[&str] = &[
    "/usr/bin/scontrol",
    "/usr/bin/sinfo",
    "/usr/bin/squeue",
    "/usr/bin/sbatch",
    "/usr/bin/scancel",
    "/usr/bin/srun",
    "/usr/bin/sacct",
    "/usr/bin/sdiag",
    "/usr/sbin/slurmd",
];

/// `wbin/NAME`: the root's `program`, from the host through `in-root`, or directly from inside.
pub(crate) fn client_wrapper(program: &str, in_root: &Path) -> String {
    format!(
        "#!/bin/sh\n# {program} of the Slurm root (generated).\n\
         [ -e /{ROOT_STAMP} ] && exec {program} \"$@\"\n\
         exec {} {program} \"$@\"\n",
        sh_quote(&in_root.display().to_string())
    )
}

/// cgroup.conf of a 24.11 or 26.05 cluster: no cgroup plugin (there is no cgroupfs to rely on in a
/// chroot).
/// 22.05 does not know `disabled` (its slurmd fails to start), so its clusters get none.
pub(crate) const CGROUP_CONF_DISABLED: &str =
    "# cgroup.conf of a slurm-dws devcluster in a Slurm root (generated)\nCgroupPlugin=disabled\n";

/// `slurmd-stop NODE`: stops that node's slurmd by its pid file (TERM, then KILL after 5 s), then
/// kills what else ran "on the node", as a deleted VM takes everything with it: the session the
/// daemonized slurmd created, and each slurmstepd of the node with its job processes. A
/// slurmstepd is found by the node's slurmd log file, which it keeps open (22.05 and 24.11
/// alike; it leads a session of its own, with the job's tasks in it, and 24.11's overwrites its
/// environment with its process title, so neither slurmd's session nor an environment marker
/// finds it). Idempotent; only touches a slurmd of this cluster's slurm.conf, slurmstepds holding
/// this cluster's log of that node, and sessions whose leader has exited (daemons double-fork)
/// and that are not the caller's. Reads /proc with shell builtins: no fork per process. Returns once
/// everything it killed is gone (at most 5 s more): a KILL is delivered, not done, when `kill`
/// returns.
pub(crate) fn slurmd_stop_script(layout: &Layout) -> String {
    format!(
        r#"#!/bin/sh
# slurmd-stop NODE: stop the slurmd of NODE of a slurm-dws devcluster (generated).
PATH=/usr/sbin:/usr/bin:/sbin:/bin
[ -n "$1" ] || exit 0
f='{run}'/"slurmd-$1.pid"
log='{log}'/"slurmd-$1.log"
# field=the Nth field of /proc/PID/stat after the command name (1 = state, 4 = session).
stat_field() {{
    field=
    line=
    {{ read -r line < "/proc/$1/stat"; }} 2>/dev/null || return 1
    set -- "$2" ${{line##*) }}
    shift "$1"
    field=$1
}}
alive() {{
    stat_field "$1" 1 && [ "$field" != Z ]
}}
stat_field $$ 4
own_session=$field
killed=
# Sessions to kill: a daemon's own session (its leader, the intermediate child of the double
# fork, is gone), never the caller's.
sessions=
add_session() {{
    stat_field "$1" 4 || return 0
    case "$field" in ''|*[!0-9]*|0|1) return 0 ;; esac
    [ "$field" = "$1" ] || [ ! -e "/proc/$field" ] || return 0
    [ "$field" != "$own_session" ] || return 0
    sessions="$sessions $field"
}}
pid=$(cat "$f" 2>/dev/null)
case "$pid" in ''|*[!0-9]*) pid= ;; esac
if [ -n "$pid" ] && alive "$pid" && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF -- '{conf}'; then
    add_session "$pid"
    kill -TERM "$pid" 2>/dev/null
    i=0
    while [ "$i" -lt 50 ] && alive "$pid"; do sleep 0.1; i=$((i + 1)); done
    alive "$pid" && kill -KILL "$pid" 2>/dev/null
fi
# The node's slurmstepds: they hold its slurmd log open.
for d in /proc/[0-9]*; do
    comm=
    {{ read -r comm < "$d/comm"; }} 2>/dev/null || continue
    case "$comm" in slurmstepd*) ;; *) continue ;; esac
    for fd in "$d"/fd/*; do
        case "$(readlink "$fd" 2>/dev/null)" in
            *"$log")
                p=${{d#/proc/}}
                add_session "$p"
                kill -KILL "$p" 2>/dev/null
                killed="$killed $p"
                break
                ;;
        esac
    done
done
if [ -n "$sessions" ]; then
    for d in /proc/[0-9]*; do
        p=${{d#/proc/}}
        stat_field "$p" 4 || continue
        case " $sessions " in *" $field "*) kill -KILL "$p" 2>/dev/null; killed="$killed $p" ;; esac
    done
fi
# A KILL is delivered, not yet done, when kill returns: wait (at most 5 s) until everything killed
# is gone or a zombie, so that the node is down when this returns, as a deleted VM is.
i=0
while [ "$i" -lt 50 ]; do
    left=
    for p in $killed; do alive "$p" && left=1 && break; done
    [ -n "$left" ] || break
    sleep 0.1
    i=$((i + 1))
done
rm -f "$f"
exit 0
"#,
        run = layout.run().display(),
        log = layout.log().display(),
        conf = layout.conf().display(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: &[&str]) -> ClusterSpec {
        ClusterSpec {
            cluster_name: "t1".into(),
            node_lines: vec![],
            partition_lines: vec!["PartitionName=p Nodes=ALL".into()],
            extra_conf: extra.iter().map(|s| s.to_string()).collect(),
            auth: Auth::Munge,
            slurm: SlurmGeneration::Bookworm,
            bind_dirs: vec![],
            controllers: vec![],
        }
    }

    #[test]
    fn node_lines_get_an_address_and_one_port_per_node() {
        let cases = [
            (
                "NodeName=a-[0-9] State=CLOUD CPUs=1",
                17000,
                10,
                "NodeName=a-[0-9] State=CLOUD CPUs=1 NodeAddr=127.0.0.1 Port=[17000-17009]",
            ),
            ("NodeName=b-0 State=CLOUD", 20000, 1, "NodeName=b-0 State=CLOUD NodeAddr=127.0.0.1 Port=20000"),
            (
                "NodeName=c-[0-1] nodeaddr=10.0.0.1 port=[1-2]",
                3,
                2,
                "NodeName=c-[0-1] nodeaddr=10.0.0.1 port=[1-2]",
            ),
            ("NodeName=DEFAULT CPUs=1", 5, 0, "NodeName=DEFAULT CPUs=1 NodeAddr=127.0.0.1"),
        ];
        for (line, port, count, want) in cases {
            assert_eq!(complete_node_line(line, port, count), want);
        }
    }

    #[test]
    fn conf_has_the_fast_settings_and_extra_lines_override() {
        let layout = Layout { dir: "/tmp/dc".into() };
        let conf = render(
            &spec(&["SuspendTime=30", "ResumeProgram=/x/resume", "# comment"]),
            &layout,
            16817,
            &["NodeName=n-0 Port=1".into()],
        );
        for want in [
            "ClusterName=t1\n",
            "SlurmctldPort=16817\n",
            "SlurmUser=root\n",
            "ProctrackType=proctrack/linuxproc\n",
            "TaskPlugin=task/none\n",
            "SelectTypeParameters=CR_CPU\n",
            "ReturnToService=1\n",
            "PrivateData=cloud\n",
            "CommunicationParameters=NoAddrCache\n",
            "TreeWidth=65533\n",
            "ResumeRate=0\n",
            "SuspendRate=0\n",
            "SuspendTimeout=5\n",
            "SlurmctldParameters=idle_on_node_suspend,power_save_interval=1\n",
            "DebugFlags=Power\n",
            "SlurmdSpoolDir=/tmp/dc/spool/%n\n",
            "SlurmdPidFile=/tmp/dc/run/slurmd-%n.pid\n",
            "SlurmdLogFile=/tmp/dc/log/slurmd-%n.log\n",
            "PrologSlurmctld=/tmp/dc/bin/prolog\n",
            "AuthInfo=socket=/tmp/dc/munge/munge.socket.2\n",
            "SuspendTime=30\n",
            "ResumeProgram=/x/resume\n",
            "# comment\nNodeName=n-0 Port=1\nPartitionName=p Nodes=ALL\n",
        ] {
            assert!(conf.contains(want), "missing {want:?} in\n{conf}");
        }
        assert!(!conf.contains("SuspendTime=15"), "{conf}");
        let none = render(&ClusterSpec { auth: Auth::None, ..spec(&[]) }, &layout, 1, &[]);
        assert!(none.contains("AuthType=auth/none\nCredType=cred/none\n"));
        assert!(!none.contains("AuthInfo"));
    }

    /// 24.11 and 26.05 get the same slurm.conf.
    #[test]
    fn a_24_11_or_26_05_conf_has_no_defunct_or_22_05_only_options() {
        let layout = Layout { dir: "/tmp/dc".into() };
        for slurm in [SlurmGeneration::Trixie, SlurmGeneration::Forky] {
            let conf =
                render(&ClusterSpec { slurm, ..spec(&[]) }, &layout, 16817, &["NodeName=n-0 Port=1".into()]);
            assert!(!conf.contains("NoAddrCache"), "defunct on 24.11: {conf}");
            assert!(!conf.contains("PrivateData"), "22.05 only: {conf}");
            assert!(!conf.contains("cloud_reg_addrs"), "{conf}");
            for want in [
                "SuspendTime=15\n",
                "ReturnToService=1\n",
                "SlurmctldParameters=idle_on_node_suspend,power_save_interval=1\n",
            ] {
                assert!(conf.contains(want), "missing {want:?} in\n{conf}");
            }
        }
    }

    #[test]
    fn in_root_binds_the_directories_at_the_same_paths_and_execs() {
        let script = in_root_script(
            Path::new("/var/cache/slurm-dws/trixie-root"),
            &["/tmp/dc".into(), "/work/it's here".into()],
        );
        assert!(script.starts_with("#!/bin/sh\n"), "{script}");
        assert!(script.contains("[ -e /.slurm-dws-root ] && exec \"$@\"\n"), "{script}");
        assert!(
            script.contains(
                r#"' in-root '/var/cache/slurm-dws/trixie-root' 2 '/tmp/dc' '/work/it'\''s here' "$@""#
            ),
            "{script}"
        );
        assert!(script.contains("exec /usr/bin/unshare --mount --propagation private"), "{script}");
        assert!(script.contains(r#"exec /usr/bin/unshare --root="$r" --wd="$wd" -- "$@""#), "{script}");
        let wrapper = client_wrapper("/usr/bin/scontrol", Path::new("/tmp/dc/bin/in-root"));
        assert_eq!(
            wrapper,
            "#!/bin/sh\n# /usr/bin/scontrol of the Slurm root (generated).\n\
             [ -e /.slurm-dws-root ] && exec /usr/bin/scontrol \"$@\"\n\
             exec '/tmp/dc/bin/in-root' /usr/bin/scontrol \"$@\"\n"
        );
    }

    #[test]
    fn slurmd_start_leaves_the_session_and_enters_the_root_only_for_24_11() {
        let layout = Layout { dir: "/tmp/dc".into() };
        let host = slurmd_start_script(&layout, "/tmp/dc", None);
        assert!(host.contains("POSIX::setsid()"), "{host}");
        assert!(!host.contains("in-root"), "{host}");
        let root = slurmd_start_script(&layout, "/tmp/dc", Some(Path::new("/tmp/dc/bin/in-root")));
        assert!(
            root.contains("unless (-e '/.slurm-dws-root') {\n    exec { '/tmp/dc/bin/in-root' } '/tmp/dc/bin/in-root', '/usr/bin/perl', '/tmp/dc/bin/slurmd-start', @ARGV"),
            "{root}"
        );
    }

    #[test]
    fn line_value_is_case_insensitive() {
        assert_eq!(line_value("nodename=x-[1-2] CPUs=1", "NodeName"), Some("x-[1-2]"));
        assert_eq!(line_value("PartitionName=p", "NodeName"), None);
    }
}
