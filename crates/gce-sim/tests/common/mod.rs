//! Helpers shared by the simulator's black-box tests: raw HTTP (reqwest + serde_json, no client types).
#![allow(dead_code)]
// Test rig: these drive a real simulator server and wait for its ticker in real time.
#![allow(clippy::disallowed_methods)]

use gce_sim::{self as sim, SimHandle, SimOptions};
pub use serde_json::json;
pub use serde_json::Value;
use std::time::{Duration, Instant};

pub const REGION: &str = "projects/p/regions/us-central1";
pub const ZONE: &str = "projects/p/zones/us-central1-a";

pub struct Api {
    pub http: reqwest::Client,
    /// `http://ADDR/compute/v1/`
    pub base: String,
    /// `http://ADDR/`
    pub root: String,
}

impl Api {
    pub async fn call(&self, method: reqwest::Method, url: String, body: Option<Value>) -> (u16, Value) {
        let mut req = self.http.request(method, url).bearer_auth("any-token");
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("request sent");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("body");
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }
    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.call(reqwest::Method::GET, format!("{}{path}", self.base), None).await
    }
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(reqwest::Method::POST, format!("{}{path}", self.base), Some(body)).await
    }
    pub async fn post_empty(&self, path: &str) -> (u16, Value) {
        self.call(reqwest::Method::POST, format!("{}{path}", self.base), None).await
    }
    pub async fn delete(&self, path: &str) -> (u16, Value) {
        self.call(reqwest::Method::DELETE, format!("{}{path}", self.base), None).await
    }
    pub async fn control(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let (status, v) = self.call(method, format!("{}_sim/{path}", self.root), body).await;
        assert_eq!(status, 200, "control {path}: {v}");
        v
    }

    /// Waits for an operation (regional unless it carries a zone) until DONE.
    pub async fn wait(&self, op: &Value) -> Value {
        let name = op["name"].as_str().expect("operation name");
        let scope = match op.get("zone").and_then(Value::as_str) {
            Some(z) => format!("projects/p/zones/{}", z.rsplit('/').next().unwrap()),
            None => REGION.to_string(),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (status, v) = self.post_empty(&format!("{scope}/operations/{name}/wait")).await;
            assert_eq!(status, 200, "{v}");
            if v["status"] == "DONE" {
                return v;
            }
            assert!(Instant::now() < deadline, "operation never finished: {v}");
        }
    }

    pub async fn insert_mig(&self, name: &str) {
        let (status, op) = self.post(&format!("{REGION}/instanceGroupManagers"), mig_body(name)).await;
        assert_eq!(status, 200, "{op}");
        let done = self.wait(&op).await;
        assert!(done.get("error").is_none(), "{done}");
    }

    pub async fn insert_request(&self, mig: &str, rr: &str, names: &[&str], seconds: &str) -> Value {
        let body = json!({"name": rr, "instances": names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>(),
                          "requestedRunDuration": {"seconds": seconds}});
        let (status, op) =
            self.post(&format!("{REGION}/instanceGroupManagers/{mig}/resizeRequests"), body).await;
        assert_eq!(status, 200, "{op}");
        op
    }

    pub async fn request(&self, mig: &str, rr: &str) -> Value {
        let (status, v) =
            self.get(&format!("{REGION}/instanceGroupManagers/{mig}/resizeRequests/{rr}")).await;
        assert_eq!(status, 200, "{v}");
        v
    }

    pub async fn target_size(&self, mig: &str) -> i64 {
        let (status, v) = self.get(&format!("{REGION}/instanceGroupManagers/{mig}")).await;
        assert_eq!(status, 200, "{v}");
        v["targetSize"].as_i64().expect("targetSize")
    }

    pub async fn managed(&self, mig: &str) -> Vec<Value> {
        let (status, v) =
            self.post_empty(&format!("{REGION}/instanceGroupManagers/{mig}/listManagedInstances")).await;
        assert_eq!(status, 200, "{v}");
        v["managedInstances"].as_array().cloned().unwrap_or_default()
    }

    /// Polls a resize request until it reaches `state`.
    pub async fn until_state(&self, mig: &str, rr: &str, state: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let v = self.request(mig, rr).await;
            if v["state"] == state {
                return v;
            }
            assert!(Instant::now() < deadline, "never reached {state}: {v}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn instances(&self) -> Vec<Value> {
        let (status, v) = self.get(&format!("{ZONE}/instances")).await;
        assert_eq!(status, 200, "{v}");
        v["items"].as_array().cloned().unwrap_or_default()
    }
}

pub fn mig_body(name: &str) -> Value {
    json!({
        "name": name,
        "description": "slurm-dws/v1 cluster=hpc nodeset=a3u",
        "targetSize": 0,
        "versions": [{"instanceTemplate": "projects/p/regions/us-central1/instanceTemplates/a3u-flex"}],
        "instanceLifecyclePolicy": {"defaultActionOnFailure": "DO_NOTHING"},
        "distributionPolicy": {"zones": [{"zone": "zones/us-central1-a"}], "targetShape": "ANY_SINGLE_ZONE"},
        "updatePolicy": {"instanceRedistributionType": "NONE"},
    })
}

pub async fn start(time_scale: f64) -> (SimHandle, Api) {
    start_with(SimOptions { time_scale, ..SimOptions::default() }).await
}

pub async fn start_with(opts: SimOptions) -> (SimHandle, Api) {
    let handle = sim::start(opts).await.expect("simulator starts");
    let base = handle.base_url();
    assert_eq!(base, format!("http://{}/compute/v1/", handle.addr()));
    let root = format!("http://{}/", handle.addr());
    (handle, Api { http: reqwest::Client::new(), base, root })
}

pub fn assert_google_error(v: &Value, code: u64, reason: &str, mentions: &str) {
    let e = &v["error"];
    assert_eq!(e["code"], code, "{v}");
    assert_eq!(e["errors"][0]["reason"], reason, "{v}");
    assert!(e["errors"][0]["domain"].is_string(), "{v}");
    assert!(e["status"].is_string(), "{v}");
    assert!(e["message"].as_str().unwrap().contains(mentions), "message should mention {mentions}: {v}");
}

/// A zonal MIG's insert body (the same as [`mig_body`] without a distribution policy).
pub fn zonal_mig_body(name: &str) -> Value {
    let mut body = mig_body(name);
    body.as_object_mut().unwrap().remove("distributionPolicy");
    body.as_object_mut().unwrap().remove("updatePolicy");
    body
}

impl Api {
    /// A control call whose status the test checks itself.
    pub async fn control_status(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        self.call(method, format!("{}_sim/{path}", self.root), body).await
    }

    pub async fn insert_zonal_mig(&self, name: &str) {
        let (status, op) = self.post(&format!("{ZONE}/instanceGroupManagers"), zonal_mig_body(name)).await;
        assert_eq!(status, 200, "{op}");
        let done = self.wait(&op).await;
        assert!(done.get("error").is_none(), "{done}");
    }

    /// Inserts a resize request in a MIG given by path (`{REGION}/instanceGroupManagers/m`).
    pub async fn insert_request_at(&self, mig_path: &str, rr: &str, names: &[&str], seconds: &str) -> Value {
        let body = json!({"name": rr, "instances": names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>(),
                          "requestedRunDuration": {"seconds": seconds}});
        let (status, op) = self.post(&format!("{mig_path}/resizeRequests"), body).await;
        assert_eq!(status, 200, "{op}");
        op
    }

    /// Polls a resize request (by MIG path) until it reaches `state`.
    pub async fn until_state_at(&self, mig_path: &str, rr: &str, state: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (status, v) = self.get(&format!("{mig_path}/resizeRequests/{rr}")).await;
            assert_eq!(status, 200, "{v}");
            if v["state"] == state {
                return v;
            }
            assert!(Instant::now() < deadline, "never reached {state}: {v}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `listManagedInstances` of a MIG given by path.
    pub async fn managed_at(&self, mig_path: &str) -> Vec<Value> {
        let (status, v) = self.post_empty(&format!("{mig_path}/listManagedInstances")).await;
        assert_eq!(status, 200, "{v}");
        v["managedInstances"].as_array().cloned().unwrap_or_default()
    }

    /// `instances.get` in the test zone: (HTTP status, body).
    pub async fn instance(&self, name: &str) -> (u16, Value) {
        self.get(&format!("{ZONE}/instances/{name}")).await
    }

    /// Polls until `instances.get` of `name` shows `status`.
    pub async fn until_vm_status(&self, name: &str, status: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (code, v) = self.instance(name).await;
            if code == 200 && v["status"] == status {
                return v;
            }
            assert!(Instant::now() < deadline, "{name} never reached {status}: {code} {v}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
