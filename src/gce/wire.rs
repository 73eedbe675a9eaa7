//! The wire's building blocks every Compute type shares: int64 strings, GCE timestamps, durations
//! and the last segment of a resource URL.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Serde helpers for int64 fields, which the Compute API encodes as JSON strings.
///
/// Serializes as a string (what GCE sends and expects); deserializes from a string or a
/// number, because being lenient on input costs nothing and some proxies re-encode.
pub mod int64_string {
    use serde::{de, Deserialize, Deserializer, Serializer};

    /// Writes `v` as a JSON string.
    pub fn serialize<S: Serializer>(v: &i64, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(v)
    }

    /// Reads a JSON string or number.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Num(i64),
            Str(String),
        }
        match Repr::deserialize(d)? {
            Repr::Num(n) => Ok(n),
            Repr::Str(s) => s.trim().parse().map_err(de::Error::custom),
        }
    }
}

pub(super) fn is_false(b: &bool) -> bool {
    !*b
}

/// Last path segment of a resource URL (`.../zones/us-central1-a` → `us-central1-a`).
pub fn last_segment(url: &str) -> &str {
    url.rsplit('/').next().unwrap_or(url)
}

/// Parses a GCE RFC 3339 timestamp (`2025-01-02T03:04:05.678-08:00`).
pub fn parse_timestamp(s: &str) -> Option<DateTime<Utc>> {
    gce_timestamp(s).or_else(|| DateTime::parse_from_rfc3339(s).ok().map(|t| t.with_timezone(&Utc)))
}

/// The form GCE writes, `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, read by position (a pass reads
/// two for each of 10,000 VMs, and chrono's RFC 3339 parser took ~2% of its CPU). `None` for
/// anything else, which [`parse_timestamp`] hands to chrono: what this reads, chrono reads the same.
pub(super) fn gce_timestamp(s: &str) -> Option<DateTime<Utc>> {
    let b = s.as_bytes();
    let number = |from: usize, to: usize| -> Option<u32> {
        b.get(from..to)?
            .iter()
            .try_fold(0u32, |n, &c| c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0')))
    };
    let separators = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if separators.iter().any(|&(at, c)| b.get(at) != Some(&c)) {
        return None;
    }
    let date = chrono::NaiveDate::from_ymd_opt(number(0, 4)? as i32, number(5, 7)?, number(8, 10)?)?;
    let (hour, minute, second) = (number(11, 13)?, number(14, 16)?, number(17, 19)?);
    let mut at = 19;
    let mut nanos = 0;
    if b.get(at) == Some(&b'.') {
        let digits = b[at + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if !(1..=9).contains(&digits) {
            return None;
        }
        nanos = number(at + 1, at + 1 + digits)? * 10u32.pow(9 - digits as u32);
        at += 1 + digits;
    }
    let offset = match b.get(at..)? {
        b"Z" | b"z" => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (hours, minutes) = (number(at + 1, at + 3)?, number(at + 4, at + 6)?);
            if hours > 23 || minutes > 59 {
                return None;
            }
            let secs = i64::from(hours * 3600 + minutes * 60);
            if *sign == b'-' {
                -secs
            } else {
                secs
            }
        }
        _ => return None,
    };
    let local = date.and_hms_nano_opt(hour, minute, second, nanos)?;
    Some(local.and_utc() - chrono::TimeDelta::seconds(offset))
}

/// `Duration` (protobuf): `seconds` is int64 (a string on the wire), `nanos` int32.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GceDuration {
    #[serde(with = "int64_string")]
    pub seconds: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nanos: Option<i32>,
}

impl GceDuration {
    /// A whole number of seconds, as slurm-dws always sends.
    pub fn from_secs(seconds: i64) -> Self {
        Self { seconds, nanos: None }
    }
}
