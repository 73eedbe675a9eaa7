//! Operations: what every mutation returns, RUNNING and then DONE (with an error or not).

use super::*;

/// An Operation: the handle GCE returns for every mutation.
#[derive(Clone, Debug)]
pub struct Operation {
    pub name: String,
    pub(super) id: u64,
    pub project: String,
    pub scope: Scope,
    pub(super) op_type: String,
    pub(super) target_link: String,
    pub(super) target_id: u64,
    pub(super) inserted: DateTime<Utc>,
    /// When it turns DONE; `None` while it waits for something (a MIG delete behind a provisioning request).
    pub(super) done_at: Option<DateTime<Utc>>,
    pub(super) error: Option<Value>,
    pub(super) http_error: Option<(u16, &'static str)>,
}

impl Operation {
    pub fn is_done(&self, now: DateTime<Utc>) -> bool {
        self.done_at.is_some_and(|t| now >= t)
    }

    pub fn to_json(&self, now: DateTime<Utc>) -> Value {
        let done = self.is_done(now);
        let mut o = json!({
            "kind": "compute#operation",
            "id": self.id.to_string(),
            "name": self.name,
            "operationType": self.op_type,
            "targetLink": self.target_link,
            "status": if done { "DONE" } else { "RUNNING" },
            "user": "slurm-dws-sim@example.iam.gserviceaccount.com",
            "progress": if done { 100 } else { 0 },
            "insertTime": ts(self.inserted),
            "startTime": ts(self.inserted),
            "selfLink": format!("{GCE_BASE}projects/{}/{}/operations/{}", self.project, self.scope.path(), self.name),
        });
        let obj = o.as_object_mut().expect("object");
        if self.target_id != 0 {
            obj.insert("targetId".into(), json!(self.target_id.to_string()));
        }
        self.scope.annotate(&self.project, obj);
        if done {
            obj.insert("endTime".into(), json!(ts(self.done_at.unwrap_or(now))));
            if let Some(e) = &self.error {
                obj.insert("error".into(), e.clone());
            }
            if let Some((code, msg)) = self.http_error {
                obj.insert("httpErrorStatusCode".into(), json!(code));
                obj.insert("httpErrorMessage".into(), json!(msg));
            }
        }
        o
    }
}
