//! Plain-text tables for people (`--json` is for scripts), the way `sinfo` and `squeue` users expect
//! them: a listing is a set of records whose fields are the `--json` field names; `-o/--format` picks
//! fields, `-l/--long` shows more of them, `-h/--noheader` drops the header, `--sort` orders by a field,
//! and the default table fits the terminal (its free-text column is cut, never a name).

use chrono::{DateTime, Local, Utc};
use serde_json::{Map, Value};

/// How a field's value is shown in a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// As it is (`-` for null).
    Text,
    /// `yes` / `no`.
    Bool,
    /// An RFC 3339 time: its age (`5m ago`, `in 2h3m`); with `--long`, local time and age.
    Time,
    /// A time shown as how long ago it was (`5m`), e.g. how long a node has been in its state.
    Age,
    /// Seconds shown as a duration (`2h3m`).
    Duration,
    /// An array of node names, compressed to a hostlist (`hpc-a-[0-3]`).
    Hostlist,
}

/// A field of a listing: its JSON name, its table header, how it shows, and in which tables.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    pub name: &'static str,
    pub header: &'static str,
    pub kind: Kind,
    /// In the default table.
    pub default: bool,
    /// In the `--long` table.
    pub long: bool,
    /// Free text (an error, a message): cut to fit the terminal.
    pub elastic: bool,
}

impl Field {
    /// A field of the default and the long table.
    pub const fn both(name: &'static str, header: &'static str, kind: Kind) -> Field {
        Field { name, header, kind, default: true, long: true, elastic: false }
    }

    /// A field of the long table only.
    pub const fn long(name: &'static str, header: &'static str, kind: Kind) -> Field {
        Field { name, header, kind, default: false, long: true, elastic: false }
    }

    /// A field shown only when `-o` names it.
    pub const fn asked(name: &'static str, header: &'static str, kind: Kind) -> Field {
        Field { name, header, kind, default: false, long: false, elastic: false }
    }

    /// Free text, cut to fit the terminal.
    pub const fn elastic(self) -> Field {
        Field { elastic: true, ..self }
    }
}

/// How a listing is printed: the options every listing takes.
#[derive(Debug, Clone)]
pub struct Listing {
    pub json: bool,
    /// Sort by this field.
    pub sort: Option<String>,
    /// `-o/--format`: these fields, in this order (comma-separated).
    pub format: Option<String>,
    pub noheader: bool,
    pub long: bool,
    /// The terminal's width in columns.
    pub width: usize,
}

impl Default for Listing {
    fn default() -> Listing {
        Listing { json: false, sort: None, format: None, noheader: false, long: false, width: 80 }
    }
}

/// A fixed table (not a listing): a header and rows of cells, aligned.
#[derive(Debug, Default)]
pub struct Table {
    pub header: Vec<&'static str>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&'static str]) -> Table {
        Table { header: header.to_vec(), rows: Vec::new() }
    }

    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// The table as aligned text, one line per row (nothing cut).
    pub fn render(&self) -> String {
        let header: Vec<String> = self.header.iter().map(|h| h.to_string()).collect();
        render(Some(&header), &self.rows, &vec![false; header.len()], usize::MAX)
    }
}

/// Checks `-o` and `--sort` against `fields` before anything is read: an unknown field is an error
/// naming it and the fields there are, whether or not the state can be read.
pub fn check(what: &str, fields: &[Field], l: &Listing) -> Result<(), String> {
    print(what, fields, Vec::new(), &Listing { json: true, ..l.clone() }, DateTime::UNIX_EPOCH).map(|_| ())
}

/// Prints `records` (JSON objects whose keys are `fields`' names) as `l` asks: JSON (only the `-o`
/// fields when given) or a table. An unknown field in `-o` or `--sort` is an error naming it and the
/// fields there are.
pub fn print(
    what: &str,
    fields: &[Field],
    mut records: Vec<Value>,
    l: &Listing,
    now: DateTime<Utc>,
) -> Result<String, String> {
    let lookup = |name: &str| -> Result<&Field, String> {
        fields.iter().find(|f| f.name == name).ok_or_else(|| {
            format!(
                "unknown field '{}' for {what} (fields: {})",
                crate::hostlist::escape_control(name),
                fields.iter().map(|f| f.name).collect::<Vec<_>>().join(", ")
            )
        })
    };
    let chosen: Vec<&Field> = match &l.format {
        Some(list) => {
            let names: Vec<&str> = list.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
            if names.is_empty() {
                return Err(format!("--format needs at least one field name (fields: {})", names_of(fields)));
            }
            names.into_iter().map(lookup).collect::<Result<_, _>>()?
        }
        None => fields.iter().filter(|f| if l.long { f.long } else { f.default }).collect(),
    };
    if let Some(key) = &l.sort {
        let f = lookup(key)?;
        records.sort_by(|a, b| compare(&a[f.name], &b[f.name]));
    }
    if l.json {
        if l.format.is_some() {
            records = records
                .into_iter()
                .map(|r| {
                    let m: Map<String, Value> =
                        chosen.iter().map(|f| (f.name.to_string(), r[f.name].clone())).collect();
                    Value::Object(m)
                })
                .collect();
        }
        return Ok(serde_json::to_string_pretty(&Value::Array(records)).unwrap_or_default() + "\n");
    }
    let rows: Vec<Vec<String>> =
        records.iter().map(|r| chosen.iter().map(|f| cell(f, &r[f.name], l.long, now)).collect()).collect();
    let header: Vec<String> = chosen.iter().map(|f| f.header.to_string()).collect();
    let elastic: Vec<bool> = chosen.iter().map(|f| f.elastic).collect();
    Ok(render(if l.noheader { None } else { Some(&header) }, &rows, &elastic, l.width))
}

fn names_of(fields: &[Field]) -> String {
    fields.iter().map(|f| f.name).collect::<Vec<_>>().join(", ")
}

/// Orders two values of one field: nulls first, numbers by value, text naturally (`n-2` before `n-10`).
fn compare(a: &Value, b: &Value) -> std::cmp::Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x.as_f64().unwrap_or(0.0).total_cmp(&y.as_f64().unwrap_or(0.0))
        }
        (Value::Null, Value::Null) => std::cmp::Ordering::Equal,
        (Value::Null, _) => std::cmp::Ordering::Less,
        (_, Value::Null) => std::cmp::Ordering::Greater,
        (Value::String(x), Value::String(y)) => natural_key(x).cmp(&natural_key(y)),
        (x, y) => natural_key(&x.to_string()).cmp(&natural_key(&y.to_string())),
    }
}

/// One cell of the table.
pub fn cell(f: &Field, v: &Value, long: bool, now: DateTime<Utc>) -> String {
    let time = |v: &Value| {
        v.as_str().and_then(|s| DateTime::parse_from_rfc3339(s).ok()).map(|t| t.with_timezone(&Utc))
    };
    match (f.kind, v) {
        (_, Value::Null) => "-".into(),
        (Kind::Bool, Value::Bool(b)) => if *b { "yes" } else { "no" }.into(),
        (Kind::Time, v) if time(v).is_some() => {
            let t = time(v).unwrap_or(now);
            if long {
                when(Some(t), now)
            } else {
                relative(t, now)
            }
        }
        (Kind::Age, v) if time(v).is_some() => age((now - time(v).unwrap_or(now)).num_seconds()),
        (Kind::Duration, Value::Number(n)) => n.as_i64().map_or_else(|| n.to_string(), age),
        (Kind::Hostlist, Value::Array(a)) => {
            let names: Vec<String> = a.iter().filter_map(|n| n.as_str().map(str::to_string)).collect();
            crate::hostlist::compress(&names)
        }
        (_, Value::String(s)) => s.clone(),
        (_, v) => v.to_string(),
    }
}

/// Aligned text, one line per row, at most `width` columns when the elastic columns can be cut to fit
/// (to no less than their header); other columns are never cut.
pub fn render(header: Option<&[String]>, rows: &[Vec<String>], elastic: &[bool], width: usize) -> String {
    let n = elastic.len();
    if n == 0 {
        return String::new();
    }
    let len = |s: &str| s.chars().count();
    let mut widths: Vec<usize> = vec![0; n];
    for r in header.into_iter().chain(rows.iter().map(Vec::as_slice)) {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(len(c));
        }
    }
    let total = widths.iter().sum::<usize>() + 2 * (n - 1);
    if total > width {
        let flexible: Vec<usize> = (0..n).filter(|&i| elastic[i]).collect();
        if !flexible.is_empty() {
            let fixed: usize =
                (0..n).filter(|&i| !elastic[i]).map(|i| widths[i]).sum::<usize>() + 2 * (n - 1);
            let share = width.saturating_sub(fixed) / flexible.len();
            for i in flexible {
                let least = header.map_or(1, |h| len(&h[i])).max(8);
                widths[i] = widths[i].min(share.max(least));
            }
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            let c = cut(c, widths[i]);
            if i + 1 == n {
                s.push_str(&c);
            } else {
                s.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = header.map(&line).unwrap_or_default();
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

/// `text` in lines of at most `width` characters, broken at spaces (a word longer than a line is
/// split); nothing is lost.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(10);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let mut word = word.to_string();
        loop {
            let used = line.chars().count();
            let need = word.chars().count() + usize::from(used > 0);
            if used + need <= width {
                if used > 0 {
                    line.push(' ');
                }
                line.push_str(&word);
                break;
            }
            if used > 0 {
                lines.push(std::mem::take(&mut line));
                continue;
            }
            // A word longer than the line: its first `width` characters make a line.
            let head: String = word.chars().take(width).collect();
            word = word.chars().skip(width).collect();
            lines.push(head);
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// `s` cut to `width` characters, the cut marked with `…`.
fn cut(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let mut t: String = s.chars().take(width.saturating_sub(1)).collect();
    t.push('…');
    t
}

/// The width output is fitted to when stdout is not a terminal and `$COLUMNS` is unset: none to
/// speak of, so that `slurm-dws events | grep ...` and scripts see whole lines, as `ps` and
/// `sinfo` give them.
pub const UNLIMITED_WIDTH: usize = 65_536;

/// The terminal's width: `$COLUMNS`, else the width of the terminal on stdout, else (a pipe or a
/// file) [`UNLIMITED_WIDTH`]: nothing is cut.
pub fn terminal_width() -> usize {
    if let Some(w) = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse::<usize>().ok()) {
        if w > 0 {
            return w;
        }
    }
    let mut ws = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ only writes a `winsize` into the struct we pass; it fails on a non-terminal.
    let r = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) };
    if r == 0 && ws.ws_col > 0 {
        usize::from(ws.ws_col)
    } else if r == 0 {
        80 // a terminal that does not say its width
    } else {
        UNLIMITED_WIDTH
    }
}

/// Sorts `node-2` before `node-10`.
fn natural_key(s: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut digits = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            if !digits.is_empty() {
                out.push((std::mem::take(&mut text), digits.parse().unwrap_or(u64::MAX)));
                digits.clear();
            }
            text.push(c);
        }
    }
    out.push((text, digits.parse().unwrap_or(0)));
    out
}

/// `2026-11-23 14:02:11 (5m ago)` / `(in 2h3m)`: local time plus age.
pub fn when(t: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    match t {
        None => "-".into(),
        Some(t) => {
            let local = t.with_timezone(&Local).format("%Y-%m-%d %H:%M:%S");
            format!("{local} ({})", relative(t, now))
        }
    }
}

/// `5m ago` / `in 2h3m`.
pub fn relative(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let secs = (now - t).num_seconds();
    if secs >= 0 {
        format!("{} ago", age(secs))
    } else {
        format!("in {}", age(-secs))
    }
}

/// A duration as `45s`, `5m`, `2h3m`, `3d4h`.
pub fn age(secs: i64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        s => format!("{}d{}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// A time in JSON: RFC 3339 UTC (docs/json.md), or null.
pub fn ts(t: Option<DateTime<Utc>>) -> serde_json::Value {
    t.map_or(serde_json::Value::Null, |t| serde_json::Value::String(rfc3339(t)))
}

/// A time as the JSON outputs write it: RFC 3339 in UTC with a `Z`, as serde writes the reports' times.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FIELDS: [Field; 3] = [
        Field::both("name", "NAME", Kind::Text),
        Field::long("size", "SIZE", Kind::Text),
        Field::both("message", "MESSAGE", Kind::Text).elastic(),
    ];

    fn records() -> Vec<Value> {
        vec![
            json!({"name": "n-10", "size": 3, "message": "a long message that does not fit in a narrow terminal"}),
            json!({"name": "n-2", "size": 20, "message": "short"}),
            json!({"name": "n-1", "size": 100, "message": null}),
        ]
    }

    fn listing() -> Listing {
        Listing::default()
    }

    #[test]
    fn sorts_naturally_and_numerically_by_field() {
        let now = DateTime::UNIX_EPOCH;
        let l =
            Listing { sort: Some("name".into()), format: Some("name".into()), noheader: true, ..listing() };
        assert_eq!(print("t", &FIELDS, records(), &l, now).unwrap(), "n-1\nn-2\nn-10\n");
        let l =
            Listing { sort: Some("size".into()), format: Some("size".into()), noheader: true, ..listing() };
        assert_eq!(print("t", &FIELDS, records(), &l, now).unwrap(), "3\n20\n100\n");
        let l = Listing { sort: Some("colour".into()), ..listing() };
        let e = print("things", &FIELDS, records(), &l, now).unwrap_err();
        assert_eq!(e, "unknown field 'colour' for things (fields: name, size, message)");
    }

    #[test]
    fn format_picks_fields_in_order_and_refuses_unknown_ones() {
        let now = DateTime::UNIX_EPOCH;
        let l = Listing { format: Some("size,name".into()), ..listing() };
        let t = print("t", &FIELDS, records(), &l, now).unwrap();
        assert_eq!(t.lines().next().unwrap(), "SIZE  NAME");
        assert_eq!(t.lines().nth(1).unwrap(), "3     n-10");
        let l = Listing { format: Some("name,bogus".into()), ..listing() };
        assert!(print("t", &FIELDS, records(), &l, now).unwrap_err().contains("'bogus'"));
        let l = Listing { json: true, format: Some("name".into()), ..listing() };
        let v: Value = serde_json::from_str(&print("t", &FIELDS, records(), &l, now).unwrap()).unwrap();
        assert_eq!(v[0], json!({"name": "n-10"}));
    }

    #[test]
    fn long_shows_more_and_noheader_drops_the_header() {
        let now = DateTime::UNIX_EPOCH;
        let t = print("t", &FIELDS, records(), &listing(), now).unwrap();
        assert!(t.starts_with("NAME  MESSAGE\n"), "{t}");
        let t = print("t", &FIELDS, records(), &Listing { long: true, ..listing() }, now).unwrap();
        assert!(t.starts_with("NAME  SIZE  MESSAGE\n"), "{t}");
        let t = print("t", &FIELDS, records(), &Listing { noheader: true, ..listing() }, now).unwrap();
        assert!(t.starts_with("n-10"), "{t}");
    }

    #[test]
    fn fits_the_width_by_cutting_the_free_text_only() {
        let now = DateTime::UNIX_EPOCH;
        let t = print("t", &FIELDS, records(), &Listing { width: 30, ..listing() }, now).unwrap();
        for line in t.lines() {
            assert!(line.chars().count() <= 30, "{line:?}");
        }
        assert!(t.contains("a long message that doe…"), "{t}");
        // Too narrow even for the names: the names stay whole.
        let t = print("t", &FIELDS, records(), &Listing { width: 5, ..listing() }, now).unwrap();
        assert!(t.contains("n-10"), "{t}");
    }

    #[test]
    fn renders_aligned() {
        let t = render(
            Some(&["A".into(), "LONGER".into()]),
            &[vec!["xyz".into(), "1".into()]],
            &[false, false],
            80,
        );
        assert_eq!(t, "A    LONGER\nxyz  1\n");
    }

    #[test]
    fn wraps_at_spaces_and_splits_only_overlong_words() {
        assert_eq!(wrap("a bb ccc dddd", 10), ["a bb ccc", "dddd"]);
        assert_eq!(
            wrap("x /a/very/long/path/name/here y", 10),
            ["x", "/a/very/lo", "ng/path/na", "me/here y"]
        );
        assert_eq!(wrap("", 10), [""]);
    }

    #[test]
    fn ages() {
        assert_eq!(age(5), "5s");
        assert_eq!(age(300), "5m");
        assert_eq!(age(7380), "2h3m");
        assert_eq!(age(2 * 86_400 + 3600), "2d1h");
    }

    #[test]
    fn times_are_rfc3339_utc_with_z() {
        let t = DateTime::parse_from_rfc3339("2026-11-24T10:00:00.250+01:00").unwrap().with_timezone(&Utc);
        assert_eq!(rfc3339(t), "2026-11-24T09:00:00.250Z");
    }
}
