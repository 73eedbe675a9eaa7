//! A nodeset's `provisioning_model`: how its VMs are obtained from GCE.

use std::fmt;

/// How a nodeset's VMs are obtained (`nodeset.provisioning_model`).
///
/// All three go through the same regional MIG per request group (docs/architecture.md, "Flex,
/// standard and spot"): a Flex nodeset asks with a resize request and a run duration, a standard or
/// spot one creates its VMs by name with `createInstances`, and they run until deleted (or, for
/// spot, until GCE preempts them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum ProvisioningModel {
    /// DWS Flex Start: resize requests with a run duration (`[nodeset.dws_flex]`).
    #[default]
    Flex,
    /// On-demand VMs (`provisioningModel: STANDARD`).
    Standard,
    /// Spot VMs (`provisioningModel: SPOT`): GCE may preempt them at any time.
    Spot,
    /// Reserved capacity (`[nodeset.reservation]`): resize requests of a template that consumes one
    /// specific reservation (`RESERVATION_BOUND`, or a `SPECIFIC_RESERVATION` affinity), no run
    /// duration; the VMs live until the reservation's window ends.
    Reservation,
}

impl ProvisioningModel {
    /// Every value, as the config spells it.
    pub const ALL: [ProvisioningModel; 4] = [
        ProvisioningModel::Flex,
        ProvisioningModel::Standard,
        ProvisioningModel::Spot,
        ProvisioningModel::Reservation,
    ];

    /// As the config spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ProvisioningModel::Flex => "flex",
            ProvisioningModel::Standard => "standard",
            ProvisioningModel::Spot => "spot",
            ProvisioningModel::Reservation => "reservation",
        }
    }

    /// The config's spelling, parsed.
    pub fn parse(s: &str) -> Option<ProvisioningModel> {
        ProvisioningModel::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// Whether VMs come from resize requests (DWS Flex Start).
    pub fn is_flex(self) -> bool {
        self == ProvisioningModel::Flex
    }

    /// Whether a group's VMs come from one MIG resize request (all or nothing, queued by GCE until
    /// it can be met whole): DWS Flex Start and reserved capacity. Standard and spot VMs are
    /// created by name instead.
    pub fn uses_resize_requests(self) -> bool {
        matches!(self, ProvisioningModel::Flex | ProvisioningModel::Reservation)
    }

    /// Whether the VMs consume reserved capacity.
    pub fn is_reservation(self) -> bool {
        self == ProvisioningModel::Reservation
    }
}

impl fmt::Display for ProvisioningModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_model_round_trips_through_its_spelling() {
        for m in ProvisioningModel::ALL {
            assert_eq!(ProvisioningModel::parse(m.as_str()), Some(m));
        }
        assert_eq!(ProvisioningModel::parse("SPOT"), None);
        assert_eq!(ProvisioningModel::parse("preemptible"), None);
    }
}
