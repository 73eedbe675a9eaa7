#!/usr/bin/env bash
# Builds a Debian root that the real-Slurm tests run a Slurm release in (docs/slurm-root.md):
# trixie (Slurm 24.11, the default) or forky (Slurm 26.05).
#
#   scripts/slurm-root.sh [--suite S]            build the root unless a complete one is there
#   scripts/slurm-root.sh [--suite S] --rebuild  build it again even if it is complete
#   scripts/slurm-root.sh [--suite S] --check    exit 0 if a complete root is there, 1 if not
#
# S is trixie (default) or forky. The trixie root lives at
# ${SLURM_DWS_TRIXIE_ROOT:-/var/cache/slurm-dws/trixie-root}, the forky one at
# ${SLURM_DWS_FORKY_ROOT:-/var/cache/slurm-dws/forky-root}, outside any git
# clone, so every run after the first reuses it. It is built in ROOT.tmp and renamed to ROOT only
# after its stamp file (ROOT/.slurm-dws-root) is written, so an interrupted build never leaves a
# root that looks complete; a stale ROOT.tmp is removed and built again. A root whose stamp has
# another format number than FORMAT below is rebuilt (bump FORMAT when the package list or the
# setup changes).
#
# The Debian mirror is the host's own (the URIs of /etc/apt/sources.list.d/*.sources or the deb
# lines of /etc/apt/sources.list), or SLURM_DWS_DEBIAN_MIRROR if set. Needs root.
#
# The whole script runs in a private mount namespace (it re-executes itself under
# `unshare --mount --propagation private`), and the /proc, /sys and /dev bind mounts it makes in
# the root are also unmounted by an EXIT trap: nothing stays mounted on the host, even after a
# failure or kill -9.
set -euo pipefail

# Format of the root: bump when PACKAGES or the setup below changes, so existing roots are rebuilt.
FORMAT=1
# What a test cluster needs: the daemons, the client commands, munge; perl-base (essential anyway)
# for the devcluster's slurmd-start script; procps (ps, pgrep, kill) for scripts and post-mortems.
PACKAGES=(slurmctld slurmd slurm-client munge perl-base procps)
STAMP=.slurm-dws-root

log() { echo "slurm-root: $*" >&2; }
die() {
    log "error: $*"
    exit 1
}

usage() {
    sed -n '5,7p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit "$1"
}

mode=build
SUITE=trixie
args=("$@")
while [ $# -gt 0 ]; do
    case "$1" in
        --rebuild) mode=rebuild ;;
        --check) mode=check ;;
        --suite)
            [ $# -ge 2 ] || {
                log "error: --suite needs a value (trixie or forky)"
                usage 2
            }
            SUITE=$2
            shift
            ;;
        --suite=*) SUITE=${1#--suite=} ;;
        -h | --help) usage 0 ;;
        *)
            log "error: unknown argument '$1'"
            usage 2
            ;;
    esac
    shift
done
set -- "${args[@]}"

# Per suite: the root's default path and the variable that moves it; the debootstrap script (the
# debootstrap of bookworm has no forky script: forky is built with sid's, which fits any testing
# suite); whether apt must ignore the Release file's Valid-Until (forky's Release on the mirrors
# is signed with a Valid-Until that can lie in the past between two publications).
case "$SUITE" in
    trixie)
        ROOT_VAR=SLURM_DWS_TRIXIE_ROOT
        ROOT=${SLURM_DWS_TRIXIE_ROOT:-/var/cache/slurm-dws/trixie-root}
        DEBOOTSTRAP_SCRIPT=
        NO_VALID_UNTIL=
        ;;
    forky)
        ROOT_VAR=SLURM_DWS_FORKY_ROOT
        ROOT=${SLURM_DWS_FORKY_ROOT:-/var/cache/slurm-dws/forky-root}
        DEBOOTSTRAP_SCRIPT=/usr/share/debootstrap/scripts/sid
        NO_VALID_UNTIL=1
        ;;
    *)
        log "error: unknown suite '$SUITE' (trixie or forky)"
        exit 2
        ;;
esac
ROOT=${ROOT%/}
TMP="$ROOT.tmp"
OLD="$ROOT.old"
LOCK="$ROOT.lock"
[ "${ROOT#/}" != "$ROOT" ] || die "$ROOT_VAR must be an absolute path: $ROOT"

# Whether DIR is a complete root of the current format. (/usr/sbin/slurmctld is an absolute
# symlink through /etc/alternatives, which would resolve on the host: test the real file.)
complete() {
    [ -f "$1/$STAMP" ] && grep -qx "format=$FORMAT" "$1/$STAMP" && [ -x "$1/usr/sbin/slurmctld-wlm" ]
}

# Prints the root's Slurm version: `slurmctld -V` in the root (needs root), else from its stamp.
print_version() {
    if [ "$(id -u)" -eq 0 ]; then
        chroot "$1" /usr/sbin/slurmctld -V
    else
        echo "slurm-wlm $(sed -n 's/^slurm=//p' "$1/$STAMP")"
    fi
}

if [ "$mode" = check ]; then
    if complete "$ROOT"; then
        echo "$ROOT"
        exit 0
    fi
    exit 1
fi

if [ "$mode" = build ] && complete "$ROOT"; then
    log "$ROOT is complete ($(grep '^slurm=' "$ROOT/$STAMP")); --rebuild to build it again"
    print_version "$ROOT"
    exit 0
fi

[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, chroot, mount)"

# Everything below runs in a private mount namespace: mounts made here never reach the host.
if [ -z "${SLURM_DWS_ROOT_PRIVATE_NS:-}" ]; then
    SLURM_DWS_ROOT_PRIVATE_NS=1 exec unshare --mount --propagation private -- "$BASH" "$0" "$@"
fi

export DEBIAN_FRONTEND=noninteractive
export LC_ALL=C.UTF-8

# The host's Debian mirror: the first URIs of a deb822 source whose suites include the host's own
# codename (not -security/-updates), else the first such `deb` line of sources.list.
host_mirror() {
    if [ -n "${SLURM_DWS_DEBIAN_MIRROR:-}" ]; then
        echo "$SLURM_DWS_DEBIAN_MIRROR"
        return
    fi
    local codename='' file uri
    # shellcheck disable=SC1091
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    for file in /etc/apt/sources.list.d/*.sources; do
        [ -f "$file" ] || continue
        # One stanza per blank-line-separated paragraph; print its first URI if it is a deb
        # source of the host's codename (or of any suite without a dash when that is unknown).
        uri=$(awk -v want="$codename" '
            function flush() {
                if (!found && uri != "" && types ~ /(^|[ \t])deb([ \t]|$)/) {
                    n = split(suites, s, /[ \t]+/)
                    for (i = 1; i <= n; i++)
                        if ((want != "" && s[i] == want) || (want == "" && s[i] != "" && s[i] !~ /-/)) {
                            print uri; found = 1; exit
                        }
                }
                uri = ""; suites = ""; types = ""
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            tolower($1) == "uris:"   { uri = $2 }
            tolower($1) == "suites:" { $1 = ""; suites = $0 }
            tolower($1) == "types:"  { $1 = ""; types = $0 }
            END { flush() }
        ' "$file")
        if [ -n "$uri" ]; then
            echo "$uri"
            return
        fi
    done
    if [ -f /etc/apt/sources.list ]; then
        # deb [options] URI SUITE COMPONENTS...
        uri=$(awk -v want="$codename" '
            $1 != "deb" { next }
            {
                i = 2
                if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
                if ((want != "" && $(i + 1) == want) || (want == "" && $(i + 1) !~ /-/)) { print $i; exit }
            }
        ' /etc/apt/sources.list)
        if [ -n "$uri" ]; then
            echo "$uri"
            return
        fi
    fi
    return 1
}

# Mount points below DIR on this namespace, deepest first.
mounts_below() {
    findmnt -rn -o TARGET | awk -v d="$1/" 'index($0, d) == 1' | sort -r
}

unmount_below() {
    local target
    while read -r target; do
        [ -n "$target" ] || continue
        umount -l "$target" 2>/dev/null || log "could not unmount $target"
    done < <(mounts_below "$1")
}

# Removes DIR, refusing if anything is still mounted below it (rm -rf would go into the mount).
remove_tree() {
    [ -e "$1" ] || return 0
    unmount_below "$1"
    if [ -n "$(mounts_below "$1")" ]; then
        die "still mounted below $1: $(mounts_below "$1" | tr '\n' ' ')"
    fi
    rm -rf --one-file-system -- "$1"
}

# Runs a command inside the root being built, with /proc, /sys and /dev bind-mounted.
in_root() {
    local dir
    for dir in proc sys dev; do
        mkdir -p "$TMP/$dir"
        if ! mountpoint -q "$TMP/$dir"; then
            mount --rbind "/$dir" "$TMP/$dir"
            mount --make-rslave "$TMP/$dir"
        fi
    done
    chroot "$TMP" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
        DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 "$@"
}

ensure_debootstrap() {
    command -v debootstrap >/dev/null 2>&1 && return 0
    log "installing debootstrap on the host"
    if ! apt-get install -y -q --no-install-recommends debootstrap; then
        apt-get update -q
        apt-get install -y -q --no-install-recommends debootstrap
    fi
}

mkdir -p "$(dirname "$ROOT")"
exec 9>"$LOCK"
if ! flock -n 9; then
    log "another build holds $LOCK; waiting"
    flock 9
fi
# Another build may have finished while we waited.
if [ "$mode" = build ] && complete "$ROOT"; then
    log "$ROOT was completed by another build"
    print_version "$ROOT"
    exit 0
fi

start=$(date +%s)
ensure_debootstrap
mirror=$(host_mirror) || die "no Debian mirror in the host's apt sources; set SLURM_DWS_DEBIAN_MIRROR"

if [ -e "$TMP" ]; then
    log "removing the unfinished $TMP"
    remove_tree "$TMP"
fi
trap 'unmount_below "$TMP"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "debootstrap --variant=minbase $SUITE $TMP (host mirror${DEBOOTSTRAP_SCRIPT:+, script $DEBOOTSTRAP_SCRIPT})"
# shellcheck disable=SC2086 # an empty script argument is no argument
debootstrap --variant=minbase "$SUITE" "$TMP" "$mirror" $DEBOOTSTRAP_SCRIPT >"$ROOT.debootstrap.log" 2>&1 || {
    tail -n 30 "$ROOT.debootstrap.log" >&2
    die "debootstrap failed (log: $ROOT.debootstrap.log)"
}

# debootstrap writes no /etc/hosts, and SlurmctldHost=localhost must resolve inside the root.
if [ ! -s "$TMP/etc/hosts" ]; then
    printf '127.0.0.1\tlocalhost\n::1\t\tip6-localhost ip6-loopback\n' >"$TMP/etc/hosts"
fi

# No documentation, manual pages or translations in the root: it is only ever run.
mkdir -p "$TMP/etc/dpkg/dpkg.cfg.d"
cat >"$TMP/etc/dpkg/dpkg.cfg.d/01-slurm-dws-nodoc" <<'EOF'
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
EOF
if [ -n "$NO_VALID_UNTIL" ]; then
    mkdir -p "$TMP/etc/apt/apt.conf.d"
    echo 'Acquire::Check-Valid-Until "false";' >"$TMP/etc/apt/apt.conf.d/99-slurm-dws-no-valid-until"
fi
# No daemon may start inside the root while packages are installed.
cat >"$TMP/usr/sbin/policy-rc.d" <<'EOF'
#!/bin/sh
exit 101
EOF
chmod 755 "$TMP/usr/sbin/policy-rc.d"

log "apt-get install ${PACKAGES[*]} in the root"
in_root apt-get update -q
in_root apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"

if [ ! -s "$TMP/etc/munge/munge.key" ]; then
    log "creating the munge key"
    in_root /usr/sbin/mungekey --create --keyfile=/etc/munge/munge.key
fi
in_root chown munge:munge /etc/munge/munge.key
in_root chmod 600 /etc/munge/munge.key

in_root apt-get clean
rm -rf "$TMP"/var/lib/apt/lists/* "$TMP/usr/sbin/policy-rc.d"
unmount_below "$TMP"

version=$(chroot "$TMP" /usr/sbin/slurmctld -V | awk '{print $2}')
# shellcheck disable=SC2016 # dpkg-query's own ${Version}
package=$(chroot "$TMP" /usr/bin/dpkg-query -W -f='${Version}' slurmctld)
[ -n "$version" ] || die "slurmctld -V printed nothing in the new root"
{
    echo "format=$FORMAT"
    echo "suite=$SUITE"
    echo "slurm=$version"
    echo "package=$package"
    echo "packages=${PACKAGES[*]}"
    echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$TMP/$STAMP"

# Swap in the new root; the old one (another format, or --rebuild) goes only after.
if [ -e "$ROOT" ]; then
    remove_tree "$OLD"
    mv -T "$ROOT" "$OLD"
fi
mv -T "$TMP" "$ROOT"
remove_tree "$OLD"
trap - EXIT INT TERM

rm -f "$ROOT.debootstrap.log"
log "built $ROOT in $(($(date +%s) - start)) s, $(du -sh --one-file-system "$ROOT" | cut -f1)"
print_version "$ROOT"
