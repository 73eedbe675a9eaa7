//! The one table `make bench` prints: measured value (median with min/max), budget, same-run baseline,
//! ratio, verdict.

use std::time::Duration;

/// Whether a row meets its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail,
    /// A baseline or a figure shown for context: no budget of its own.
    Info,
}

/// One line of the table.
#[derive(Debug, Clone)]
pub struct Row {
    pub what: String,
    pub measured: String,
    pub spread: String,
    pub budget: String,
    pub baseline: String,
    pub ratio: String,
    pub verdict: Verdict,
}

/// Samples of one timed quantity, in milliseconds.
#[derive(Debug, Clone, Default)]
pub struct Samples(pub Vec<f64>);

impl Samples {
    pub fn push(&mut self, d: Duration) {
        self.0.push(d.as_secs_f64() * 1e3);
    }

    pub fn push_ms(&mut self, ms: f64) {
        self.0.push(ms);
    }

    fn sorted(&self) -> Vec<f64> {
        let mut v = self.0.clone();
        v.sort_by(f64::total_cmp);
        v
    }

    pub fn median(&self) -> f64 {
        let v = self.sorted();
        match v.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        }
    }

    pub fn min(&self) -> f64 {
        self.sorted().first().copied().unwrap_or(f64::NAN)
    }

    pub fn max(&self) -> f64 {
        self.sorted().last().copied().unwrap_or(f64::NAN)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// `min–max (n=N)` in ms.
    pub fn spread(&self) -> String {
        format!("{}–{} (n={})", ms(self.min()), ms(self.max()), self.len())
    }
}

/// A millisecond figure with sensible precision.
pub fn ms(v: f64) -> String {
    if v.is_nan() {
        "-".into()
    } else if v < 10.0 {
        format!("{v:.2} ms")
    } else if v < 100.0 {
        format!("{v:.1} ms")
    } else {
        format!("{v:.0} ms")
    }
}

/// A ratio such as `1.4×`.
pub fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 && a.is_finite() {
        format!("{:.2}×", a / b)
    } else {
        "-".into()
    }
}

/// The table, printed at the end (rows are also echoed to stderr as they are measured).
#[derive(Default)]
pub struct Table {
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
}

impl Table {
    /// A timed row against a budget in ms (`None`: a baseline, no budget).
    pub fn timed(&mut self, what: &str, s: &Samples, budget_ms: Option<f64>, baseline: Option<(&str, f64)>) {
        let m = s.median();
        let verdict = match budget_ms {
            Some(b) if m <= b => Verdict::Pass,
            Some(_) => Verdict::Fail,
            None => Verdict::Info,
        };
        self.add(Row {
            what: what.into(),
            measured: ms(m),
            spread: s.spread(),
            budget: budget_ms.map(|b| format!("≤ {}", ms(b))).unwrap_or_else(|| "-".into()),
            baseline: baseline.map(|(name, v)| format!("{} {}", name, ms(v))).unwrap_or_else(|| "-".into()),
            ratio: baseline.map(|(_, v)| ratio(m, v)).unwrap_or_else(|| "-".into()),
            verdict,
        });
    }

    /// A count against a ceiling (`None`: shown for context).
    pub fn count(&mut self, what: &str, value: f64, spread: &str, ceiling: Option<f64>, budget_text: &str) {
        let verdict = match ceiling {
            Some(c) if value <= c => Verdict::Pass,
            Some(_) => Verdict::Fail,
            None => Verdict::Info,
        };
        let measured = if value.fract() == 0.0 { format!("{value:.0}") } else { format!("{value:.1}") };
        self.add(Row {
            what: what.into(),
            measured,
            spread: spread.into(),
            budget: budget_text.into(),
            baseline: "-".into(),
            ratio: "-".into(),
            verdict,
        });
    }

    pub fn add(&mut self, row: Row) {
        eprintln!(
            "[bench] {}: {} ({}) budget {} -> {:?}",
            row.what, row.measured, row.spread, row.budget, row.verdict
        );
        self.rows.push(row);
    }

    /// A row for a section that could not run, with why.
    pub fn failed(&mut self, what: &str, why: &str, budget: &str) {
        self.add(Row {
            what: what.into(),
            measured: "NOT MEASURED".into(),
            spread: why.chars().take(60).collect(),
            budget: budget.into(),
            baseline: "-".into(),
            ratio: "-".into(),
            verdict: Verdict::Fail,
        });
        self.notes.push(format!("{what}: {why}"));
    }

    pub fn note(&mut self, n: impl Into<String>) {
        self.notes.push(n.into());
    }

    pub fn print(&self) {
        let head = ["measure", "median", "min–max", "budget", "baseline (same run)", "ratio", "verdict"];
        let cells: Vec<[String; 7]> = self
            .rows
            .iter()
            .map(|r| {
                [
                    r.what.clone(),
                    r.measured.clone(),
                    r.spread.clone(),
                    r.budget.clone(),
                    r.baseline.clone(),
                    r.ratio.clone(),
                    match r.verdict {
                        Verdict::Pass => "ok".into(),
                        Verdict::Fail => "MISSED".into(),
                        Verdict::Info => "".into(),
                    },
                ]
            })
            .collect();
        let mut width = head.map(|h| h.chars().count());
        for c in &cells {
            for (w, s) in width.iter_mut().zip(c.iter()) {
                *w = (*w).max(s.chars().count());
            }
        }
        let line = |c: &[String]| {
            let parts: Vec<String> = c
                .iter()
                .zip(width.iter())
                .map(|(s, w)| format!("{s}{}", " ".repeat(w - s.chars().count())))
                .collect();
            format!("| {} |", parts.join(" | "))
        };
        println!();
        println!("{}", line(&head.map(String::from)));
        println!("|{}|", width.iter().map(|w| "-".repeat(w + 2)).collect::<Vec<_>>().join("|"));
        for c in &cells {
            println!("{}", line(c));
        }
        if !self.notes.is_empty() {
            println!();
            for n in &self.notes {
                println!("- {n}");
            }
        }
        let missed = self.rows.iter().filter(|r| r.verdict == Verdict::Fail).count();
        let budgets = self.rows.iter().filter(|r| r.verdict != Verdict::Info).count();
        println!();
        println!("{} of {} budgets met", budgets - missed, budgets);
    }
}
