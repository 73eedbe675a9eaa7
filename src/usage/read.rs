//! What `slurm-dws usage` reads from the store for a period: the spans that overlap it, when the kept
//! data starts, and (through the daemon) the catalog cache.

/// What `slurm-dws usage` reads for a period (`Store::usage_spans`; the answer to
/// `protocol::Query::UsageSpans` for a reader).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct UsageSpans {
    pub vms: Vec<super::VmSpan>,
    pub jobs: Vec<super::JobSpan>,
    pub data_since: Option<chrono::DateTime<chrono::Utc>>,
    /// Through the daemon only (a reader cannot read `state_dir`): the cached catalog prices as the
    /// daemon read them, `Err` with why when it could not, `None` when there is no cache.
    #[serde(default)]
    pub catalog: Option<Result<super::CatalogPrices, String>>,
}
