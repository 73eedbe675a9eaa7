//! Reserved capacity on the wire: reservations, their blocks and sub-blocks, and future
//! reservations (DWS Calendar mode), and the read-only calls slurm-dws makes of them
//! (docs/gce-facts.md, "Reserved capacity"). slurm-dws never creates, changes or deletes a
//! reservation: an admin books it; the daemon consumes it and says what it sees.
//!
//! The counts of a reservation's `specificReservation` are int64 (JSON strings); a block's and a
//! sub-block's are int32 (numbers). A block or sub-block `get` answers `{"resource": {...}}`.

use super::client::{Call, Client};
use super::wire::int64_string;
use super::GceError;
use reqwest::Method;
use serde::{Deserialize, Serialize};

/// A zonal reservation (`compute#reservation`), the fields slurm-dws reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Reservation {
    pub name: String,
    /// The zone's URL.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub zone: String,
    /// CREATING, READY, UPDATING, DELETING, INVALID.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub specific_reservation: Option<SpecificReservation>,
    /// Only VMs that name it may consume it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub specific_reservation_required: bool,
    /// When GCE deletes it (and every VM on it), if set: RFC 3339.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub delete_at_time: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub self_link: String,
}

/// `AllocationSpecificSKUReservation`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SpecificReservation {
    #[serde(with = "int64_string")]
    pub count: i64,
    #[serde(with = "int64_string")]
    pub in_use_count: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_properties: Option<ReservedInstanceProperties>,
}

/// `AllocationSpecificSKUAllocationReservedInstanceProperties`: the shape the capacity is for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReservedInstanceProperties {
    /// A machine type name (`a4-highgpu-8g`), not a URL.
    pub machine_type: String,
}

/// A reservation block or sub-block (`compute#reservationBlock`, `compute#reservationSubBlock`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReservationBlock {
    pub name: String,
    /// CREATING, READY, DELETING, INVALID.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status: String,
    pub count: i64,
    pub in_use_count: i64,
}

/// The `{"resource": ...}` a block or sub-block `get` answers.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct Wrapped {
    resource: ReservationBlock,
}

/// A future reservation (`compute#futureReservation`), the fields slurm-dws reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FutureReservation {
    pub name: String,
    /// CALENDAR for DWS Calendar mode.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reservation_mode: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_window: Option<TimeWindow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub specific_sku_properties: Option<FutureSkuProperties>,
    /// The name of the reservation it delivers at the window's start.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reservation_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<FutureReservationStatus>,
}

/// `FutureReservationTimeWindow`: `startTime`, and `endTime` or `duration`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TimeWindow {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub start_time: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub end_time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration: Option<super::GceDuration>,
}

/// `FutureReservationSpecificSKUProperties`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FutureSkuProperties {
    #[serde(with = "int64_string")]
    pub total_count: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_properties: Option<ReservedInstanceProperties>,
}

/// `FutureReservationStatus`, the part slurm-dws reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FutureReservationStatus {
    /// APPROVED, PROVISIONING, FULFILLED, FAILED, CANCELLED, ...
    #[serde(skip_serializing_if = "String::is_empty")]
    pub procurement_status: String,
    /// Full URLs of the reservations delivered at the window's start.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub auto_created_reservations: Vec<String>,
}

/// Where a reservation (or future reservation) lives: its project may be another than the
/// client's (a shared reservation).
fn zone_path(project: &str, zone: &str) -> String {
    format!("projects/{project}/zones/{zone}")
}

impl Client {
    /// Reads one reservation.
    pub async fn get_reservation(
        &self,
        project: &str,
        zone: &str,
        name: &str,
    ) -> Result<Reservation, GceError> {
        let path = format!("{}/reservations/{name}", zone_path(project, zone));
        self.execute(&Call::new("reservations.get".into(), Method::GET, path)).await
    }

    /// Lists a zone's reservations (all pages), optionally filtered, asking for `fields`.
    pub async fn list_reservations(
        &self,
        project: &str,
        zone: &str,
        filter: Option<&str>,
        fields: Option<&str>,
    ) -> Result<Vec<Reservation>, GceError> {
        let path = format!("{}/reservations", zone_path(project, zone));
        self.list_all("reservations.list".into(), Method::GET, path, filter, fields).await
    }

    /// Reads one block of a reservation.
    pub async fn get_reservation_block(
        &self,
        project: &str,
        zone: &str,
        reservation: &str,
        block: &str,
    ) -> Result<ReservationBlock, GceError> {
        let path =
            format!("{}/reservations/{reservation}/reservationBlocks/{block}", zone_path(project, zone));
        let w: Wrapped = self.execute(&Call::new("reservationBlocks.get".into(), Method::GET, path)).await?;
        Ok(w.resource)
    }

    /// Reads one sub-block of a reservation's block.
    pub async fn get_reservation_sub_block(
        &self,
        project: &str,
        zone: &str,
        reservation: &str,
        block: &str,
        sub_block: &str,
    ) -> Result<ReservationBlock, GceError> {
        let path = format!(
            "{}/reservations/{reservation}/reservationBlocks/{block}/reservationSubBlocks/{sub_block}",
            zone_path(project, zone)
        );
        let w: Wrapped =
            self.execute(&Call::new("reservationSubBlocks.get".into(), Method::GET, path)).await?;
        Ok(w.resource)
    }

    /// Reads one future reservation.
    pub async fn get_future_reservation(
        &self,
        project: &str,
        zone: &str,
        name: &str,
    ) -> Result<FutureReservation, GceError> {
        let path = format!("{}/futureReservations/{name}", zone_path(project, zone));
        self.execute(&Call::new("futureReservations.get".into(), Method::GET, path)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_wire_shapes_read_as_gce_writes_them() {
        let r: Reservation = serde_json::from_value(json!({
            "name": "res", "zone": "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a",
            "status": "READY", "specificReservationRequired": true, "deleteAtTime": "2026-12-01T00:00:00Z",
            "specificReservation": {"count": "4", "inUseCount": "2", "assuredCount": "4",
                                    "instanceProperties": {"machineType": "a4-highgpu-8g"}},
            "kind": "compute#reservation"
        }))
        .unwrap();
        let s = r.specific_reservation.clone().unwrap();
        assert_eq!((s.count, s.in_use_count), (4, 2));
        assert_eq!(s.instance_properties.unwrap().machine_type, "a4-highgpu-8g");
        let w: Wrapped = serde_json::from_value(json!({"resource": {
            "name": "b1", "status": "READY", "count": 18, "inUseCount": 3, "kind": "compute#reservationBlock"}}))
        .unwrap();
        assert_eq!((w.resource.count, w.resource.in_use_count), (18, 3));
        let f: FutureReservation = serde_json::from_value(json!({
            "name": "fr", "reservationMode": "CALENDAR", "reservationName": "fr-res",
            "timeWindow": {"startTime": "2026-12-01T00:00:00Z", "endTime": "2026-12-08T00:00:00Z"},
            "specificSkuProperties": {"totalCount": "8", "instanceProperties": {"machineType": "a4-highgpu-8g"}},
            "status": {"procurementStatus": "FULFILLED",
                       "autoCreatedReservations": ["https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a/reservations/fr-res"]}
        }))
        .unwrap();
        assert_eq!(f.specific_sku_properties.unwrap().total_count, 8);
        assert_eq!(f.time_window.unwrap().end_time, "2026-12-08T00:00:00Z");
        assert_eq!(f.status.unwrap().auto_created_reservations.len(), 1);
    }
}
