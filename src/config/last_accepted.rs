//! The copy of the config the daemon last accepted, and how a hook finds it when the config file does not load.
//!
//! A typo in the config file would otherwise make every hook exit 2 and record nothing, where no admin
//! looks (slurmctld logs only `program exit status of 2`; the hook log's path is in the broken file),
//! while the daemon, which refused the reload, looks healthy. So the daemon writes the config it runs,
//! resolved (every default filled), to `state_dir/last-accepted.toml` — atomically: a temporary file,
//! fsync, rename — at start and at each accepted reload. A hook whose config does not load uses that
//! copy, records the call as usual and says so (event `config_fallback`, the hook log, syslog).
//!
//! Where a hook looks for the copy, in this order (the first that exists and loads wins):
//! 1. in the `state_dir` the broken file names, when it can be read that far: the file is TOML whose
//!    top-level `state_dir` is an absolute path (only some other value is wrong), or, when it is not
//!    TOML at all, a line `state_dir = "..."` before the first `[table]`;
//! 2. in the default state_dir, `/var/lib/slurm-dws`.
//!
//! A config file that is missing or unreadable is a broken config too: then only 2 applies.

use super::{Config, ConfigError};
use chrono::{DateTime, Utc};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The copy's file name in `state_dir`.
pub const FILE: &str = "last-accepted.toml";
/// The state_dir looked in when the broken file does not name one.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/slurm-dws";

/// Writes `cfg` to `cfg.state_dir/last-accepted.toml` atomically (0600); returns the path.
pub fn save(cfg: &Config, accepted_at: DateTime<Utc>) -> std::io::Result<PathBuf> {
    let path = cfg.state_dir.join(FILE);
    let tmp = cfg.state_dir.join(format!(".{FILE}.{}", std::process::id()));
    let text = format!(
        "# The config slurm-dws's daemon last accepted: {} at {}, resolved.\n\
         # Written by the daemon at start and at each accepted reload; hooks use it when the config\n\
         # file does not load. Do not edit: edit the config file.\n{}",
        cfg.source.display(),
        accepted_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        cfg.to_toml()
    );
    let written = (|| {
        let mut f =
            std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        // The rename itself is durable once the directory is.
        std::fs::File::open(&cfg.state_dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map(|()| path)
}

/// A config found in place of one that does not load.
#[derive(Debug)]
pub struct Fallback {
    pub config: Config,
    /// The copy it was read from.
    pub copy: PathBuf,
    /// When the daemon wrote the copy (its mtime).
    pub accepted_at: Option<DateTime<Utc>>,
}

/// The config to use instead of the one `broken` is about, if a copy can be found (module docs).
pub fn find(broken: &ConfigError) -> Option<Fallback> {
    let named = std::fs::read(broken.path())
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|text| state_dir_named_in(&text));
    let mut dirs: Vec<PathBuf> = named.into_iter().collect();
    if !dirs.iter().any(|d| d == Path::new(DEFAULT_STATE_DIR)) {
        dirs.push(PathBuf::from(DEFAULT_STATE_DIR));
    }
    dirs.into_iter().find_map(|dir| {
        let copy = dir.join(FILE);
        let text = super::read_bounded(&copy, super::MAX_CONFIG_BYTES).ok()?;
        let config = Config::from_toml_str(&text, &copy).ok()?;
        let accepted_at = std::fs::metadata(&copy).and_then(|m| m.modified()).ok().map(DateTime::<Utc>::from);
        Some(Fallback { config, copy, accepted_at })
    })
}

/// The absolute `state_dir` a config text names, read as far as it can be (module docs).
pub fn state_dir_named_in(text: &str) -> Option<PathBuf> {
    let value = match text.parse::<toml::Table>() {
        Ok(table) => table.get("state_dir")?.as_str()?.to_string(),
        Err(_) => text.lines().map(str::trim).take_while(|l| !l.starts_with('[')).find_map(|l| {
            let rest = l.strip_prefix("state_dir")?.trim_start().strip_prefix('=')?.trim_start();
            let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
            let inner = &rest[1..];
            Some(inner[..inner.find(quote)?].to_string())
        })?,
    };
    let path = PathBuf::from(value);
    path.is_absolute().then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (broken config text, the state_dir a hook looks in first).
    #[test]
    fn the_state_dir_is_read_from_a_broken_file_as_far_as_it_goes() {
        for (text, want) in [
            // Valid TOML, a bad value elsewhere.
            ("state_dir = \"/srv/dws\"\ncluster_name = \"BAD NAME\"\n", Some("/srv/dws")),
            ("cluster_name = \"hpc\"\nstate_dir = '/srv/dws'\n[gcp]\nbogus = 1\n", Some("/srv/dws")),
            // Not TOML: the line before the first table.
            (
                "cluster_name = \"hpc\"\n  state_dir = \"/srv/dws\" # here\n[gcp\nproject = \n",
                Some("/srv/dws"),
            ),
            ("[gcp\nstate_dir = \"/srv/dws\"\n", None),
            // Not named, relative, or not a string: the default is all there is.
            ("cluster_name = \"hpc\"\n", None),
            ("state_dir = \"relative\"\n", None),
            ("state_dir = 5\n", None),
            ("state_dir = \"/srv/dws\n[gcp", None),
            ("", None),
        ] {
            assert_eq!(state_dir_named_in(text), want.map(PathBuf::from), "{text:?}");
        }
    }

    #[test]
    fn a_saved_copy_loads_back_to_the_same_config() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "cluster_name = \"hpc\"\nstate_dir = \"{}\"\n[gcp]\nproject = \"p\"\nregion = \"us-central1\"\n\
             [[nodeset]]\nname = \"a\"\ninstance_template = \"projects/p/global/instanceTemplates/t\"\n\
             zones = [\"us-central1-a\"]\nnode_count_dynamic_max = 4\n",
            dir.path().display()
        );
        let cfg = Config::from_toml_str(&text, &dir.path().join("slurm-dws.toml")).unwrap();
        let copy = save(&cfg, DateTime::UNIX_EPOCH).unwrap();
        assert_eq!(copy, dir.path().join(FILE));
        // A broken file in the same state_dir finds it.
        let broken_path = dir.path().join("broken.toml");
        std::fs::write(&broken_path, text.replace("[gcp]", "[gcp")).unwrap();
        let err = Config::load(Some(&broken_path)).unwrap_err();
        let fb = find(&err).expect("the copy is found through the broken file's state_dir");
        assert_eq!(fb.copy, copy);
        assert_eq!(Config { source: cfg.source.clone(), ..fb.config }, cfg);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&copy).unwrap().permissions().mode() & 0o777, 0o600);
    }
}
