//! Finding the workspace's binaries from a test, benchmark or example of the root package.
//!
//! Cargo tells a package's own tests where its binaries are (`CARGO_BIN_EXE_slurm-dws`), but not
//! where another member's are: `slurm-dws-sim` belongs to the `gce-sim` member. It is built into
//! the same target directory and profile, so it is found beside `slurm-dws`; `cargo build`,
//! `cargo test` and `make` build every member, and a run that built only the root package (for
//! example `cargo test -p slurm-dws --test e2e`) builds the simulator here, once.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The simulator's binary name.
pub const SIM_BIN_NAME: &str = "slurm-dws-sim";

/// `slurm-dws-sim` of the same build as `product_bin` (a path to `slurm-dws`), built with cargo if
/// it is not there yet or older than `product_bin` ([`stale`]). Panics with what to run when it can be neither found nor built.
pub fn sim_bin(product_bin: &Path) -> PathBuf {
    static BUILD: Mutex<()> = Mutex::new(());
    let profile_dir = product_bin.parent().expect("a binary path has a directory");
    let sim = profile_dir.join(SIM_BIN_NAME);
    let _one_build_at_a_time = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    if !stale(&sim, product_bin) {
        return sim;
    }
    let target_dir = profile_dir.parent().expect("a profile directory has a target directory");
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--quiet", "-p", "gce-sim", "--bin", SIM_BIN_NAME, "--manifest-path"])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(target_dir);
    match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => {}
        Some(profile) => {
            cmd.args(["--profile", profile]);
        }
        None => {}
    }
    let status = cmd.status();
    assert!(
        matches!(status, Ok(s) if s.success()) && sim.exists(),
        "{} is not built and `{cmd:?}` did not build it ({status:?}): run `cargo build --workspace --bins`",
        sim.display()
    );
    // Cargo leaves a simulator that was up to date untouched: marked fresh, it is not built again
    // until `slurm-dws` is rebuilt.
    // (By path, never opened for writing: another test may be starting it this moment.)
    let now = nix::sys::time::TimeSpec::UTIME_NOW;
    let _ = nix::sys::stat::utimensat(None, &sim, &now, &now, nix::sys::stat::UtimensatFlags::FollowSymlink);
    sim
}

/// A simulator that is missing or older than `slurm-dws` may not be of the same sources (a run that
/// built only the root package, such as `cargo bench --bench budgets`, leaves it as it was): cargo
/// is asked to build it, which does nothing when it is up to date.
fn stale(sim: &Path, product_bin: &Path) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    match (modified(sim), modified(product_bin)) {
        (None, _) => true,
        (Some(sim), Some(product)) => sim < product,
        (Some(_), None) => false,
    }
}
