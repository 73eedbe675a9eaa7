//! Reserved capacity over raw HTTP: reservations, blocks and sub-blocks, calendar-mode future
//! reservations and their window (time-accelerated), RESERVATION_BOUND consumption through resize
//! requests and createInstances, all-or-nothing, and the refusals in GCE's words.
// Test rig: waits for the simulator's ticker in real time.
#![allow(clippy::disallowed_methods)]

mod common;
use common::*;
use reqwest::Method;
use std::time::{Duration, Instant};

const RES: &str = "projects/p/zones/us-central1-a/reservations";

/// A template whose VMs consume `value` (a reservation, block or sub-block) with `model`.
async fn load_template(api: &Api, name: &str, model: &str, machine: &str, value: Option<&str>) {
    let mut props = json!({"machineType": machine,
        "scheduling": {"provisioningModel": model, "instanceTerminationAction": "DELETE",
                       "onHostMaintenance": "TERMINATE", "automaticRestart": false}});
    if let Some(v) = value {
        props["reservationAffinity"] = json!({"consumeReservationType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name", "values": [v]});
    }
    api.control(Method::POST, "templates", Some(json!({"name": name, "properties": props}))).await;
}

async fn insert_mig_with(api: &Api, mig: &str, template: &str) {
    let mut body = mig_body(mig);
    body["versions"] =
        json!([{"instanceTemplate": format!("projects/p/global/instanceTemplates/{template}")}]);
    let (status, op) = api.post(&format!("{REGION}/instanceGroupManagers"), body).await;
    assert_eq!(status, 200, "{op}");
    assert!(api.wait(&op).await.get("error").is_none());
}

/// A resize request with no run duration (reservation-bound VMs run until the reservation ends).
async fn bound_request(api: &Api, mig: &str, rr: &str, names: &[&str]) -> (u16, Value) {
    let body = json!({"name": rr, "instances": names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>()});
    api.post(&format!("{REGION}/instanceGroupManagers/{mig}/resizeRequests"), body).await
}

async fn reservation(api: &Api, spec: Value) {
    api.control(Method::POST, "reservations", Some(spec)).await;
}

async fn sim_reservations(api: &Api) -> Vec<Value> {
    api.control(Method::GET, "reservations", None).await.as_array().cloned().unwrap()
}

/// Polls until `check` holds for the value `read` gives.
async fn until<F, Fut>(what: &str, mut read: F, check: impl Fn(&Value) -> bool) -> Value
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Value>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = read().await;
        if check(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "{what} never happened: {v}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn reservations_blocks_and_sub_blocks_are_served_with_lists_filters_and_fields() {
    let (sim, api) = start(1.0).await;
    reservation(&api, json!({"project": "p", "zone": "us-central1-a", "name": "dense", "count": 6,
        "machine_type": "a4x-highgpu-4g", "deployment_type": "DENSE", "scheduling_type": "GROUPED",
        "blocks": [{"name": "b1", "count": 4, "sub_blocks": [{"name": "s1", "count": 2}, {"name": "s2", "count": 2}]},
                   {"name": "b2", "count": 2}], "in_use_elsewhere": 3})).await;
    reservation(
        &api,
        json!({"project": "p", "zone": "us-central1-a", "name": "plain", "count": 2,
        "machine_type": "a3-ultragpu-8g", "delete_at": "2099-01-01T00:00:00Z"}),
    )
    .await;

    let (status, r) = api.get(&format!("{RES}/dense")).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["kind"], "compute#reservation");
    assert_eq!(r["status"], "READY");
    assert_eq!(r["specificReservation"]["count"], "6");
    assert_eq!(r["specificReservation"]["inUseCount"], "3");
    assert_eq!(r["specificReservation"]["instanceProperties"]["machineType"], "a4x-highgpu-4g");
    assert_eq!(r["specificReservationRequired"], true);
    assert_eq!(r["deploymentType"], "DENSE");
    assert_eq!(r["resourceStatus"]["reservationBlockCount"], 2);
    assert_eq!(r["selfLink"], format!("https://www.googleapis.com/compute/v1/{RES}/dense"));

    let (_, list) =
        api.get(&format!("{RES}?filter=name%20%3D%20plain&fields=items(name,deleteAtTime)")).await;
    assert_eq!(list["items"], json!([{"name": "plain", "deleteAtTime": "2099-01-01T00:00:00.000+00:00"}]));
    let (_, page) = api.get(&format!("{RES}?maxResults=1")).await;
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    assert!(page["nextPageToken"].is_string(), "{page}");

    let (_, blocks) = api.get(&format!("{RES}/dense/reservationBlocks")).await;
    let blocks = blocks["items"].as_array().unwrap().clone();
    assert_eq!(blocks.len(), 2);
    // Used elsewhere: 3 units, the first sub-blocks first.
    assert_eq!((blocks[0]["count"].clone(), blocks[0]["inUseCount"].clone()), (json!(4), json!(3)));
    assert_eq!(blocks[0]["reservationSubBlockCount"], 2);
    assert_eq!(blocks[0]["reservationSubBlockInUseCount"], 2);
    let (status, b2) = api.get(&format!("{RES}/dense/reservationBlocks/b2")).await;
    assert_eq!(status, 200);
    assert_eq!(b2["resource"]["name"], "b2");
    assert_eq!(b2["resource"]["inUseCount"], 0);
    assert!(b2["resource"]["physicalTopology"]["block"].is_string(), "{b2}");

    let (_, subs) = api.get(&format!("{RES}/dense/reservationBlocks/b1/reservationSubBlocks")).await;
    let used: Vec<Value> =
        subs["items"].as_array().unwrap().iter().map(|s| s["inUseCount"].clone()).collect();
    assert_eq!(used, vec![json!(2), json!(1)]);
    let (status, s) =
        api.get(&format!("{RES}/dense/reservationBlocks/b2/reservationSubBlocks/b2-sub-0")).await;
    assert_eq!(status, 200, "{s}");
    assert_eq!(s["resource"]["count"], 2);
    assert_eq!(s["resource"]["physicalTopology"]["block"], b2["resource"]["physicalTopology"]["block"]);

    let (_, agg) = api.get("projects/p/aggregated/reservations").await;
    assert_eq!(agg["items"]["zones/us-central1-a"]["reservations"].as_array().unwrap().len(), 2);
    for missing in [format!("{RES}/nope"), format!("{RES}/dense/reservationBlocks/b9")] {
        let (status, e) = api.get(&missing).await;
        assert_google_error(&e, 404, "notFound", "was not found");
        assert_eq!(status, 404);
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn a_request_waits_whole_for_free_units_never_takes_part_and_fails_beyond_the_count() {
    let (sim, api) = start(1.0).await;
    reservation(
        &api,
        json!({"project": "p", "zone": "us-central1-a", "name": "r4", "count": 4,
        "machine_type": "a3-ultragpu-8g", "in_use_elsewhere": 2}),
    )
    .await;
    load_template(&api, "rb", "RESERVATION_BOUND", "a3-ultragpu-8g", Some("projects/p/reservations/r4"))
        .await;
    insert_mig_with(&api, "hpc-r", "rb").await;

    let (status, op) = bound_request(&api, "hpc-r", "two", &["n-0", "n-1"]).await;
    assert_eq!(status, 200, "{op}");
    let rr = api.until_state("hpc-r", "two", "SUCCEEDED").await;
    assert!(rr.get("requestedRunDuration").is_none(), "{rr}");
    let vm = api.until_vm_status("n-0", "RUNNING").await;
    assert_eq!(vm["scheduling"]["provisioningModel"], "RESERVATION_BOUND");
    assert!(vm["resourceStatus"].get("scheduling").is_none(), "no termination time: {vm}");
    assert_eq!(
        vm["resourceStatus"]["reservationConsumptionInfo"]["consumedReservation"],
        format!("https://www.googleapis.com/compute/v1/{RES}/r4")
    );
    let (_, r) = api.get(&format!("{RES}/r4")).await;
    assert_eq!(r["specificReservation"]["inUseCount"], "4");

    // Fits the count, not what is free: waits whole, with GCE's reason, and no VM of it exists.
    bound_request(&api, "hpc-r", "four", &["n-2", "n-3", "n-4", "n-5"]).await;
    let rr =
        until("lastAttempt", || api.request("hpc-r", "four"), |v| v["status"]["lastAttempt"].is_object())
            .await;
    assert_eq!(rr["state"], "ACCEPTED");
    let err = &rr["status"]["lastAttempt"]["error"]["errors"][0];
    assert_eq!(err["code"], "CONDITION_NOT_MET");
    assert_eq!(
        err["message"],
        "Specified reservation 'r4' does not have available resources for the request."
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(api.instances().await.len(), 2);
    assert_eq!(api.request("hpc-r", "four").await["state"], "ACCEPTED");

    // More than the reservation holds: fails at once, targetSize given back.
    bound_request(&api, "hpc-r", "six", &["m-0", "m-1", "m-2", "m-3", "m-4", "m-5"]).await;
    let rr = api.until_state("hpc-r", "six", "FAILED").await;
    assert_eq!(rr["status"]["error"]["errors"][0]["code"], "CONDITION_NOT_MET");
    assert_eq!(api.target_size("hpc-r").await, 6);

    // Free the other units and the first request's VMs: the four come up together.
    let (status, _) = api
        .control_status(Method::POST, "reservations/us-central1-a/r4", Some(json!({"in_use_elsewhere": 0})))
        .await;
    assert_eq!(status, 200);
    let del =
        json!({"instances": ["zones/us-central1-a/instances/n-0", "zones/us-central1-a/instances/n-1"]});
    let (status, op) = api.post(&format!("{REGION}/instanceGroupManagers/hpc-r/deleteInstances"), del).await;
    assert_eq!(status, 200, "{op}");
    api.until_state("hpc-r", "four", "SUCCEEDED").await;
    let rows =
        until("four VMs", || async { json!(sim_reservations(&api).await) }, |v| v[0]["consuming_vms"] == 4)
            .await;
    assert_eq!(rows[0]["max_consuming_vms"], 4, "GCE never held more than the reservation: {rows}");
    assert_eq!(rows[0]["in_use_count"], 4);
    sim.shutdown().await;
}

#[tokio::test]
async fn refusals_come_in_gce_words() {
    let (sim, api) = start(1.0).await;
    reservation(
        &api,
        json!({"project": "p", "zone": "us-central1-a", "name": "h100", "count": 2,
        "machine_type": "a3-highgpu-8g"}),
    )
    .await;
    reservation(
        &api,
        json!({"project": "p", "zone": "us-central1-a", "name": "late", "count": 2,
        "machine_type": "a3-ultragpu-8g", "status": "CREATING"}),
    )
    .await;
    load_template(
        &api,
        "missing",
        "RESERVATION_BOUND",
        "a3-ultragpu-8g",
        Some("projects/p/reservations/gone"),
    )
    .await;
    load_template(&api, "wrongtype", "RESERVATION_BOUND", "a3-ultragpu-8g", Some("h100")).await;
    load_template(&api, "late", "RESERVATION_BOUND", "a3-ultragpu-8g", Some("late")).await;
    load_template(&api, "noaffinity", "RESERVATION_BOUND", "a3-ultragpu-8g", None).await;
    for (mig, t) in
        [("m-missing", "missing"), ("m-wrong", "wrongtype"), ("m-late", "late"), ("m-none", "noaffinity")]
    {
        insert_mig_with(&api, mig, t).await;
    }
    let cases = [
        ("m-missing", "Specified reservation 'gone' does not exist."),
        ("m-wrong", "No available resources in specified reservations 'h100'"),
    ];
    for (mig, message) in cases {
        bound_request(&api, mig, "rr", &[&format!("{mig}-0")]).await;
        let rr = api.until_state(mig, "rr", "FAILED").await;
        assert_eq!(rr["status"]["error"]["errors"][0]["code"], "CONDITION_NOT_MET", "{rr}");
        assert_eq!(rr["status"]["error"]["errors"][0]["message"], message, "{rr}");
        assert_eq!(api.target_size(mig).await, 0);
    }
    // Not READY yet: waits, saying why, and runs once it is.
    bound_request(&api, "m-late", "rr", &["late-0"]).await;
    let rr = until("lastAttempt", || api.request("m-late", "rr"), |v| v["status"]["lastAttempt"].is_object())
        .await;
    assert_eq!(
        rr["status"]["lastAttempt"]["error"]["errors"][0]["message"],
        "Cannot insert instance to a reservation with status: CREATING, as it requires reservation to be in READY state."
    );
    api.control(Method::POST, "reservations/us-central1-a/late", Some(json!({"status": "READY"}))).await;
    api.until_state("m-late", "rr", "SUCCEEDED").await;
    // RESERVATION_BOUND with no specific reservation: 400 at insert.
    let (status, e) = bound_request(&api, "m-none", "rr", &["none-0"]).await;
    assert_eq!(status, 400);
    assert_google_error(&e, 400, "invalid", "SPECIFIC_RESERVATION");
    sim.shutdown().await;
}

#[tokio::test]
async fn a_calendar_window_opens_and_closes_under_time_acceleration() {
    // 60x: a window that opens in a simulated minute and lasts two opens in 1 s and closes 2 s later.
    let (sim, api) = start(60.0).await;
    let fr = api
        .control(
            Method::POST,
            "future-reservations",
            Some(json!({"project": "p", "zone": "us-central1-a", "name": "book", "machine_type": "a3-ultragpu-8g",
                        "total_count": 2, "starts_in_seconds": 60, "duration_seconds": 120,
                        "reservation_name": "book-res"})),
        )
        .await;
    assert_eq!(fr["status"]["procurementStatus"], "APPROVED");
    load_template(
        &api,
        "cal",
        "RESERVATION_BOUND",
        "a3-ultragpu-8g",
        Some("projects/p/reservations/book-res"),
    )
    .await;
    insert_mig_with(&api, "hpc-cal", "cal").await;

    let (_, f) = api.get("projects/p/zones/us-central1-a/futureReservations/book").await;
    assert_eq!(f["reservationMode"], "CALENDAR");
    assert_eq!(f["specificSkuProperties"]["totalCount"], "2");
    assert_eq!(f["reservationName"], "book-res");
    assert!(f["timeWindow"]["startTime"].is_string() && f["timeWindow"]["endTime"].is_string(), "{f}");
    let (status, _) = api.get(&format!("{RES}/book-res")).await;
    assert_eq!(status, 404, "nothing delivered before the window");

    // Asked before the window: waits for it (no error), then gets its VMs at the start.
    bound_request(&api, "hpc-cal", "early", &["cal-0", "cal-1"]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rr = api.request("hpc-cal", "early").await;
    assert_eq!(rr["state"], "ACCEPTED", "{rr}");
    assert!(rr.get("status").is_none(), "{rr}");
    assert!(api.instances().await.is_empty());

    api.until_state("hpc-cal", "early", "SUCCEEDED").await;
    let (_, r) = api.get(&format!("{RES}/book-res")).await;
    assert_eq!(r["status"], "READY");
    assert_eq!(r["specificReservation"]["count"], "2");
    assert_eq!(r["deleteAtTime"], f["timeWindow"]["endTime"]);
    let (_, f) = api.get("projects/p/zones/us-central1-a/futureReservations?filter=name%3Dbook").await;
    let st = &f["items"][0]["status"];
    assert_eq!(st["procurementStatus"], "FULFILLED");
    assert_eq!(st["fulfilledCount"], "2");
    assert_eq!(st["autoCreatedReservations"], json!([r["selfLink"]]));
    assert_eq!(api.target_size("hpc-cal").await, 2);

    // At the end GCE deletes the reservation and every VM on it; the VMs leave the MIG.
    let gone =
        until("the end", || async { json!(api.instances().await) }, |v| v.as_array().unwrap().is_empty())
            .await;
    assert_eq!(gone, json!([]));
    let (status, _) = api.get(&format!("{RES}/book-res")).await;
    assert_eq!(status, 404);
    assert_eq!(api.target_size("hpc-cal").await, 0);
    let (_, f) = api.get("projects/p/zones/us-central1-a/futureReservations/book").await;
    assert_eq!(f["status"]["autoCreatedReservations"], json!([]), "{f}");
    sim.shutdown().await;
}

#[tokio::test]
async fn the_control_api_opens_and_closes_a_window_now() {
    let (sim, api) = start(1.0).await;
    api.control(
        Method::POST,
        "future-reservations",
        Some(json!({"project": "p", "zone": "us-central1-a", "name": "later", "machine_type": "a3-ultragpu-8g",
                    "total_count": 1, "start_time": "2099-01-01T00:00:00Z", "end_time": "2099-01-02T00:00:00Z"})),
    )
    .await;
    api.control(Method::POST, "future-reservations/us-central1-a/later/start", None).await;
    let r =
        until("delivery", || async { api.get(&format!("{RES}/later")).await.1 }, |v| v["status"] == "READY")
            .await;
    assert_eq!(r["specificReservation"]["count"], "1");
    api.control(Method::POST, "future-reservations/us-central1-a/later/end", None).await;
    until("deletion", || async { json!(api.get(&format!("{RES}/later")).await.0) }, |v| v == 404).await;
    sim.shutdown().await;
}

#[tokio::test]
async fn blocks_and_sub_blocks_are_targets_and_vms_show_their_topology() {
    let (sim, api) = start(1.0).await;
    reservation(
        &api,
        json!({"project": "p", "zone": "us-central1-a", "name": "dense", "count": 4,
        "machine_type": "a3-ultragpu-8g",
        "blocks": [{"name": "b1", "count": 2}, {"name": "b2", "count": 2,
                    "sub_blocks": [{"name": "s1", "count": 1}, {"name": "s2", "count": 1}]}]}),
    )
    .await;
    load_template(
        &api,
        "blk",
        "RESERVATION_BOUND",
        "a3-ultragpu-8g",
        Some("projects/p/reservations/dense/reservationBlocks/b2"),
    )
    .await;
    load_template(
        &api,
        "sub",
        "STANDARD",
        "a3-ultragpu-8g",
        Some("projects/p/reservations/dense/reservationBlocks/b1/reservationSubBlocks/b1-sub-0"),
    )
    .await;
    insert_mig_with(&api, "m-blk", "blk").await;
    insert_mig_with(&api, "m-sub", "sub").await;

    bound_request(&api, "m-blk", "big", &["x-0", "x-1", "x-2"]).await;
    api.until_state("m-blk", "big", "FAILED").await;
    bound_request(&api, "m-blk", "rr", &["b-0", "b-1"]).await;
    api.until_state("m-blk", "rr", "SUCCEEDED").await;
    let vm = api.until_vm_status("b-0", "RUNNING").await;
    let (_, b2) = api.get(&format!("{RES}/dense/reservationBlocks/b2")).await;
    assert_eq!(
        vm["resourceStatus"]["physicalHostTopology"]["block"],
        b2["resource"]["physicalTopology"]["block"]
    );
    assert_eq!(b2["resource"]["inUseCount"], 2);
    let info = &vm["resourceStatus"]["reservationConsumptionInfo"];
    assert!(info["consumedReservationBlock"]
        .as_str()
        .unwrap()
        .ends_with("/reservations/dense/reservationBlocks/b2"));
    assert!(
        info["consumedReservationSubBlock"].as_str().unwrap().contains("/reservationSubBlocks/s"),
        "{vm}"
    );

    // A STANDARD template naming a sub-block, with a run duration: one VM fits it.
    api.insert_request("m-sub", "one", &["s-0"], "3600").await;
    api.until_state("m-sub", "one", "SUCCEEDED").await;
    let (_, sb) = api.get(&format!("{RES}/dense/reservationBlocks/b1/reservationSubBlocks/b1-sub-0")).await;
    assert_eq!(sb["resource"]["inUseCount"], 1);

    // GCE deletes the reservation: the bound VMs go (and leave their MIG), the STANDARD one stays.
    api.control(Method::DELETE, "reservations/us-central1-a/dense", None).await;
    until("the bound VMs' end", || async { json!(api.instances().await.len()) }, |v| v == 1).await;
    let (status, s0) = api.instance("s-0").await;
    assert_eq!(status, 200);
    assert!(s0["resourceStatus"].get("reservationConsumptionInfo").is_none(), "{s0}");
    assert_eq!(api.target_size("m-blk").await, 0);
    assert_eq!(api.target_size("m-sub").await, 1);
    sim.shutdown().await;
}

#[tokio::test]
async fn create_instances_take_one_unit_each_and_retry_while_the_reservation_is_full() {
    let (sim, api) = start(1.0).await;
    reservation(
        &api,
        json!({"project": "p", "zone": "us-central1-a", "name": "one", "count": 1,
        "machine_type": "a3-ultragpu-8g"}),
    )
    .await;
    load_template(&api, "std", "RESERVATION_BOUND", "a3-ultragpu-8g", Some("one")).await;
    insert_mig_with(&api, "m-std", "std").await;
    let body = json!({"instances": [{"name": "c-0"}, {"name": "c-1"}]});
    let (status, op) = api.post(&format!("{REGION}/instanceGroupManagers/m-std/createInstances"), body).await;
    assert_eq!(status, 200, "{op}");
    let waiting = until(
        "one made, one waiting",
        || async { json!(api.managed("m-std").await) },
        |v| v.as_array().unwrap().iter().any(|m| m["lastAttempt"].is_object()),
    )
    .await;
    let waiting: Vec<&Value> =
        waiting.as_array().unwrap().iter().filter(|m| m.get("instance").is_none()).collect();
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert_eq!(
        waiting[0]["lastAttempt"]["errors"]["errors"][0]["message"],
        "Specified reservation 'one' does not have available resources for the request."
    );
    api.control(Method::POST, "reservations/us-central1-a/one", Some(json!({"count": 2}))).await;
    until("both made", || async { json!(api.instances().await.len()) }, |v| v == 2).await;
    assert_eq!(sim_reservations(&api).await[0]["max_consuming_vms"], 2);
    sim.shutdown().await;
}

#[tokio::test]
async fn bad_control_bodies_are_refused() {
    let (sim, api) = start(1.0).await;
    let bad = [
        ("reservations", json!({"project": "p", "zone": "z", "name": "r", "count": 0, "machine_type": "m"})),
        (
            "reservations",
            json!({"project": "p", "zone": "z", "name": "r", "count": 2, "machine_type": "m",
                                "blocks": [{"name": "b", "count": 1}]}),
        ),
        (
            "future-reservations",
            json!({"project": "p", "zone": "z", "name": "f", "machine_type": "m",
                                       "total_count": 1, "starts_in_seconds": 10}),
        ),
    ];
    for (path, body) in bad {
        let (status, v) = api.control_status(Method::POST, path, Some(body)).await;
        assert_eq!(status, 400, "{v}");
        assert!(v["error"].is_string());
    }
    let (status, _) = api.control_status(Method::DELETE, "reservations/z/none", None).await;
    assert_eq!(status, 404);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_zonal_mig_consumes_the_same_way() {
    let (sim, api) = start(1.0).await;
    reservation(
        &api,
        json!({"project": "p", "zone": "us-central1-a", "name": "z1", "count": 1,
        "machine_type": "a3-ultragpu-8g"}),
    )
    .await;
    load_template(&api, "zt", "RESERVATION_BOUND", "a3-ultragpu-8g", Some("z1")).await;
    let mut body = zonal_mig_body("hpc-z");
    body["versions"] = json!([{"instanceTemplate": "projects/p/global/instanceTemplates/zt"}]);
    let (status, op) = api.post(&format!("{ZONE}/instanceGroupManagers"), body).await;
    assert_eq!(status, 200, "{op}");
    api.wait(&op).await;
    let mig = format!("{ZONE}/instanceGroupManagers/hpc-z");
    let (status, op) = api
        .post(&format!("{mig}/resizeRequests"), json!({"name": "one", "instances": [{"name": "z-0"}]}))
        .await;
    assert_eq!(status, 200, "{op}");
    api.until_state_at(&mig, "one", "SUCCEEDED").await;
    let (status, op) =
        api.post(&format!("{mig}/resizeRequests"), json!({"name": "two", "resizeBy": 1})).await;
    assert_eq!(status, 200, "{op}");
    let rr = until(
        "waiting",
        || async { api.get(&format!("{mig}/resizeRequests/two")).await.1 },
        |v| v["status"]["lastAttempt"].is_object(),
    )
    .await;
    assert_eq!(rr["state"], "ACCEPTED");
    assert_eq!(sim_reservations(&api).await[0]["max_consuming_vms"], 1);
    sim.shutdown().await;
}
