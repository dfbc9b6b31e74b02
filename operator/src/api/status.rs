//! `EgressProxyPolicy.status`: what the operator observed and did.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the operator observed and did for this policy.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EgressProxyPolicyStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// `Ready` (everything applied), and the conditions that explain a not-Ready policy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,

    /// The NO_PROXY value the workloads receive, in the policy's dialect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_proxy: Option<String>,

    /// Intents the dialect cannot express, and why. Requests to them go through the proxy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uncovered: Vec<UncoveredIntent>,

    /// Warnings about the rendered NO_PROXY (size, over-matching entries).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,

    /// The cluster facts NO_PROXY was computed from, each with its source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovered: Option<DiscoveredFacts>,

    /// The credential slot the up-to-date workloads use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_credential: Option<String>,

    /// Progress of a credential rotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotation: Option<RotationStatus>,

    /// Counts of selected and up-to-date workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workloads: Option<WorkloadCounts>,
}

/// An intent left out of NO_PROXY.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct UncoveredIntent {
    /// The entry as the user or discovery wrote it.
    pub entry: String,
    /// Why the dialect cannot express it.
    pub reason: String,
}

/// Cluster facts with their sources.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveredFacts {
    /// API server addresses and host names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_server: Option<Fact>,
    /// Service CIDRs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_network: Option<Fact>,
    /// Pod CIDRs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_network: Option<Fact>,
    /// The cluster DNS domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_domain: Option<Fact>,
    /// Node InternalIPs (aggregated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_addresses: Option<Fact>,
    /// Cloud metadata addresses of the detected platform.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_metadata: Option<Fact>,
}

/// One discovered fact. `values` is empty when the fact was not found; `message` then says
/// where the operator looked.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct Fact {
    /// The values found.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// Where they came from, e.g. `ServiceCIDR/kubernetes` or `flag --service-cidr`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Why nothing was found, when nothing was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Progress of a credential rotation from one slot to the other.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RotationStatus {
    /// The slot being left.
    pub from: String,
    /// The slot being switched to.
    pub to: String,
    /// Where the rotation stands.
    pub phase: RotationPhase,
    /// Workloads still running with the `from` slot.
    #[serde(default)]
    pub workloads_pending: i32,
}

/// Phases of a rotation.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum RotationPhase {
    /// The new slot is being checked through the proxy.
    Verifying,
    /// Workloads are being switched to the new slot.
    Rolling,
    /// No workload uses the old slot any more: it may be revoked.
    Complete,
    /// The new slot failed verification; workloads stay on the old slot.
    Failed,
}

/// Workload counts.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadCounts {
    /// Workloads the policy selects.
    pub selected: i32,
    /// Selected workloads whose pod template carries the current configuration and whose
    /// rollout finished.
    pub up_to_date: i32,
    /// Some of the workloads not yet up to date, as `Kind/name` (at most 20).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub pending: Vec<String>,
}
