//! The copy of the state that the daemon in charge keeps in `daemon.shared_state_dir`, and its adoption.
//!
//! The daemon in charge writes a consistent copy of its SQLite state there after a pass, at most every
//! [`COPY_EVERY`]: `VACUUM INTO` a temporary file in the same directory (a read transaction beside
//! hooks and passes), fsync, rename over [`COPY_FILE`], fsync the directory. A reader sees the old copy
//! or the new one, never half of one, and never a WAL file: the shared directory may be NFS, where
//! SQLite's WAL does not work. When a daemon takes charge from another's, it adopts the copy if it is
//! newer than the state it left itself (its [`STAMP_FILE`] in `state_dir`, touched when it writes or
//! adopts a copy), then reconciles with GCE and Slurm as after any restart.

use crate::store::Store;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// The copy's name in `shared_state_dir`.
pub const COPY_FILE: &str = "slurm-dws-state.db";

/// In `state_dir`: its modification time is when this daemon's state was last the copy's.
pub const STAMP_FILE: &str = "shared-state.stamp";

/// The least time between two copies: a takeover loses at most this much and a pass of state.
pub const COPY_EVERY: Duration = Duration::from_secs(5);

/// Whether `dir` is a directory this process can list and write (a file is made and removed).
pub fn check_dir(dir: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(dir).map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_dir() {
        return Err("not a directory".into());
    }
    std::fs::read_dir(dir).map_err(|e| format!("cannot list it: {e}"))?;
    let probe = dir.join(format!(".slurm-dws-probe-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| format!("cannot write there: {e}"))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Writes the copy (see the module docs); returns how long it took.
pub async fn write(store: &Store, dir: &Path, state_dir: &Path) -> Result<Duration, String> {
    let started = tokio::time::Instant::now();
    let tmp = dir.join(format!(".{COPY_FILE}.tmp-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    store.copy_into(&tmp).await.map_err(|e| e.to_string())?;
    let synced = std::fs::File::open(&tmp)
        .and_then(|f| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, dir.join(COPY_FILE)))
        .and_then(|()| std::fs::File::open(dir)?.sync_all());
    if let Err(e) = synced {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("{}: {e}", dir.display()));
    }
    touch_stamp(state_dir);
    Ok(started.elapsed())
}

/// Adopts the copy when it is newer than this daemon's own state; whether it did.
pub async fn adopt_if_newer(store: &Store, dir: &Path, state_dir: &Path) -> Result<bool, String> {
    let copy = dir.join(COPY_FILE);
    let Some(written) = modified(&copy) else { return Ok(false) };
    if modified(&state_dir.join(STAMP_FILE)).is_some_and(|own| own >= written) {
        return Ok(false);
    }
    store.adopt_copy(&copy).await.map_err(|e| e.to_string())?;
    touch_stamp(state_dir);
    Ok(true)
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn touch_stamp(state_dir: &Path) {
    let path = state_dir.join(STAMP_FILE);
    if let Err(e) = std::fs::write(&path, b"") {
        tracing::warn!(stamp = %path.display(), error = %e, "cannot mark which shared state this daemon has");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_that_cannot_be_written_is_named_why() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(check_dir(tmp.path()), Ok(()));
        let file = tmp.path().join("f");
        std::fs::write(&file, "").unwrap();
        assert_eq!(check_dir(&file), Err("not a directory".to_string()));
        assert!(check_dir(&tmp.path().join("missing")).unwrap_err().starts_with("cannot read it"));
    }
}
