//! Which Slurm slurm-dws talks to: `scontrol --version`, parsed, and what each release prints.
//!
//! `scontrol --version` prints one line such as `slurm 22.05.8`, or `slurm-wlm 22.05.8` as Debian
//! builds it, or with a packaging suffix (`slurm 24.11.5-1`). It reads slurm.conf before it prints
//! anything (22.05 measured: without a readable slurm.conf it fails, and with `SLURM_CONF` naming a
//! missing file it retries for 60 s), so it is run like every other command: time-boxed, with the
//! configured `SLURM_CONF`.
//!
//! | release        | nodes read from                | known to slurm-dws |
//! |----------------|--------------------------------|--------------------|
//! | before 22.05   | refused                        | no                 |
//! | 22.05          | `sinfo --json` (node array)    | yes                |
//! | 23.02 … 26.05  | `scontrol --json show nodes`   | yes                |
//! | after 26.05    | `scontrol --json show nodes`   | no: accepted, but [`SlurmVersion::is_known`] is false and the daemon warns once |

use std::fmt;
use std::str::FromStr;

/// A Slurm version, e.g. 24.11.5. Slurm names its releases `YY.MM` (22.05, 23.02, ...); the third
/// number is the maintenance release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SlurmVersion {
    pub major: u16,
    pub minor: u16,
    pub patch: u16,
}

/// The releases slurm-dws supports by name: their output shapes are known (22.05, 24.11 and 26.05
/// are the ones tested end to end; 25.11 is what slurm-gcp's images shipped before 26.05).
pub const KNOWN_RELEASES: [(u16, u16); 8] =
    [(22, 5), (23, 2), (23, 11), (24, 5), (24, 11), (25, 5), (25, 11), (26, 5)];

/// Where slurm-dws reads the state of every node from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeSource {
    /// `sinfo --json`: 22.05 prints one object per node. (23.02+ prints one object per
    /// (partition, state) group instead; [`super::sinfo`] reads both.)
    Sinfo,
    /// `scontrol --json show nodes` (23.02+; 22.05 has no `scontrol --json`): one object per node.
    ScontrolJson,
}

impl NodeSource {
    /// The command as an admin would type it.
    pub fn command(self) -> &'static str {
        match self {
            NodeSource::Sinfo => "sinfo --json",
            NodeSource::ScontrolJson => "scontrol --json show nodes",
        }
    }
}

impl SlurmVersion {
    /// The oldest release slurm-dws runs with.
    pub const OLDEST: SlurmVersion = SlurmVersion::new(22, 5, 0);
    /// The newest release slurm-dws knows; what `check-config --print-slurm-conf` prints for when
    /// it cannot find out which Slurm is installed.
    pub const LATEST_KNOWN: SlurmVersion = SlurmVersion::new(26, 5, 0);

    pub const fn new(major: u16, minor: u16, patch: u16) -> Self {
        SlurmVersion { major, minor, patch }
    }

    /// Reads the output of `scontrol --version` (or `sinfo --version`, ...). Liberal: the first
    /// word that starts with `MAJOR.MINOR` counts, whatever precedes it (`slurm`, `slurm-wlm`) and
    /// whatever follows the numbers (`-1`, `-0rc1`); a missing patch number is 0.
    pub fn parse(text: &str) -> Option<SlurmVersion> {
        text.split_whitespace().find_map(parse_word)
    }

    /// The release, without the maintenance number: `24.11`.
    pub fn release(&self) -> (u16, u16) {
        (self.major, self.minor)
    }

    /// The release as Slurm names it: `24.11`.
    pub fn release_name(&self) -> String {
        format!("{}.{:02}", self.major, self.minor)
    }

    /// At least [`SlurmVersion::OLDEST`].
    pub fn is_supported(&self) -> bool {
        *self >= SlurmVersion::OLDEST
    }

    /// One of [`KNOWN_RELEASES`]. A supported version that is not known (a release newer than
    /// slurm-dws) is used as the newest known one would be, and worth a warning.
    pub fn is_known(&self) -> bool {
        KNOWN_RELEASES.contains(&self.release())
    }

    /// Where this version's node states are best read from.
    pub fn node_source(&self) -> NodeSource {
        if self.release() < (23, 2) {
            NodeSource::Sinfo
        } else {
            NodeSource::ScontrolJson
        }
    }
}

/// `24.11.5`, `24.11.5-1`, `22.05` → the version; anything else → `None`.
fn parse_word(word: &str) -> Option<SlurmVersion> {
    let mut numbers = [0u16; 3];
    let mut count = 0;
    let mut rest = word;
    while count < 3 {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            break;
        }
        numbers[count] = rest[..digits].parse().ok()?;
        count += 1;
        rest = &rest[digits..];
        match rest.strip_prefix('.') {
            Some(after) if after.starts_with(|c: char| c.is_ascii_digit()) => rest = after,
            _ => break,
        }
    }
    // After the numbers: nothing, or a suffix that is not more version (`-1`, `-0rc1`, `~bpo`).
    let suffix_ok = rest.is_empty() || rest.starts_with(['-', '+', '~', '_']);
    (count >= 2 && suffix_ok).then(|| SlurmVersion::new(numbers[0], numbers[1], numbers[2]))
}

impl fmt::Display for SlurmVersion {
    /// As Slurm writes it: `22.05.8` (the minor number has two digits).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:02}.{}", self.major, self.minor, self.patch)
    }
}

/// `24.11`, `24.11.5`, `slurm 24.11.5`: what a user may give on a command line.
impl FromStr for SlurmVersion {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SlurmVersion::parse(s).ok_or_else(|| format!("{s:?} is not a Slurm version such as 24.11 or 22.05.8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(major: u16, minor: u16, patch: u16) -> SlurmVersion {
        SlurmVersion::new(major, minor, patch)
    }

    #[test]
    fn parses_what_scontrol_version_prints() {
        let cases = [
            // Debian bookworm's 22.05, measured on this project's test machines.
            ("slurm-wlm 22.05.8\n", Some(v(22, 5, 8))),
            ("slurm 22.05.8", Some(v(22, 5, 8))),
            ("slurm 24.11.5", Some(v(24, 11, 5))),
            ("slurm-wlm 24.11.5-1\n", Some(v(24, 11, 5))),
            ("slurm 23.02.0-0rc1", Some(v(23, 2, 0))),
            ("slurm 25.05", Some(v(25, 5, 0))),
            ("  slurm   26.05.1  ", Some(v(26, 5, 1))),
            ("slurm 21.08.8-2", Some(v(21, 8, 8))),
            ("", None),
            ("slurm", None),
            ("slurm 24", None),
            ("slurm version unknown", None),
            ("slurm 24.x", None),
            ("slurm 1.2.3.4", None),
            ("slurm 99999.1.1", None),
        ];
        for (text, want) in cases {
            assert_eq!(SlurmVersion::parse(text), want, "{text:?}");
        }
        // Captured from Debian's builds (testdata/paired/).
        let captured = [
            (include_str!("testdata/paired/scontrol-version-22.05.8.txt"), v(22, 5, 8)),
            (include_str!("testdata/paired/scontrol-version-24.11.5.txt"), v(24, 11, 5)),
            (include_str!("testdata/paired/scontrol-version-26.05.5.txt"), v(26, 5, 5)),
        ];
        for (text, want) in captured {
            assert!(text.starts_with("slurm-wlm "), "{text:?}");
            assert_eq!(SlurmVersion::parse(text), Some(want), "{text:?}");
        }
    }

    #[test]
    fn order_display_and_support() {
        assert!(v(22, 5, 8) < v(23, 2, 0));
        assert!(v(23, 11, 0) > v(23, 2, 9));
        assert!(v(24, 11, 5) > v(24, 11, 4));
        assert_eq!(v(22, 5, 8).to_string(), "22.05.8");
        assert_eq!(v(24, 11, 5).to_string(), "24.11.5");
        assert_eq!(v(23, 2, 7).release_name(), "23.02");
        assert_eq!("24.11".parse::<SlurmVersion>().unwrap(), v(24, 11, 0));
        assert!("24".parse::<SlurmVersion>().unwrap_err().contains("not a Slurm version"));

        // (version, supported, known, node source)
        use NodeSource::*;
        let cases = [
            (v(21, 8, 8), false, false, Sinfo),
            (v(22, 5, 0), true, true, Sinfo),
            (v(22, 5, 11), true, true, Sinfo),
            (v(23, 2, 8), true, true, ScontrolJson),
            (v(23, 11, 11), true, true, ScontrolJson),
            (v(24, 5, 8), true, true, ScontrolJson),
            (v(24, 11, 5), true, true, ScontrolJson),
            (v(25, 5, 3), true, true, ScontrolJson),
            (v(25, 11, 0), true, true, ScontrolJson),
            (v(26, 5, 5), true, true, ScontrolJson),
            (v(26, 11, 0), true, false, ScontrolJson),
            (v(27, 5, 1), true, false, ScontrolJson),
        ];
        for (version, supported, known, source) in cases {
            assert_eq!(version.is_supported(), supported, "{version}");
            assert_eq!(version.is_known(), known, "{version}");
            assert_eq!(version.node_source(), source, "{version}");
        }
        assert!(SlurmVersion::LATEST_KNOWN.is_known());
        assert!(KNOWN_RELEASES.iter().all(|&(a, b)| v(a, b, 0) <= SlurmVersion::LATEST_KNOWN));
    }
}
