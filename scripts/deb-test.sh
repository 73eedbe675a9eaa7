#!/bin/sh
# Installs the newest target/debian/slurm-dws_*.deb into a throwaway root with `dpkg -x` (the
# package's files, no maintainer scripts: nothing on this machine changes) and checks it from there:
# the binary runs (`--version`), is stripped and at most DEB_TEST_MAX_MB (20, the shipped budget) MB,
# its hook links resolve to it,
# `check-config` takes the packaged config and finds the packaged hooks, the unit runs /usr/sbin,
# man pages and completions are in place, the config is a conffile, and the postinst starts nothing.
# Usage: scripts/deb-test.sh [DIR holding the .deb]   (`make deb-test` builds it first)
set -eu
dir=${1:-target/debian}
deb=$(ls -t "$dir"/slurm-dws_*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || { echo "deb-test: no slurm-dws_*.deb in $dir: run make deb" >&2; exit 1; }
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
fail() { echo "deb-test: FAILED: $*" >&2; exit 1; }

dpkg -x "$deb" "$root"
bin="$root/usr/sbin/slurm-dws"
"$bin" --version | grep -qx "slurm-dws [0-9.]*" || fail "--version"
size=$(stat -c %s "$bin")
max_mb=${DEB_TEST_MAX_MB:-20}
[ "$size" -le $((max_mb * 1048576)) ] || fail "the binary is $size bytes, above $max_mb MB"
file "$bin" | grep -q "not stripped" && fail "the binary is not stripped"
for hook in resume suspend resume-fail; do
    [ "$(readlink "$root/usr/sbin/slurm-dws-$hook")" = slurm-dws ] || fail "hook link slurm-dws-$hook"
done

# The packaged config as shipped is valid; with Slurm's commands and slurm.conf where it says, the
# machine checks pass too and find the packaged hooks.
"$bin" check-config --config-only "$root/etc/slurm-dws/slurm-dws.toml" >/dev/null || fail "check-config --config-only"
mkdir -p "$root/fake-slurm"
for c in scontrol squeue sinfo; do printf '#!/bin/sh\n' > "$root/fake-slurm/$c"; chmod 755 "$root/fake-slurm/$c"; done
echo "ClusterName=hpc" > "$root/fake-slurm/slurm.conf"
sed -e "s|^bin_dir = .*|bin_dir = \"$root/fake-slurm\"|" -e "s|^conf = .*|conf = \"$root/fake-slurm/slurm.conf\"|" \
    -e 's|^service_user = .*|service_user = ""|' \
    "$root/etc/slurm-dws/slurm-dws.toml" > "$root/fake-slurm/slurm-dws.toml"
out=$("$bin" check-config --hook-dir "$root/usr/sbin" "$root/fake-slurm/slurm-dws.toml") || fail "check-config: $out"
out=$("$bin" check-config --print-slurm-conf --slurm-version 24.11 "$root/fake-slurm/slurm-dws.toml") \
    || fail "check-config --print-slurm-conf (hooks beside the packaged binary): $out"
echo "$out" | grep -qx "ResumeProgram=$root/usr/sbin/slurm-dws-resume" || fail "ResumeProgram line: $out"

grep -q '^ExecStart=/usr/sbin/slurm-dws --config /etc/slurm-dws/slurm-dws.toml daemon$' \
    "$root/usr/lib/systemd/system/slurm-dws.service" || fail "the unit's ExecStart"
grep -q /usr/local "$root/usr/lib/systemd/system/slurm-dws.service" && fail "the unit names /usr/local"
for f in usr/lib/tmpfiles.d/slurm-dws.conf usr/lib/sysusers.d/slurm-dws.conf \
    usr/share/man/man1/slurm-dws.1.gz usr/share/man/man1/slurm-dws-check-config.1.gz \
    usr/share/bash-completion/completions/slurm-dws usr/share/zsh/vendor-completions/_slurm-dws \
    usr/share/fish/vendor_completions.d/slurm-dws.fish usr/share/doc/slurm-dws/operations.md \
    usr/share/doc/slurm-dws/migrating-from-slurm-gcp.md usr/share/doc/slurm-dws/CHANGELOG.md \
    usr/share/doc/slurm-dws/examples/slurm.conf.example; do
    [ -s "$root/$f" ] || fail "missing $f"
done

ctl="$root/control"
dpkg-deb -e "$deb" "$ctl"
grep -qx /etc/slurm-dws/slurm-dws.toml "$ctl/conffiles" || fail "the config is not a conffile"
grep -q "daemon-reload" "$ctl/postinst" || fail "the postinst does not reload systemd"
grep -v '^[[:space:]]*#' "$ctl/postinst" | grep -Eq "systemctl (start|enable|restart|reload)|deb-systemd-invoke" \
    && fail "the postinst starts the daemon"
echo "deb-test: ok: $(basename "$deb"), /usr/sbin/slurm-dws $size bytes"
