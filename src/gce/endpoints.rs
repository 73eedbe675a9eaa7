//! The Compute API methods slurm-dws uses, one `Client` method each, plus pagination and
//! operation waiting.
//!
//! Paths and method ids follow the discovery document (`compute.regionInstanceGroupManagers.
//! insert` is counted as `regionInstanceGroupManagers.insert`). Every mutation takes the
//! caller's `request_id` (a UUID persisted before the call) and sends it as `?requestId=`.

use std::time::Duration;

use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::time::Instant;

use super::client::{Call, Client, Location};
use super::create::{CreateInstancesRequest, MAX_CREATE_INSTANCES};
use super::error::{GceError, OperationFailed};
use super::lean_pages::{LeanPage, VmRecall};
use super::lean_vms::LeanVm;
use super::types::{
    last_segment, DeleteInstancesRequest, Instance, InstanceAggregatedPage, InstanceGroupManager,
    InstanceGroupManagerResizeRequest, InstanceTemplate, MachineType, ManagedInstance, Operation, Page,
    Unreachable,
};

/// Items per page asked of list calls (GCE's maximum).
const PAGE_SIZE: u32 = 500;

/// Most instances one `deleteInstances` call may name.
pub const MAX_DELETE_INSTANCES: usize = 1000;

/// GCE's `wait` returns after about two minutes; give the HTTP request a little more.
const WAIT_CALL_TIMEOUT: Duration = Duration::from_secs(150);

/// Where an operation lives: zonal, regional, or global.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum OperationScope {
    Zone(String),
    Region(String),
    Global,
}

impl OperationScope {
    /// The scope of `op`, from its `zone` / `region` URL.
    pub fn of(op: &Operation) -> Self {
        if !op.zone.is_empty() {
            Self::Zone(last_segment(&op.zone).to_string())
        } else if !op.region.is_empty() {
            Self::Region(last_segment(&op.region).to_string())
        } else {
            Self::Global
        }
    }

    fn parts(&self) -> (&'static str, String) {
        match self {
            Self::Zone(z) => ("zoneOperations", format!("zones/{z}/operations")),
            Self::Region(r) => ("regionOperations", format!("regions/{r}/operations")),
            Self::Global => ("globalOperations", "global/operations".to_string()),
        }
    }
}

impl From<&Location> for OperationScope {
    fn from(loc: &Location) -> Self {
        match loc {
            Location::Region(r) => Self::Region(r.clone()),
            Location::Zone(z) => Self::Zone(z.clone()),
        }
    }
}

impl Operation {
    /// `Ok(self)` when the operation finished without error (or is still running), else the
    /// typed [`GceError::Operation`].
    pub fn into_result(self) -> Result<Self, GceError> {
        let failed = !self.errors().is_empty()
            || (self.is_done() && self.http_error_status_code.is_some_and(|s| s >= 400));
        if failed {
            Err(GceError::Operation(Box::new(OperationFailed { operation: self })))
        } else {
            Ok(self)
        }
    }
}

/// A request id must be a UUID other than all zeros; catching a caller's bug here beats a
/// 400 from GCE (or, worse, two callers sharing an id).
fn check_request_id(request_id: &str) -> Result<(), GceError> {
    match uuid::Uuid::parse_str(request_id) {
        Ok(u) if !u.is_nil() => Ok(()),
        _ => Err(GceError::InvalidArgument(format!("requestId {request_id:?} is not a non-nil UUID"))),
    }
}

pub(crate) fn to_body<T: Serialize>(v: &T) -> Result<Vec<u8>, GceError> {
    serde_json::to_vec(v).map_err(|e| GceError::InvalidArgument(format!("request body: {e}")))
}

impl Client {
    pub(crate) fn mutation(
        &self,
        method: String,
        verb: Method,
        path: String,
        request_id: &str,
    ) -> Result<Call, GceError> {
        check_request_id(request_id)?;
        let mut call = Call::new(method, verb, path);
        call.query.push(("requestId", request_id.to_string()));
        Ok(call)
    }

    /// Fetches every page of a list call. A repeated page token means the server is looping:
    /// that is reported rather than followed for ever.
    pub(crate) async fn list_all<T: DeserializeOwned>(
        &self,
        method: String,
        verb: Method,
        path: String,
        filter: Option<&str>,
        fields: Option<&str>,
    ) -> Result<Vec<T>, GceError> {
        let mut out = Vec::new();
        let mut token = String::new();
        loop {
            let mut call = Call::new(method.clone(), verb.clone(), path.clone()).fields(fields);
            call.query.push(("maxResults", PAGE_SIZE.to_string()));
            if let Some(f) = filter.filter(|f| !f.is_empty()) {
                call.query.push(("filter", f.to_string()));
            }
            if !token.is_empty() {
                call.query.push(("pageToken", token.clone()));
            }
            let page: Page<T> = self.execute(&call).await?;
            out.extend(page.items);
            if page.next_page_token.is_empty() {
                return Ok(out);
            }
            if page.next_page_token == token {
                return Err(GceError::Decode {
                    method,
                    message: "the server returned the same nextPageToken twice".into(),
                });
            }
            token = page.next_page_token;
        }
    }

    fn mig_base(&self, loc: &Location) -> (&'static str, String) {
        (
            loc.collection("instanceGroupManagers", "regionInstanceGroupManagers"),
            format!("{}/{}/instanceGroupManagers", self.project_path(), loc.path()),
        )
    }

    // ----- instance group managers -------------------------------------------------------

    /// Creates a MIG (`instanceGroupManagers.insert` / `regionInstanceGroupManagers.insert`).
    pub async fn insert_mig(
        &self,
        loc: &Location,
        mig: &InstanceGroupManager,
        request_id: &str,
    ) -> Result<Operation, GceError> {
        let (coll, base) = self.mig_base(loc);
        let mut call = self.mutation(format!("{coll}.insert"), Method::POST, base, request_id)?;
        call.body = Some(to_body(mig)?);
        self.execute(&call).await
    }

    /// Reads one MIG.
    pub async fn get_mig(&self, loc: &Location, name: &str) -> Result<InstanceGroupManager, GceError> {
        let (coll, base) = self.mig_base(loc);
        self.execute(&Call::new(format!("{coll}.get"), Method::GET, format!("{base}/{name}"))).await
    }

    /// Lists every MIG of the location (all pages), optionally filtered.
    pub async fn list_migs(
        &self,
        loc: &Location,
        filter: Option<&str>,
    ) -> Result<Vec<InstanceGroupManager>, GceError> {
        self.list_migs_fields(loc, filter, None).await
    }

    /// [`Client::list_migs`] asking only for `fields` (a partial response, e.g.
    /// `items(name,targetSize),nextPageToken,warning`); the fields left out are empty.
    pub async fn list_migs_fields(
        &self,
        loc: &Location,
        filter: Option<&str>,
        fields: Option<&str>,
    ) -> Result<Vec<InstanceGroupManager>, GceError> {
        let (coll, base) = self.mig_base(loc);
        self.list_all(format!("{coll}.list"), Method::GET, base, filter, fields).await
    }

    /// Deletes a MIG, with its resize requests and VMs.
    pub async fn delete_mig(
        &self,
        loc: &Location,
        name: &str,
        request_id: &str,
    ) -> Result<Operation, GceError> {
        let (coll, base) = self.mig_base(loc);
        let call =
            self.mutation(format!("{coll}.delete"), Method::DELETE, format!("{base}/{name}"), request_id)?;
        self.execute(&call).await
    }

    /// Deletes VMs of a MIG and lowers its target size. A regional MIG takes instance URLs only
    /// (`zones/{zone}/instances/{name}`: a bare name fails the whole Operation); a zonal one also
    /// takes names, the only way to name a queued instance (never mixed with URLs in one call).
    /// At most [`MAX_DELETE_INSTANCES`] per call; the caller batches, each batch with its own
    /// request id. Instances GCE does not know are skipped, not an error.
    pub async fn delete_instances(
        &self,
        loc: &Location,
        mig: &str,
        instances: &[String],
        request_id: &str,
    ) -> Result<Operation, GceError> {
        if instances.is_empty() || instances.len() > MAX_DELETE_INSTANCES {
            return Err(GceError::InvalidArgument(format!(
                "deleteInstances takes 1..={MAX_DELETE_INSTANCES} instances, got {}",
                instances.len()
            )));
        }
        let (coll, base) = self.mig_base(loc);
        let mut call = self.mutation(
            format!("{coll}.deleteInstances"),
            Method::POST,
            format!("{base}/{mig}/deleteInstances"),
            request_id,
        )?;
        call.body = Some(to_body(&DeleteInstancesRequest {
            instances: instances.to_vec(),
            skip_instances_on_validation_error: true,
        })?);
        self.execute(&call).await
    }

    /// Creates VMs by name in a MIG (`createInstances`; standard and spot nodesets). The Operation is
    /// DONE once GCE took the request; the VMs come later, and `listManagedInstances` says how their
    /// creation goes (`lastAttempt.errors` on a stockout). At most [`MAX_CREATE_INSTANCES`] per call.
    pub async fn create_instances(
        &self,
        loc: &Location,
        mig: &str,
        body: &CreateInstancesRequest,
        request_id: &str,
    ) -> Result<Operation, GceError> {
        if body.instances.is_empty() || body.instances.len() > MAX_CREATE_INSTANCES {
            return Err(GceError::InvalidArgument(format!(
                "createInstances takes 1..={MAX_CREATE_INSTANCES} instances, got {}",
                body.instances.len()
            )));
        }
        let (coll, base) = self.mig_base(loc);
        let mut call = self.mutation(
            format!("{coll}.createInstances"),
            Method::POST,
            format!("{base}/{mig}/createInstances"),
            request_id,
        )?;
        call.body = Some(to_body(body)?);
        self.execute(&call).await
    }

    /// Lists every managed instance of a MIG (all pages), optionally filtered. Includes
    /// queued instances, which have a name but no instance URL yet.
    pub async fn list_managed_instances(
        &self,
        loc: &Location,
        mig: &str,
        filter: Option<&str>,
    ) -> Result<Vec<ManagedInstance>, GceError> {
        let (coll, base) = self.mig_base(loc);
        self.list_all(
            format!("{coll}.listManagedInstances"),
            Method::POST,
            format!("{base}/{mig}/listManagedInstances"),
            filter,
            None,
        )
        .await
    }

    /// [`Client::list_managed_instances`] asking only for `fields`.
    pub async fn list_managed_instances_fields(
        &self,
        loc: &Location,
        mig: &str,
        fields: Option<&str>,
    ) -> Result<Vec<ManagedInstance>, GceError> {
        let (coll, base) = self.mig_base(loc);
        self.list_all(
            format!("{coll}.listManagedInstances"),
            Method::POST,
            format!("{base}/{mig}/listManagedInstances"),
            None,
            fields,
        )
        .await
    }

    // ----- resize requests ---------------------------------------------------------------

    fn rr_base(&self, loc: &Location, mig: &str) -> (&'static str, String) {
        let (_, base) = self.mig_base(loc);
        (
            loc.collection("instanceGroupManagerResizeRequests", "regionInstanceGroupManagerResizeRequests"),
            format!("{base}/{mig}/resizeRequests"),
        )
    }

    /// Creates a resize request on `mig`: the MIG's target size grows at once and the VMs
    /// queue until capacity exists.
    pub async fn insert_resize_request(
        &self,
        loc: &Location,
        mig: &str,
        request: &InstanceGroupManagerResizeRequest,
        request_id: &str,
    ) -> Result<Operation, GceError> {
        let (coll, base) = self.rr_base(loc, mig);
        let mut call = self.mutation(format!("{coll}.insert"), Method::POST, base, request_id)?;
        call.body = Some(to_body(request)?);
        self.execute(&call).await
    }

    /// Reads one resize request.
    pub async fn get_resize_request(
        &self,
        loc: &Location,
        mig: &str,
        name: &str,
    ) -> Result<InstanceGroupManagerResizeRequest, GceError> {
        self.get_resize_request_fields(loc, mig, name, None).await
    }

    /// [`Client::get_resize_request`] asking only for `fields` (e.g. `name,state,status`).
    pub async fn get_resize_request_fields(
        &self,
        loc: &Location,
        mig: &str,
        name: &str,
        fields: Option<&str>,
    ) -> Result<InstanceGroupManagerResizeRequest, GceError> {
        let (coll, base) = self.rr_base(loc, mig);
        self.execute(&Call::new(format!("{coll}.get"), Method::GET, format!("{base}/{name}")).fields(fields))
            .await
    }

    /// Lists every resize request of a MIG (all pages), optionally filtered.
    pub async fn list_resize_requests(
        &self,
        loc: &Location,
        mig: &str,
        filter: Option<&str>,
    ) -> Result<Vec<InstanceGroupManagerResizeRequest>, GceError> {
        let (coll, base) = self.rr_base(loc, mig);
        self.list_all(format!("{coll}.list"), Method::GET, base, filter, None).await
    }

    /// Cancels a queued (ACCEPTED) resize request. On a final request GCE accepts the call
    /// and the Operation ends with `CONDITION_NOT_MET`.
    pub async fn cancel_resize_request(
        &self,
        loc: &Location,
        mig: &str,
        name: &str,
        request_id: &str,
    ) -> Result<Operation, GceError> {
        let (coll, base) = self.rr_base(loc, mig);
        let call = self.mutation(
            format!("{coll}.cancel"),
            Method::POST,
            format!("{base}/{name}/cancel"),
            request_id,
        )?;
        self.execute(&call).await
    }

    /// Deletes a final (SUCCEEDED / FAILED / CANCELLED) resize request. Its VMs stay.
    pub async fn delete_resize_request(
        &self,
        loc: &Location,
        mig: &str,
        name: &str,
        request_id: &str,
    ) -> Result<Operation, GceError> {
        let (coll, base) = self.rr_base(loc, mig);
        let call =
            self.mutation(format!("{coll}.delete"), Method::DELETE, format!("{base}/{name}"), request_id)?;
        self.execute(&call).await
    }

    // ----- instances ---------------------------------------------------------------------

    /// Reports the host of a reservation-bound VM faulty (`instances.reportHostAsFaulty`,
    /// disruptionSchedule IMMEDIATE, one fault reason): GCE restarts the VM on another host. Its
    /// Operation ends when that is done (docs/gce-facts.md, "Faulty hosts").
    pub async fn report_host_as_faulty(
        &self,
        zone: &str,
        name: &str,
        behavior: &str,
        description: &str,
        request_id: &str,
    ) -> Result<Operation, GceError> {
        let mut call = self.mutation(
            "instances.reportHostAsFaulty".into(),
            Method::POST,
            format!("{}/zones/{zone}/instances/{name}/reportHostAsFaulty", self.project_path()),
            request_id,
        )?;
        call.body = Some(to_body(&serde_json::json!({
            "disruptionSchedule": "IMMEDIATE",
            "faultReasons": [{"behavior": behavior, "description": description}],
        }))?);
        self.execute(&call).await
    }

    /// Reads one VM.
    pub async fn get_instance(&self, zone: &str, name: &str) -> Result<Instance, GceError> {
        self.execute(&Call::new(
            "instances.get".into(),
            Method::GET,
            format!("{}/zones/{zone}/instances/{name}", self.project_path()),
        ))
        .await
    }

    /// Lists every VM of a zone (all pages), optionally filtered
    /// (`name eq 'hpc-a3u-.*'` or `labels.k = "v"`; do not mix the styles).
    pub async fn list_instances(&self, zone: &str, filter: Option<&str>) -> Result<Vec<Instance>, GceError> {
        self.list_all(
            "instances.list".into(),
            Method::GET,
            format!("{}/zones/{zone}/instances", self.project_path()),
            filter,
            None,
        )
        .await
    }

    /// Lists every VM of the project in every zone that answered (all pages), optionally
    /// filtered, and the zones that did not: GCE answers an aggregated list with a partial success
    /// when a zone is unreachable, and a VM missing from such an answer may well exist. Each VM's
    /// `zone` says where it is.
    pub async fn aggregated_list_instances(
        &self,
        filter: Option<&str>,
    ) -> Result<(Vec<Instance>, Unreachable), GceError> {
        let mut out = Vec::new();
        let unreachable = self.aggregated_list_instances_each(filter, |i| out.push(i)).await?;
        Ok((out, unreachable))
    }

    /// [`Client::aggregated_list_instances`], handing each VM to `each` as its page arrives: a caller
    /// that keeps a few fields of 10,000 VMs never holds 10,000 full `Instance`s at once. Returns
    /// what the answer left out.
    pub async fn aggregated_list_instances_each(
        &self,
        filter: Option<&str>,
        each: impl FnMut(Instance),
    ) -> Result<Unreachable, GceError> {
        self.aggregated_list_instances_fields(filter, None, each).await
    }

    /// [`Client::aggregated_list_instances_each`] asking only for `fields`, in GCE's syntax for an
    /// aggregated list (its scopes' keys contain `/`, so only `*` reaches them):
    /// `items/*/instances(name,status),items/*/warning,nextPageToken,unreachables,warning`. A VM whose
    /// `zone` was left out gets it from its scope's key.
    pub async fn aggregated_list_instances_fields(
        &self,
        filter: Option<&str>,
        fields: Option<&str>,
        mut each: impl FnMut(Instance),
    ) -> Result<Unreachable, GceError> {
        let method = "instances.aggregatedList".to_string();
        let path = format!("{}/aggregated/instances", self.project_path());
        let mut token = String::new();
        let mut unreachable = Unreachable::default();
        loop {
            let mut call = Call::new(method.clone(), Method::GET, path.clone()).fields(fields);
            call.query.push(("maxResults", PAGE_SIZE.to_string()));
            if let Some(f) = filter.filter(|f| !f.is_empty()) {
                call.query.push(("filter", f.to_string()));
            }
            if !token.is_empty() {
                call.query.push(("pageToken", token.clone()));
            }
            let page: InstanceAggregatedPage = self.execute(&call).await?;
            unreachable.add_page(&page);
            for (scope, list) in page.items {
                for mut i in list.instances {
                    // A partial response (`fields=`) may leave `zone` out; the scope key says it.
                    if i.zone.is_empty() {
                        if let Some(zone) = scope.strip_prefix("zones/") {
                            i.zone = zone.to_string();
                        }
                    }
                    each(i);
                }
            }
            if page.next_page_token.is_empty() {
                return Ok(unreachable);
            }
            if page.next_page_token == token {
                return Err(GceError::Decode {
                    method,
                    message: "the server returned the same nextPageToken twice".into(),
                });
            }
            token = page.next_page_token;
        }
    }

    /// [`Client::aggregated_list_instances_fields`] decoded lean ([`LeanVm`], borrowed from each
    /// page): `each` gets every VM with its zone's name. Returns what the answer left out. With a
    /// `recall` of this list's last read, the VMs unchanged since are taken by length and hash, not
    /// decoded again (`lean_pages.rs`); a failed read empties it.
    pub async fn aggregated_list_vms_lean(
        &self,
        filter: Option<&str>,
        fields: Option<&str>,
        mut recall: Option<&mut VmRecall>,
        mut each: impl FnMut(&str, &LeanVm<'_>),
    ) -> Result<Unreachable, GceError> {
        if let Some(recall) = recall.as_deref_mut() {
            recall.begin();
        }
        let listed = self.vm_pages(filter, fields, recall.as_deref_mut(), &mut each).await;
        if let Some(recall) = recall {
            match &listed {
                Ok(_) => recall.end(),
                Err(_) => recall.forget(),
            }
        }
        listed
    }

    /// The pages of [`Client::aggregated_list_vms_lean`].
    async fn vm_pages(
        &self,
        filter: Option<&str>,
        fields: Option<&str>,
        mut recall: Option<&mut VmRecall>,
        each: &mut impl FnMut(&str, &LeanVm<'_>),
    ) -> Result<Unreachable, GceError> {
        let method = "instances.aggregatedList".to_string();
        let path = format!("{}/aggregated/instances", self.project_path());
        let mut token = String::new();
        let mut unreachable = Unreachable::default();
        // One buffer for every page (each is decoded before the next is asked for).
        let mut body = Vec::new();
        loop {
            let mut call = Call::new(method.clone(), Method::GET, path.clone()).fields(fields);
            call.query.push(("maxResults", PAGE_SIZE.to_string()));
            if let Some(f) = filter.filter(|f| !f.is_empty()) {
                call.query.push(("filter", f.to_string()));
            }
            if !token.is_empty() {
                call.query.push(("pageToken", token.clone()));
            }
            // A retried page may hand some VMs twice; `each` keeps them by name.
            let next = self
                .execute_buffered(&call, &mut body, |bytes| {
                    let page = LeanPage::read(bytes, recall.as_deref_mut(), |zone, vm| each(zone, &vm))?;
                    page.unreachable_into(&mut unreachable);
                    Ok(page.next_page_token)
                })
                .await?;
            if next.is_empty() {
                return Ok(unreachable);
            }
            if next == token {
                return Err(GceError::Decode {
                    method,
                    message: "the server returned the same nextPageToken twice".into(),
                });
            }
            token = next;
        }
    }

    // ----- instance templates ------------------------------------------------------------

    /// Reads a global instance template.
    pub async fn get_instance_template(&self, name: &str) -> Result<InstanceTemplate, GceError> {
        self.execute(&Call::new(
            "instanceTemplates.get".into(),
            Method::GET,
            format!("{}/global/instanceTemplates/{name}", self.project_path()),
        ))
        .await
    }

    /// Reads a regional instance template.
    pub async fn get_region_instance_template(
        &self,
        region: &str,
        name: &str,
    ) -> Result<InstanceTemplate, GceError> {
        self.execute(&Call::new(
            "regionInstanceTemplates.get".into(),
            Method::GET,
            format!("{}/regions/{region}/instanceTemplates/{name}", self.project_path()),
        ))
        .await
    }

    /// Reads the template a nodeset names, given as a URL or partial URL
    /// (`projects/p/regions/r/instanceTemplates/t`, `.../global/instanceTemplates/t`) or a
    /// bare global template name. The project in the reference wins over the client's.
    pub async fn get_instance_template_ref(&self, reference: &str) -> Result<InstanceTemplate, GceError> {
        let r = TemplateRef::parse(reference)?;
        let project = r.project.unwrap_or(self.project());
        let (method, path) = match r.region {
            Some(region) => (
                "regionInstanceTemplates.get",
                format!("projects/{project}/regions/{region}/instanceTemplates/{}", r.name),
            ),
            None => {
                ("instanceTemplates.get", format!("projects/{project}/global/instanceTemplates/{}", r.name))
            }
        };
        self.execute(&Call::new(method.into(), Method::GET, path)).await
    }

    // ----- machine types -----------------------------------------------------------------

    /// Reads a machine type of `zone` by name (`a3-ultragpu-8g`), in the client's project.
    pub async fn get_machine_type(&self, zone: &str, name: &str) -> Result<MachineType, GceError> {
        self.execute(&Call::new(
            "machineTypes.get".into(),
            Method::GET,
            format!("{}/zones/{zone}/machineTypes/{name}", self.project_path()),
        ))
        .await
    }

    // ----- operations --------------------------------------------------------------------

    /// Reads an operation.
    pub async fn get_operation(&self, scope: &OperationScope, name: &str) -> Result<Operation, GceError> {
        let (coll, base) = scope.parts();
        self.execute(&Call::new(
            format!("{coll}.get"),
            Method::GET,
            format!("{}/{base}/{name}", self.project_path()),
        ))
        .await
    }

    /// One `wait` call: returns when the operation is DONE or after about two minutes,
    /// sometimes at once. Use [`Client::wait_done`] to wait for the end.
    pub async fn wait_operation(&self, scope: &OperationScope, name: &str) -> Result<Operation, GceError> {
        self.wait_once(scope, name, None).await
    }

    async fn wait_once(
        &self,
        scope: &OperationScope,
        name: &str,
        deadline: Option<Instant>,
    ) -> Result<Operation, GceError> {
        let (coll, base) = scope.parts();
        let mut call = Call::new(
            format!("{coll}.wait"),
            Method::POST,
            format!("{}/{base}/{name}/wait", self.project_path()),
        );
        let mut timeout = WAIT_CALL_TIMEOUT.max(self.request_timeout());
        if let Some(d) = deadline {
            timeout = timeout.min(d.saturating_duration_since(Instant::now()));
        }
        call.timeout = Some(timeout);
        call.deadline = deadline;
        self.execute(&call).await
    }

    /// Waits until `op` is DONE or `deadline` passes, looping over `wait` (which GCE ends
    /// early). A DONE operation with errors is returned as [`GceError::Operation`]; a still
    /// running one at the deadline as [`GceError::OperationTimeout`] (retryable: wait again
    /// later, the operation continues without us).
    pub async fn wait_done(&self, op: &Operation, deadline: Instant) -> Result<Operation, GceError> {
        let scope = OperationScope::of(op);
        let mut current = op.clone();
        let mut early_returns: u32 = 0;
        loop {
            if current.is_done() {
                return current.into_result();
            }
            let started = Instant::now();
            if started >= deadline {
                return Err(GceError::OperationTimeout(Box::new(current)));
            }
            match self.wait_once(&scope, &current.name, Some(deadline)).await {
                Ok(next) => current = next,
                Err(e) if e.is_retryable() && Instant::now() >= deadline => {
                    return Err(GceError::OperationTimeout(Box::new(current)));
                }
                Err(e) => return Err(e),
            }
            // A `wait` that answers "not done" at once would make this a busy loop: pace it.
            if !current.is_done() && started.elapsed() < Duration::from_secs(1) {
                let pause = Duration::from_millis(250 << early_returns.min(5))
                    .min(deadline.saturating_duration_since(Instant::now()));
                early_returns += 1;
                tokio::time::sleep(pause).await;
            } else {
                early_returns = 0;
            }
        }
    }
}

/// An instance template reference, parsed.
#[derive(Debug, PartialEq, Eq)]
struct TemplateRef<'a> {
    project: Option<&'a str>,
    region: Option<&'a str>,
    name: &'a str,
}

impl<'a> TemplateRef<'a> {
    fn parse(reference: &'a str) -> Result<Self, GceError> {
        let bad = || GceError::InvalidArgument(format!("instance template {reference:?}"));
        let segs: Vec<&str> = reference.trim_end_matches('/').split('/').filter(|s| !s.is_empty()).collect();
        let name = *segs.last().ok_or_else(bad)?;
        if segs.len() == 1 {
            return Ok(Self { project: None, region: None, name });
        }
        let find = |key: &str| segs.iter().position(|s| *s == key).and_then(|i| segs.get(i + 1).copied());
        if segs.len() < 2 || segs[segs.len() - 2] != "instanceTemplates" {
            return Err(bad());
        }
        let region = find("regions");
        if region.is_none() && !segs.contains(&"global") {
            return Err(bad());
        }
        Ok(Self { project: find("projects"), region, name })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_references() {
        let r = TemplateRef::parse("projects/p1/regions/us-central1/instanceTemplates/a3u").unwrap();
        assert_eq!(r, TemplateRef { project: Some("p1"), region: Some("us-central1"), name: "a3u" });
        let r = TemplateRef::parse(
            "https://www.googleapis.com/compute/v1/projects/p2/global/instanceTemplates/t",
        )
        .unwrap();
        assert_eq!((r.project, r.region, r.name), (Some("p2"), None, "t"));
        let r = TemplateRef::parse("plain").unwrap();
        assert_eq!((r.project, r.region, r.name), (None, None, "plain"));
        assert!(TemplateRef::parse("projects/p/zones/z/instances/x").is_err());
        assert!(TemplateRef::parse("").is_err());
    }

    #[test]
    fn request_ids_must_be_real_uuids() {
        assert!(check_request_id("6f1c1f4e-2a0b-4c8e-9a53-2f4f1c9d7e10").is_ok());
        assert!(check_request_id("00000000-0000-0000-0000-000000000000").is_err());
        assert!(check_request_id("retry-1").is_err());
    }

    #[test]
    fn operation_scope_from_urls() {
        let op = Operation {
            zone: "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a".into(),
            ..Default::default()
        };
        assert_eq!(OperationScope::of(&op), OperationScope::Zone("us-central1-a".into()));
        let op = Operation { region: "projects/p/regions/us-central1".into(), ..Default::default() };
        assert_eq!(OperationScope::of(&op), OperationScope::Region("us-central1".into()));
        assert_eq!(OperationScope::of(&Operation::default()), OperationScope::Global);
    }

    #[test]
    fn into_result_reports_failed_operations() {
        let ok = Operation { status: crate::gce::types::OperationStatus::Done, ..Default::default() };
        assert!(ok.into_result().is_ok());
        let failed: Operation = serde_json::from_value(serde_json::json!({
            "name": "op", "status": "DONE", "httpErrorStatusCode": 403,
            "error": {"errors": [{"code": "QUOTA_EXCEEDED", "message": "Quota 'GPUS_ALL_REGIONS' exceeded."}]}
        }))
        .unwrap();
        let err = failed.into_result().unwrap_err();
        assert_eq!(err.class(), crate::gce::error::ErrorClass::Quota);
    }
}
