//! The control API's capacity and fault rules, and the errors a capacity failure produces.

use super::*;
use serde::{Deserialize, Serialize};

/// A capacity rule of the control API (`POST /_sim/capacity`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CapacityRule {
    /// MIG name prefix; "" matches every MIG.
    #[serde(rename = "match", default)]
    pub prefix: String,
    /// Real seconds a resize request stays ACCEPTED before capacity (or the failure) arrives.
    #[serde(default)]
    pub delay_seconds: f64,
    /// Make the request FAILED (after the delay) with this error.
    #[serde(default)]
    pub fail: Option<CapacityFailure>,
    /// Keep the request ACCEPTED until the rule is replaced or cleared.
    #[serde(default)]
    pub hold: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CapacityFailure {
    pub code: String,
    #[serde(default)]
    pub message: String,
    /// `errorDetails[]` as GCE sends them (`errorInfo`, `quotaInfo`, `help`, `localizedMessage`);
    /// absent: a `quotaInfo` for `QUOTA_EXCEEDED`, none otherwise.
    #[serde(default, rename = "errorDetails", skip_serializing_if = "Option::is_none")]
    pub error_details: Option<Value>,
}

/// The `{errors:[{code, message, errorDetails}]}` a capacity failure puts in a resize request's status.
pub fn capacity_error(f: &CapacityFailure) -> Value {
    let message =
        if f.message.is_empty() { format!("Resize request failed: {}", f.code) } else { f.message.clone() };
    let mut e = status_error(&f.code, &message);
    let details = f.error_details.clone().or_else(|| {
        (f.code == "QUOTA_EXCEEDED").then(|| {
            json!([{"quotaInfo": {"metricName": "compute.googleapis.com/preemptible_nvidia_h200_gpus",
                                  "limitName": "PREEMPTIBLE-NVIDIA-H200-GPUS-per-project-region",
                                  "dimensions": {"region": "us-central1"}, "limit": 8.0}}])
        })
    });
    if let Some(d) = details {
        e["errors"][0]["errorDetails"] = d;
    }
    e
}

/// An HTTP fault injection rule of the control API (`POST /_sim/faults`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FaultRule {
    /// A method id such as `regionInstanceGroupManagers.insert`, or `*` for every API call.
    #[serde(default = "any_method")]
    pub method: String,
    /// Only calls whose URL path contains this (e.g. a MIG's name: one nodeset's calls hang while
    /// another's answer); absent = every call of the method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_contains: Option<String>,
    /// HTTP status to answer with; 200 means "no error" (only `delay_ms` applies).
    pub status: u16,
    /// `errors[0].reason`; defaults from the status (`rateLimitExceeded`, `backendError`, ...).
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default = "one")]
    pub probability: f64,
    /// How many calls it may still hit; absent = unlimited.
    #[serde(default)]
    pub count: Option<u64>,
    /// Delay before answering (or before the real answer when status is 200): with status 200, a
    /// call that hangs that long, then acts and answers.
    #[serde(default)]
    pub delay_ms: u64,
    /// Carry the call out, then answer the error instead of its result: a response lost on the way
    /// back, after GCE acted (a retry must not act twice).
    #[serde(default)]
    pub after: bool,
}

fn any_method() -> String {
    "*".to_string()
}

fn one() -> f64 {
    1.0
}

/// An operation fault rule of the control API (`POST /_sim/operation-faults`): the next matching
/// mutations are not carried out; each returns an Operation that ends DONE with this error.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OpFaultRule {
    /// A mutation's method id such as `regionInstanceGroupManagers.deleteInstances`, or `*`.
    #[serde(default = "any_method")]
    pub method: String,
    /// `error.errors[0].code`, e.g. `RESOURCE_NOT_READY`, `QUOTA_EXCEEDED`, `INVALID_FIELD_VALUE`.
    pub code: String,
    #[serde(default)]
    pub message: String,
    /// The Operation's `httpErrorStatusCode`; absent: from the code (404 for `RESOURCE_NOT_FOUND`,
    /// 403 for `QUOTA_EXCEEDED`, 412 for `CONDITION_NOT_MET`, 503 for capacity codes, else 400).
    #[serde(default)]
    pub http_status: Option<u16>,
    /// `errorDetails[]` of the error, as GCE sends them.
    #[serde(default, rename = "errorDetails", skip_serializing_if = "Option::is_none")]
    pub error_details: Option<Value>,
    #[serde(default = "one")]
    pub probability: f64,
    /// How many mutations it may still fail; absent = unlimited.
    #[serde(default)]
    pub count: Option<u64>,
}

impl OpFaultRule {
    /// The Operation's `error`.
    pub fn error(&self) -> Value {
        capacity_error(&CapacityFailure {
            code: self.code.clone(),
            message: if self.message.is_empty() {
                format!("Injected operation failure: {}", self.code)
            } else {
                self.message.clone()
            },
            error_details: self.error_details.clone(),
        })
    }

    /// `(httpErrorStatusCode, httpErrorMessage)`.
    pub fn http_status(&self) -> (u16, &'static str) {
        let code = self.http_status.unwrap_or(match self.code.as_str() {
            "RESOURCE_NOT_FOUND" => 404,
            "QUOTA_EXCEEDED" => 403,
            "CONDITION_NOT_MET" => 412,
            "ZONE_RESOURCE_POOL_EXHAUSTED"
            | "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
            | "REGION_RESOURCE_POOL_EXHAUSTED"
            | "RESOURCE_POOL_EXHAUSTED" => 503,
            _ => 400,
        });
        (code, http_reason(code))
    }
}

/// Picks the latest operation fault rule for this mutation, if the dice say so, and uses up one of its count.
pub(super) fn pick_op_fault(rules: &mut Vec<OpFaultRule>, method_id: &str) -> Option<OpFaultRule> {
    let mut rng = rand::thread_rng();
    let i = rules.iter().rposition(|f| {
        (f.method == "*" || f.method.strip_prefix("compute.").unwrap_or(&f.method) == method_id)
            && f.count != Some(0)
            && rand::Rng::gen::<f64>(&mut rng) < f.probability
    })?;
    let rule = rules[i].clone();
    if let Some(n) = rules[i].count.as_mut() {
        *n -= 1;
        if *n == 0 {
            rules.remove(i);
        }
    }
    Some(rule)
}

/// The rate quotas of the control API (`POST /_sim/quotas`): per project, per window (a minute by
/// default), GCE's two groups "read requests" and "write requests"; absent = unlimited.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct QuotaConfig {
    #[serde(default)]
    pub read_per_minute: Option<u64>,
    #[serde(default)]
    pub write_per_minute: Option<u64>,
    /// The window the limits count over. GCE's is 60 s, refilled at the start of each synchronized
    /// interval (10:00:15 → 10:01:00); tests may shorten it.
    #[serde(default = "sixty")]
    pub window_seconds: f64,
}

fn sixty() -> f64 {
    60.0
}

impl Default for QuotaConfig {
    fn default() -> Self {
        QuotaConfig { read_per_minute: None, write_per_minute: None, window_seconds: 60.0 }
    }
}

/// Which rate quota a call counts against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QuotaGroup {
    /// `get`, `list`, `aggregatedList`, `listManagedInstances`, operation `wait`s and
    /// `advice.capacity` (a POST that changes nothing; which group GCE counts it in is not
    /// documented: an assumption).
    Read,
    /// Everything that changes something.
    Write,
}

impl QuotaGroup {
    pub fn of(method_id: &str) -> QuotaGroup {
        if method_id == "advice.capacity" {
            return QuotaGroup::Read;
        }
        match method_id.rsplit('.').next().unwrap_or_default() {
            "get" | "list" | "aggregatedList" | "listManagedInstances" | "wait" => QuotaGroup::Read,
            _ => QuotaGroup::Write,
        }
    }

    /// GCE's names for the quota metric and its limit, as its rateLimitExceeded message gives them.
    pub fn names(self) -> (&'static str, &'static str) {
        match self {
            QuotaGroup::Read => ("Read requests", "Read requests per minute"),
            QuotaGroup::Write => ("Write requests", "Write requests per minute"),
        }
    }
}

/// Rate quota configuration and usage.
#[derive(Clone, Debug, Default)]
pub struct Quotas {
    pub config: QuotaConfig,
    /// (project, group) → (window index, calls admitted in that window).
    usage: HashMap<(String, QuotaGroup), (i64, u64)>,
}

impl Quotas {
    pub fn set(&mut self, config: QuotaConfig) {
        self.config = config;
        self.usage.clear();
    }

    fn window(&self, now: DateTime<Utc>) -> i64 {
        let w = (self.config.window_seconds * 1000.0).max(1.0) as i64;
        now.timestamp_millis().div_euclid(w)
    }

    fn limit(&self, group: QuotaGroup) -> Option<u64> {
        match group {
            QuotaGroup::Read => self.config.read_per_minute,
            QuotaGroup::Write => self.config.write_per_minute,
        }
    }

    /// Counts a call against its group; `Err(limit)` when the window's quota is used up (the refused
    /// call does not count).
    pub fn admit(&mut self, project: &str, group: QuotaGroup, now: DateTime<Utc>) -> Result<(), u64> {
        let window = self.window(now);
        let limit = self.limit(group);
        let entry = self.usage.entry((project.to_string(), group)).or_insert((window, 0));
        if entry.0 != window {
            *entry = (window, 0);
        }
        if limit.is_some_and(|l| entry.1 >= l) {
            return Err(limit.unwrap_or_default());
        }
        entry.1 += 1;
        Ok(())
    }

    /// `{"config": ..., "usage": {"PROJECT": {"read": N, "write": N}}}` for the current window.
    pub fn to_json(&self, now: DateTime<Utc>) -> Value {
        let window = self.window(now);
        let mut usage: BTreeMap<&str, BTreeMap<&str, u64>> = BTreeMap::new();
        for ((project, group), (w, n)) in &self.usage {
            let n = if *w == window { *n } else { 0 };
            let g = if *group == QuotaGroup::Read { "read" } else { "write" };
            usage.entry(project).or_default().insert(g, n);
        }
        json!({"config": self.config, "usage": usage})
    }
}
