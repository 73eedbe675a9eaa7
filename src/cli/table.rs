//! Plain-text tables for people (`--json` is for scripts): aligned columns, sortable, times as local
//! time plus age, the look `sinfo` and `scontrol` users expect.

use chrono::{DateTime, Local, Utc};

/// A table: a header and rows of cells.
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

    /// Sorts by the named column (case-insensitive), numerically when every cell is a number.
    /// An unknown column is an error naming the columns there are.
    pub fn sort_by(&mut self, column: &str) -> Result<(), String> {
        let Some(i) = self.header.iter().position(|h| h.eq_ignore_ascii_case(column)) else {
            return Err(format!(
                "no column '{column}' to sort by (columns: {})",
                self.header.iter().map(|h| h.to_lowercase()).collect::<Vec<_>>().join(", ")
            ));
        };
        let numeric = self.rows.iter().all(|r| r[i].is_empty() || r[i] == "-" || r[i].parse::<f64>().is_ok());
        if numeric {
            let key = |r: &Vec<String>| r[i].parse::<f64>().unwrap_or(f64::NEG_INFINITY);
            self.rows.sort_by(|a, b| key(a).total_cmp(&key(b)));
        } else {
            self.rows.sort_by(|a, b| natural_key(&a[i]).cmp(&natural_key(&b[i])));
        }
        Ok(())
    }

    /// The table as aligned text, one line per row.
    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.len()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        let line = |cells: Vec<&str>| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate() {
                if i + 1 == cells.len() {
                    s.push_str(c);
                } else {
                    s.push_str(&format!("{c:<w$}  ", w = widths[i]));
                }
            }
            s.trim_end().to_string() + "\n"
        };
        let mut out = line(self.header.clone());
        for r in &self.rows {
            out.push_str(&line(r.iter().map(String::as_str).collect()));
        }
        out
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
            let secs = (now - t).num_seconds();
            if secs >= 0 {
                format!("{local} ({} ago)", age(secs))
            } else {
                format!("{local} (in {})", age(-secs))
            }
        }
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

/// A cell for an optional value.
pub fn opt<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map_or("-".into(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_naturally_and_numerically() {
        let mut t = Table::new(&["NAME", "SIZE"]);
        for (n, s) in [("n-10", "3"), ("n-2", "20"), ("n-1", "100")] {
            t.push(vec![n.into(), s.into()]);
        }
        t.sort_by("name").unwrap();
        assert_eq!(t.rows.iter().map(|r| r[0].as_str()).collect::<Vec<_>>(), ["n-1", "n-2", "n-10"]);
        t.sort_by("SIZE").unwrap();
        assert_eq!(t.rows.iter().map(|r| r[1].as_str()).collect::<Vec<_>>(), ["3", "20", "100"]);
        assert!(t.sort_by("colour").unwrap_err().contains("name, size"));
    }

    #[test]
    fn renders_aligned() {
        let mut t = Table::new(&["A", "LONGER"]);
        t.push(vec!["xyz".into(), "1".into()]);
        assert_eq!(t.render(), "A    LONGER\nxyz  1\n");
    }

    #[test]
    fn ages() {
        assert_eq!(age(5), "5s");
        assert_eq!(age(300), "5m");
        assert_eq!(age(7380), "2h3m");
        assert_eq!(age(2 * 86_400 + 3600), "2d1h");
    }
}
