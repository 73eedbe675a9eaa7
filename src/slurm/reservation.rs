//! Reservations via `scontrol -o show reservation`, read the same way on every version (22.05 has
//! no `scontrol --json`; the one-line text has not changed since).
//!
//! Measured on 22.05.8: one line per reservation, `Key=Value` pairs separated by spaces:
//!
//! ```text
//! ReservationName=dws-eol-x StartTime=2026-11-24T10:00:00 EndTime=2026-11-24T10:10:00 Duration=00:10:00 Nodes=dws-a-[0-1] NodeCnt=2 CoreCnt=2 Features=(null) PartitionName=(null) Flags=MAINT,IGNORE_JOBS,SPEC_NODES TRES=cpu=2 Users=root Groups=(null) Accounts=(null) Licenses=(null) State=INACTIVE BurstBuffer=(null) Watts=n/a MaxStartDelay=(null)
//! ```
//!
//! and `No reservations in the system` when there are none. 24.11.5 prints the same, without
//! `Watts=`. Times carry no zone: scontrol prints
//! and parses them in the local time zone of the scontrol process (`TZ`). [`super::Slurm`] runs
//! every command with `TZ=UTC`, so here a naive time is UTC, whatever the host's zone.

use chrono::{DateTime, NaiveDateTime, Utc};

use super::ParseError;

/// One reservation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    pub name: String,
    /// The reserved nodes, a hostlist expression (empty if the reservation has none).
    pub nodes: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// Upper case as Slurm prints them, e.g. `MAINT`, `IGNORE_JOBS`, `SPEC_NODES`.
    pub flags: Vec<String>,
    /// `ACTIVE` or `INACTIVE`.
    pub state: String,
}

const WHAT: &str = "scontrol show reservation";

/// The format slurm-dws gives scontrol for reservation times (read as UTC, see the module docs).
pub(crate) fn format_time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S").to_string()
}

/// Parses `scontrol -o show reservation` output (times in UTC).
pub fn parse_reservations(text: &str) -> Result<Vec<Reservation>, ParseError> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("No reservations"))
        .map(parse_line)
        .collect()
}

/// Calls `each` with every reservation line of `scontrol -o show reservation`'s output as it streams
/// (trimmed; blank lines and "No reservations in the system" skipped): 10,000 end-of-life
/// reservations are megabytes of text, never held whole.
fn each_line(
    text: &mut dyn std::io::BufRead,
    mut each: impl FnMut(&[u8]) -> Result<(), ParseError>,
) -> Result<(), ParseError> {
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = text.read_until(b'\n', &mut buf).map_err(|e| ParseError::new(WHAT, e))?;
        if n == 0 {
            return Ok(());
        }
        let line = buf.trim_ascii();
        if !line.is_empty() && !line.starts_with(b"No reservations") {
            each(line)?;
        }
    }
}

/// [`parse_reservations`] from a stream, one line at a time. Bytes that are not UTF-8 are replaced,
/// as in a lossy read.
pub fn read_reservations(text: &mut dyn std::io::BufRead) -> Result<Vec<Reservation>, ParseError> {
    let mut out = Vec::new();
    each_line(text, |line| {
        out.push(parse_line(&String::from_utf8_lossy(line))?);
        Ok(())
    })?;
    Ok(out)
}

/// The names of [`read_reservations`]' reservations, and nothing else: each line's `ReservationName=`
/// value (the first field scontrol prints; any field of the line when it is not first), without
/// decoding the rest of the line. A line without one is the same error as there.
pub fn read_names(text: &mut dyn std::io::BufRead) -> Result<Vec<String>, ParseError> {
    const KEY: &[u8] = b"ReservationName=";
    let mut out = Vec::new();
    each_line(text, |line| {
        let value = if line.starts_with(KEY) {
            Some(&line[KEY.len()..])
        } else {
            line.windows(KEY.len() + 1)
                .position(|w| w[0].is_ascii_whitespace() && w[1..].eq_ignore_ascii_case(KEY))
                .map(|at| &line[at + 1 + KEY.len()..])
        };
        let name = value.map(|v| v.split(|b| b.is_ascii_whitespace()).next().unwrap_or_default());
        match name {
            Some(name) if !name.is_empty() => {
                out.push(String::from_utf8_lossy(name).into_owned());
                Ok(())
            }
            _ => {
                let line = String::from_utf8_lossy(line);
                Err(ParseError::new(WHAT, format!("no ReservationName in `{line}`")))
            }
        }
    })?;
    Ok(out)
}

fn parse_line(line: &str) -> Result<Reservation, ParseError> {
    let pairs = split_pairs(line);
    let get = |key: &str| pairs.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v.as_str());
    let name = get("ReservationName")
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ParseError::new(WHAT, format!("no ReservationName in `{line}`")))?
        .to_string();
    let time = |key: &str| -> Result<DateTime<Utc>, ParseError> {
        let raw = get(key).ok_or_else(|| ParseError::new(WHAT, format!("reservation {name}: no {key}")))?;
        NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M:%S")
            .map(|t| t.and_utc())
            .map_err(|e| ParseError::new(WHAT, format!("reservation {name}: {key}={raw}: {e}")))
    };
    let nodes = match get("Nodes") {
        None | Some("(null)") => String::new(),
        Some(n) => n.to_string(),
    };
    let flags = match get("Flags") {
        None | Some("(null)") | Some("") => Vec::new(),
        Some(f) => f.split(',').map(str::to_string).collect(),
    };
    Ok(Reservation {
        start: time("StartTime")?,
        end: time("EndTime")?,
        nodes,
        flags,
        state: get("State").unwrap_or_default().to_string(),
        name,
    })
}

/// Splits a one-line `Key=Value Key=Value` record. A word that does not start with `Key=` (a
/// value with spaces, e.g. a comment) continues the previous value; the first `=` splits key
/// from value, so `TRES=cpu=2` is `TRES` → `cpu=2`.
fn split_pairs(line: &str) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for word in line.split_whitespace() {
        match word.split_once('=') {
            Some((key, value)) if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric()) => {
                pairs.push((key.to_string(), value.to_string()));
            }
            _ => {
                if let Some((_, value)) = pairs.last_mut() {
                    value.push(' ');
                    value.push_str(word);
                }
            }
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    /// Captured verbatim from a live 22.05.8 slurmctld (TZ=UTC).
    const CAPTURED: &str = "ReservationName=dws-eol-x StartTime=2026-11-24T10:00:00 EndTime=2026-11-24T10:10:00 Duration=00:10:00 Nodes=dws-a-[0-1] NodeCnt=2 CoreCnt=2 Features=(null) PartitionName=(null) Flags=MAINT,IGNORE_JOBS,SPEC_NODES TRES=cpu=2 Users=root Groups=(null) Accounts=(null) Licenses=(null) State=INACTIVE BurstBuffer=(null) Watts=n/a MaxStartDelay=(null)
ReservationName=r2 StartTime=2026-11-23T10:24:43 EndTime=2026-11-23T11:24:43 Duration=01:00:00 Nodes=dws-a-1 NodeCnt=1 CoreCnt=1 Features=(null) PartitionName=(null) Flags=MAINT,IGNORE_JOBS,SPEC_NODES TRES=cpu=1 Users=root Groups=(null) Accounts=(null) Licenses=(null) State=INACTIVE BurstBuffer=(null) Watts=n/a MaxStartDelay=(null)
";

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
    }

    #[test]
    fn names_alone_are_the_names_of_the_full_parse() {
        let full: Vec<String> = parse_reservations(CAPTURED).unwrap().into_iter().map(|r| r.name).collect();
        assert_eq!(read_names(&mut CAPTURED.as_bytes()).unwrap(), full);
        let odd =
            "\n  No reservations in the system\nStartTime=2026-11-24T10:00:00 reservationname=late x=1\n";
        assert_eq!(read_names(&mut odd.as_bytes()).unwrap(), vec!["late".to_string()]);
        for bad in ["StartTime=2026-11-24T10:00:00 Nodes=a\n", "ReservationName= Nodes=a\n"] {
            let err = read_names(&mut bad.as_bytes()).unwrap_err().to_string();
            assert!(err.contains("no ReservationName"), "{bad:?}: {err}");
            assert!(parse_reservations(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn captured_output() {
        let got = parse_reservations(CAPTURED).unwrap();
        let flags: Vec<String> = ["MAINT", "IGNORE_JOBS", "SPEC_NODES"].map(String::from).to_vec();
        assert_eq!(
            got,
            vec![
                Reservation {
                    name: "dws-eol-x".into(),
                    nodes: "dws-a-[0-1]".into(),
                    start: utc(2026, 11, 24, 10, 0, 0),
                    end: utc(2026, 11, 24, 10, 10, 0),
                    flags: flags.clone(),
                    state: "INACTIVE".into(),
                },
                Reservation {
                    name: "r2".into(),
                    nodes: "dws-a-1".into(),
                    start: utc(2026, 11, 23, 10, 24, 43),
                    end: utc(2026, 11, 23, 11, 24, 43),
                    flags,
                    state: "INACTIVE".into(),
                },
            ]
        );
    }

    /// 24.11.5 (see testdata/README.md): one future and one active end-of-life reservation, and
    /// the message when there are none.
    #[test]
    fn captured_24_11_output() {
        let text = include_str!("testdata/scontrol-o-show-reservation-24.11.txt");
        let flags: Vec<String> = ["MAINT", "IGNORE_JOBS", "SPEC_NODES"].map(String::from).to_vec();
        assert_eq!(
            parse_reservations(text).unwrap(),
            vec![
                Reservation {
                    name: "slurm-dws-eol-lab-a3-0".into(),
                    nodes: "lab-a3-0".into(),
                    start: utc(2026, 11, 24, 10, 0, 0),
                    end: utc(2026, 11, 24, 10, 10, 0),
                    flags: flags.clone(),
                    state: "INACTIVE".into(),
                },
                Reservation {
                    name: "slurm-dws-eol-lab-a3-1".into(),
                    nodes: "lab-a3-1".into(),
                    start: utc(2026, 11, 23, 19, 37, 48),
                    end: utc(2026, 11, 23, 19, 47, 48),
                    flags,
                    state: "ACTIVE".into(),
                },
            ]
        );
        assert_eq!(read_reservations(&mut text.as_bytes()).unwrap(), parse_reservations(text).unwrap());
        let none = include_str!("testdata/scontrol-o-show-reservation-none-24.11.txt");
        assert_eq!(none, "No reservations in the system\n");
        assert!(parse_reservations(none).unwrap().is_empty());
        assert!(read_reservations(&mut none.as_bytes()).unwrap().is_empty());
    }

    /// `scontrol create ReservationName=maint-capture StartTime=now Duration=60 Nodes=t-a-[2-3]
    /// Flags=MAINT,IGNORE_JOBS Users=root` on 22.05.8 and 24.11.5 (testdata/paired/): the same
    /// record, with `Watts=n/a` on 22.05 only; both add SPEC_NODES.
    #[test]
    fn paired_captures() {
        let cases = [
            (include_str!("testdata/paired/scontrol-o-show-reservation-22.05.8-maint.txt"), (22, 17, 56)),
            (include_str!("testdata/paired/scontrol-o-show-reservation-24.11.5-maint.txt"), (22, 17, 25)),
        ];
        for (text, (h, m, s)) in cases {
            assert_eq!(text.contains("Watts=n/a"), text == cases[0].0);
            assert_eq!(
                parse_reservations(text).unwrap(),
                vec![Reservation {
                    name: "maint-capture".into(),
                    nodes: "t-a-[2-3]".into(),
                    start: utc(2026, 11, 23, h, m, s),
                    end: utc(2026, 11, 23, h + 1, m, s),
                    flags: ["MAINT", "IGNORE_JOBS", "SPEC_NODES"].map(String::from).to_vec(),
                    state: "ACTIVE".into(),
                }]
            );
        }
    }

    /// 26.05.5 (see testdata/README.md): slurm-dws's end-of-life reservation on a static node, with
    /// the `AllowedPartitions=` and `QOS=` that 26.05 inserts between `TRES=` and `Users=`.
    #[test]
    fn captured_26_05_output() {
        let text = include_str!("testdata/scontrol-o-show-reservation-26.05-eol.txt");
        assert!(text.contains(" TRES=cpu=1 AllowedPartitions=(null) QOS=(null) Users=root "), "{text}");
        assert_eq!(
            parse_reservations(text).unwrap(),
            vec![Reservation {
                name: "slurm-dws-eol-lab-s-0".into(),
                nodes: "lab-s-0".into(),
                start: utc(2026, 12, 2, 17, 4, 16),
                end: utc(2026, 12, 2, 18, 14, 16),
                flags: ["MAINT", "IGNORE_JOBS", "SPEC_NODES"].map(String::from).to_vec(),
                state: "INACTIVE".into(),
            }]
        );
    }

    #[test]
    fn read_from_a_stream_as_from_text() {
        let text = format!("{CAPTURED}\n\n{CAPTURED}\r\n");
        let streamed = read_reservations(&mut std::io::BufReader::with_capacity(7, text.as_bytes())).unwrap();
        assert_eq!(streamed, parse_reservations(&text).unwrap());
        assert_eq!(streamed.len(), 2 * parse_reservations(CAPTURED).unwrap().len());
        let bad = read_reservations(&mut "Nodes=x-1\n".as_bytes()).unwrap_err();
        assert!(bad.to_string().contains("no ReservationName"), "{bad}");
    }

    #[test]
    fn empty_and_odd_lines() {
        assert!(parse_reservations("No reservations in the system\n").unwrap().is_empty());
        assert!(parse_reservations("").unwrap().is_empty());
        // A value with spaces, a node-less reservation, lower-case keys, no flags.
        let line = "ReservationName=r Comment=two words here StartTime=2026-01-01T00:00:00 \
                    endtime=2026-01-01T01:00:00 Nodes=(null) Flags=(null) State=ACTIVE";
        let r = &parse_reservations(line).unwrap()[0];
        assert_eq!(r.nodes, "");
        assert!(r.flags.is_empty());
        assert_eq!(r.end, utc(2026, 1, 1, 1, 0, 0));
        assert_eq!(split_pairs(line)[1], ("Comment".to_string(), "two words here".to_string()));
    }

    #[test]
    fn malformed_records_name_the_problem() {
        let cases = [
            ("StartTime=2026-01-01T00:00:00", "no ReservationName"),
            ("ReservationName=r EndTime=2026-01-01T00:00:00", "reservation r: no StartTime"),
            ("ReservationName=r StartTime=Unknown EndTime=2026-01-01T00:00:00", "StartTime=Unknown"),
        ];
        for (text, want) in cases {
            let err = parse_reservations(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn format_time_is_what_scontrol_reads() {
        assert_eq!(format_time(utc(2026, 12, 1, 9, 5, 7)), "2026-12-01T09:05:07");
    }
}
