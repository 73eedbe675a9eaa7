//! `slurm-dws usage`: VM and GPU hours (busy and idle) and their estimated cost over a period, by job,
//! user, account, partition, nodeset or model (`crate::usage::report`), with the flex queue time of
//! the requests; for people, `--json` or `--csv`.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{json, Value};

use super::{now, open, parse_time};
use crate::cli::table::{age, rfc3339, ts, Table};
use crate::cli::CliError;
use crate::config::Config;
use crate::usage::pricing::PriceSource;
use crate::usage::report::{queue_times, report_spans, QueueTime};
use crate::usage::{By, Period, PriceBook, Report, UsageRow};

/// What is said with every cost.
pub const ESTIMATE: &str =
    "every cost is an estimate from list prices (hours × price per VM-hour), not an invoice";

/// How the report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Csv,
}

/// `slurm-dws usage [--since T] [--until T] [--by B] [--json|--csv]`.
pub async fn usage(
    cfg: &Config,
    since: Option<&str>,
    until: Option<&str>,
    by: &str,
    format: Format,
) -> Result<String, CliError> {
    let now = now();
    let by = By::parse(by).ok_or_else(|| {
        let all: Vec<&str> = By::ALL.iter().map(|b| b.as_str()).collect();
        CliError::usage(format!(
            "bad --by '{}': must be one of {}",
            crate::hostlist::escape_control(by),
            all.join(", ")
        ))
    })?;
    let until = until.map(|t| parse_time("--until", t, now)).transpose()?.unwrap_or(now);
    let since = match since {
        Some(t) => parse_time("--since", t, now)?,
        None => until - chrono::Duration::days(7),
    };
    if since >= until {
        return Err(CliError::usage(format!(
            "--since {} is not before --until {}: the period is empty",
            rfc3339(since),
            rfc3339(until)
        )));
    }
    let period = Period { since, until };
    let source = open(cfg).await?;
    let mut spans = source.usage_spans(since, until).await?;
    let prices = match (&source, cfg.pricing.catalog) {
        // Read through the daemon: the catalog cache in state_dir is what the daemon sent.
        (crate::cli::source::Source::Daemon { .. }, true) => {
            let sent = spans.catalog.take();
            match crate::usage::pricing::catalog_from_reader(&cfg.state_dir, sent) {
                Ok(c) => PriceBook::new(&cfg.pricing, Ok(&c)),
                Err(state) => PriceBook::new(&cfg.pricing, Err(state)),
            }
        }
        _ => PriceBook::load(&cfg.pricing, &cfg.state_dir),
    };
    let waits = source.request_waits().await?;
    let r = report_spans(&spans, period, now, by, &prices);
    let queue = queue_times(&waits, period);
    Ok(match format {
        Format::Json => json_of(&r, spans.data_since, &prices, &queue, cfg),
        Format::Csv => csv_of(&r),
        Format::Text => text_of(&r, spans.data_since, &prices, &queue, cfg, now),
    })
}

fn source_json(s: PriceSource) -> (&'static str, Value) {
    match s {
        PriceSource::Config => ("config", Value::Null),
        PriceSource::Catalog { fetched_at } => ("catalog", ts(Some(fetched_at))),
    }
}

fn model_of<'a>(cfg: &'a Config, nodeset: &str) -> &'a str {
    cfg.nodeset(nodeset).map_or("", |n| n.provisioning_model.as_str())
}

/// `usage --json`, written straight from the report (by job, a row per job: no `serde_json::Value`
/// of a few hundred thousand maps on the way). The keys of every object in alphabetical order, as
/// a `Value` prints them.
fn json_of(
    r: &Report,
    data_since: Option<DateTime<Utc>>,
    prices: &PriceBook,
    queue: &[QueueTime],
    cfg: &Config,
) -> String {
    /// A row, its keys in alphabetical order.
    #[derive(Serialize)]
    struct Row<'a> {
        busy_vm_hours: f64,
        cost: Option<f64>,
        gpu_hours: f64,
        idle_gpu_hours: f64,
        idle_vm_hours: f64,
        key: &'a str,
        unpriced: &'a [String],
        vm_hours: f64,
    }
    fn row(r: &UsageRow) -> Row<'_> {
        Row {
            busy_vm_hours: r.busy_vm_hours,
            cost: r.cost,
            gpu_hours: r.gpu_hours,
            idle_gpu_hours: r.idle_gpu_hours,
            idle_vm_hours: r.idle_vm_hours,
            key: &r.key,
            unpriced: &r.unpriced,
            vm_hours: r.vm_hours,
        }
    }
    /// The whole answer, its keys in alphabetical order.
    #[derive(Serialize)]
    struct Out<'a> {
        by: &'a str,
        catalog: String,
        currency: &'a str,
        data_since: Value,
        estimate: &'a str,
        last_seen: Value,
        prices: Vec<Value>,
        queue: Vec<Value>,
        rows: Vec<Row<'a>>,
        since: String,
        total: Row<'a>,
        until: String,
    }
    let prices_used: Vec<Value> = r
        .prices_used
        .iter()
        .map(|((mt, model), p)| {
            let (source, fetched_at) = source_json(p.source);
            json!({"machine_type": mt, "model": model, "per_hour": p.per_hour, "source": source, "fetched_at": fetched_at})
        })
        .collect();
    let queue: Vec<Value> = queue
        .iter()
        .map(|q| {
            json!({
                "nodeset": q.nodeset, "model": model_of(cfg, &q.nodeset), "requests": q.requests, "nodes": q.nodes,
                "mean_wait_seconds": q.mean_wait, "max_wait_seconds": q.max_wait, "total_wait_seconds": q.total_wait,
            })
        })
        .collect();
    let out = Out {
        by: r.by.as_str(),
        catalog: prices.catalog_line(),
        currency: &prices.currency,
        data_since: ts(data_since),
        estimate: ESTIMATE,
        last_seen: ts(r.last_seen),
        prices: prices_used,
        queue,
        rows: r.rows.iter().map(row).collect(),
        since: rfc3339(r.period.since),
        total: row(&r.total),
        until: rfc3339(r.period.until),
    };
    // Sized up front (a row prints in under 300 bytes): no copies of a growing buffer of tens of MB.
    let mut text = Vec::with_capacity(4096 + 300 * (r.rows.len() + 1));
    if serde_json::to_writer_pretty(&mut text, &out).is_err() {
        return String::new();
    }
    text.push(b'\n');
    String::from_utf8(text).unwrap_or_default()
}

/// A CSV field, quoted when it must be (RFC 4180).
fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

fn csv_of(r: &Report) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(64 + 100 * r.rows.len());
    out.push_str("key,vm_hours,busy_vm_hours,idle_vm_hours,gpu_hours,cost\n");
    for row in &r.rows {
        // The same numbers as --json prints (the shortest text that reads back to the same value).
        let _ = write!(
            out,
            "{},{},{},{},{},",
            csv_field(&row.key),
            row.vm_hours,
            row.busy_vm_hours,
            row.idle_vm_hours,
            row.gpu_hours
        );
        if let Some(c) = row.cost {
            let _ = write!(out, "{c}");
        }
        out.push('\n');
    }
    out
}

fn hours(h: f64) -> String {
    format!("{h:.2}")
}

fn text_of(
    r: &Report,
    data_since: Option<DateTime<Utc>>,
    prices: &PriceBook,
    queue: &[QueueTime],
    cfg: &Config,
    now: DateTime<Utc>,
) -> String {
    let mut out = format!(
        "Usage from {} to {} by {}, costs in {}\n",
        rfc3339(r.period.since),
        rfc3339(r.period.until),
        r.by.as_str(),
        prices.currency
    );
    out.push_str(&match data_since {
        None => "No usage recorded yet: the daemon records VMs and jobs each pass.\n".to_string(),
        Some(t) if t > r.period.since => format!(
            "Data kept since {} (daemon.history_days, or when recording began): hours before it are not counted.\n",
            rfc3339(t)
        ),
        Some(t) => format!("Data kept since {}.\n", rfc3339(t)),
    });
    if let Some(seen) = r.last_seen.filter(|t| *t < r.period.until) {
        out.push_str(&format!(
            "VMs still running are counted to the last pass that saw them, {} ({}).\n",
            rfc3339(seen),
            crate::cli::table::relative(seen, now)
        ));
    }
    out.push('\n');
    let mut t = Table::new(&[
        r.by.header(),
        "VM HOURS",
        "BUSY",
        "IDLE",
        "IDLE %",
        "GPU HOURS",
        "IDLE GPU HOURS",
        "COST",
    ]);
    let cells = |row: &UsageRow| {
        let idle_pct = if row.vm_hours > 0.0 {
            format!("{:.0}%", 100.0 * row.idle_vm_hours / row.vm_hours)
        } else {
            "-".into()
        };
        vec![
            row.key.clone(),
            hours(row.vm_hours),
            hours(row.busy_vm_hours),
            hours(row.idle_vm_hours),
            idle_pct,
            hours(row.gpu_hours),
            hours(row.idle_gpu_hours),
            row.cost.map_or_else(|| "unknown (no price)".to_string(), |c| format!("{c:.2}")),
        ]
    };
    for row in &r.rows {
        t.push(cells(row));
    }
    t.push(cells(&r.total));
    out.push_str(&t.render());
    out.push('\n');
    out.push_str(&format!("Prices ({} per VM-hour):\n", prices.currency));
    if r.prices_used.is_empty() {
        out.push_str("  none used\n");
    }
    for ((mt, model), p) in &r.prices_used {
        let from = match p.source {
            PriceSource::Config => "config [pricing.per_hour]".to_string(),
            PriceSource::Catalog { fetched_at } => format!("catalog list price of {}", rfc3339(fetched_at)),
        };
        out.push_str(&format!("  {mt} {model}: {:.4} ({from})\n", p.per_hour));
    }
    for row in r.rows.iter().filter(|row| !row.unpriced.is_empty()) {
        out.push_str(&format!(
            "  no price for {}: the cost of {} is unknown (add [pricing.per_hour])\n",
            row.unpriced.join(", "),
            row.key
        ));
    }
    out.push_str(&format!("  {}\n", prices.catalog_line()));
    out.push_str(&format!("Note: {ESTIMATE}.\n"));
    out.push_str("\nQueue time of the resize requests that got their capacity in the period:\n");
    if queue.is_empty() {
        out.push_str("  none\n");
    }
    for q in queue {
        out.push_str(&format!(
            "  {} ({}): {} request{} ({} nodes), waited {} on average, at most {}, {} in all\n",
            q.nodeset,
            match model_of(cfg, &q.nodeset) {
                "" => "not in the config",
                m => m,
            },
            q.requests,
            if q.requests == 1 { "" } else { "s" },
            q.nodes,
            age(q.mean_wait),
            age(q.max_wait),
            age(q.total_wait)
        ));
    }
    out
}
