#!/usr/bin/env bash
# Installs what `make test` needs beyond the Rust toolchain, on Debian 12: Slurm 22.05
# (slurmctld, slurmd, the client commands) and munge, for the tests that run a real cluster,
# slurmdbd and MariaDB (tests/usage_slurmdbd_e2e.rs starts its own, on loopback), and
# systemd (systemd-analyze verifies the unit), and promtool (Debian's prometheus package: `make test`
# runs `promtool test rules` on conf/prometheus).
# Idempotent: installs only what is missing, and does nothing when everything is there.
#
# Not root and something missing: with CI=true that is an error (the Slurm tests must not be
# skipped in CI); otherwise a warning, and the Slurm tests skip themselves with a message.
set -euo pipefail

packages=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server systemd prometheus)
# file that must exist -> package that provides it (perl-base is essential; its perl clears the
# signal mask before a test cluster starts slurmd).
required=(
    /usr/sbin/slurmctld:slurmctld
    /usr/sbin/slurmd:slurmd
    /usr/bin/scontrol:slurm-client
    /usr/bin/sinfo:slurm-client
    /usr/bin/squeue:slurm-client
    /usr/bin/sbatch:slurm-client
    /usr/sbin/munged:munge
    /etc/munge/munge.key:munge
    /usr/bin/perl:perl-base
    /usr/sbin/slurmdbd:slurmdbd
    /usr/bin/sacct:slurm-client
    /usr/sbin/mariadbd:mariadb-server
    /usr/bin/mariadb-install-db:mariadb-server
    /usr/bin/systemd-analyze:systemd
    /usr/bin/promtool:prometheus
)

missing=()
for entry in "${required[@]}"; do
    [ -e "${entry%%:*}" ] || missing+=("${entry%%:*}")
done

if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-deps: Slurm and munge already installed ($(/usr/sbin/slurmctld -V 2>/dev/null || echo '?'))"
else
    echo "install-deps: missing ${missing[*]}"
    if [ "$(id -u)" -ne 0 ]; then
        if [ "${CI:-}" = true ]; then
            echo "install-deps: must run as root to install ${packages[*]}" >&2
            exit 1
        fi
        echo "install-deps: not root; not installing. The real-Slurm tests will be skipped." >&2
    elif ! command -v apt-get >/dev/null 2>&1; then
        echo "install-deps: no apt-get; install ${packages[*]} (Slurm 22.05+) yourself" >&2
        [ "${CI:-}" = true ] && exit 1
    else
        export DEBIAN_FRONTEND=noninteractive
        if ! apt-get install -y -q --no-install-recommends "${packages[@]}"; then
            apt-get update -q
            apt-get install -y -q --no-install-recommends "${packages[@]}"
        fi
        if [ ! -e /etc/munge/munge.key ]; then
            /usr/sbin/mungekey --create --keyfile=/etc/munge/munge.key
            chown munge:munge /etc/munge/munge.key
        fi
        echo "install-deps: installed $(/usr/sbin/slurmctld -V)"
    fi
fi

# make test runs cargo fmt and cargo clippy.
if command -v rustup >/dev/null 2>&1; then
    for component in rustfmt clippy; do
        if ! rustup component list --installed 2>/dev/null | grep -q "^${component}"; then
            rustup component add "${component}"
        fi
    done
fi
