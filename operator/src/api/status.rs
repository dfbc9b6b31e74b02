//! `EgressProxyPolicy.status`: what the operator observed and did.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
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

    /// The NO_PROXY value the workloads receive, in the policy's dialect (`portable` for
    /// `java`, whose JVMs read `javaOptions` instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_proxy: Option<String>,

    /// Dialect `java`: the options appended to each container's `JAVA_TOOL_OPTIONS` (proxy
    /// hosts and ports, `http.nonProxyHosts`; never credentials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub java_options: Option<String>,

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

    /// The last credential rotation: where it stands and which slot may be revoked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotation: Option<RotationStatus>,

    /// The credential slots: content fingerprint and whether workloads use them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub credentials: Vec<CredentialSlotStatus>,

    /// Counts of selected and up-to-date workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workloads: Option<WorkloadCounts>,

    /// The last finished verification from inside the cluster (`spec.verification`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<VerificationStatus>,

    /// The trust bundle the workloads receive (`spec.trust`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<TrustStatus>,
}

/// The trust bundle: its certificates, the root set kept with them, and how many workloads
/// run it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrustStatus {
    /// The bundle's identity: the first 16 hex digits of the SHA-256 of `ca-bundle.crt`.
    pub bundle: String,
    /// `Keep` or `Replace`.
    pub roots: String,
    /// With `Keep`: the root set written with the CAs (name and version), and its size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_set: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_count: Option<u32>,
    /// The CA certificates of the sources, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub certificates: Vec<TrustedCertificate>,
    /// Selected workloads whose template carries this bundle.
    pub up_to_date: i32,
    /// Selected workloads still on another bundle (or none), by name: while a CA rotates,
    /// the old CA may be removed from the sources only once this is empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<String>,
}

/// One CA certificate of the trust sources.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrustedCertificate {
    /// The source, e.g. `ConfigMap team-a/corp-ca key ca.crt`.
    pub source: String,
    pub subject: String,
    /// SHA-256 of the DER certificate, lowercase hex.
    pub sha256: String,
    pub not_after: Time,
}

/// One run of the probe Job: what it checked, where, and what each endpoint did.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerificationStatus {
    /// The probe Job (its name identifies the run).
    pub job: String,
    /// What was checked: a digest of the slot, configuration hash, dialect and endpoints.
    pub key: String,
    /// When the probe Job finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Time>,
    /// The credential slot checked.
    pub slot: String,
    /// The configuration hash checked (the one workloads get once it passes).
    pub config_hash: String,
    /// Every endpoint took its expected path.
    pub passed: bool,
    /// What failed, in words (the first failing endpoint), or what was checked.
    pub message: String,
    /// The Pod that ran the probe, its node and image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Per endpoint, in the order checked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<EndpointCheck>,
}

/// One endpoint as the probe found it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointCheck {
    pub url: String,
    /// `Direct`, `Proxied` or `Blocked`.
    pub expect: String,
    /// `Direct`, `Proxied`, `Blocked` or `Failed`.
    pub got: String,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_code: Option<u16>,
    pub via_proxy: bool,
    /// The addresses the Pod's resolver returned (the probe's output only; not in status).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dns: Vec<String>,
    /// Set by the probe; left out of status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// An intent left out of NO_PROXY.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct UncoveredIntent {
    /// The entry as the user or discovery wrote it.
    pub entry: String,
    /// Why the dialect cannot express it, or (`portable`) which clients ignore it and why.
    pub reason: String,
    /// `portable` only: the entry is written, and only these clients send it through the
    /// proxy. Empty: it is not written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clients: Vec<String>,
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
    /// The subnets NO_PROXY lists for the node addresses (`spec.noProxy.nodeSubnets`). A
    /// subnet whose nodes all left is kept until a node joins in a new subnet: a node leaving
    /// changes nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_subnets: Option<Fact>,
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

/// A credential rotation from one slot to the other, as rotation tooling follows it: wait
/// for `phase` `Complete`, then revoke the slots listed in `revocable`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RotationStatus {
    /// Where the rotation stands.
    pub phase: RotationPhase,
    /// The slot being left.
    pub from: String,
    /// The slot being switched to.
    pub to: String,
    /// What started it: `Auto` (the standby slot's Secret changed) or `Manual`
    /// (`spec.proxy.active` changed).
    pub trigger: RotationTrigger,
    /// When it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// The selected workloads, how many run the `to` slot, and how many of those finished
    /// rolling.
    #[serde(default)]
    pub workloads: RotationCounts,
    /// Some of the workloads not yet on the `to` slot or still rolling (at most 20).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub pending: Vec<String>,
    /// Slots that no workload template and no Pod uses any more: their credentials may be
    /// revoked. Set only when `phase` is `Complete`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revocable: Vec<String>,
    /// When `revocable` was first set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revocable_since: Option<Time>,
    /// What the rotation waits for, or why it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Phases of a rotation.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum RotationPhase {
    /// The new slot is being checked through the proxy before any workload switches.
    Verifying,
    /// Workloads are being switched to the new slot, `spec.rollout.maxConcurrent` at a time.
    Rolling,
    /// Every workload runs the new slot; Pods started with the old one are still stopping.
    Draining,
    /// No workload and no Pod uses the old slot: it may be revoked.
    Complete,
    /// The new slot cannot be used (missing, not granted, malformed or failed verification):
    /// no workload was switched.
    Blocked,
    /// A switched workload's rollout exceeded its progress deadline: nothing more is
    /// switched and nothing is revocable until it is fixed or the rotation is reversed.
    Stalled,
}

/// What started a rotation.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum RotationTrigger {
    /// The standby slot's Secret changed (`spec.proxy.rotation: Auto`).
    Auto,
    /// `spec.proxy.active` changed.
    Manual,
}

/// Workload counts of a rotation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RotationCounts {
    /// Selected workloads.
    pub total: i32,
    /// Workloads whose template uses the `to` slot.
    pub switched: i32,
    /// Switched workloads whose rollout finished.
    pub rolled_out: i32,
}

/// One credential slot as the operator last saw it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CredentialSlotStatus {
    /// The slot name.
    pub name: String,
    /// A keyed fingerprint of the slot's Secret content (never the content): it changes
    /// when the content changes, and `rotation: Auto` compares it to start a rotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// `InUse` (workloads use it), `Standby`, or `Unavailable`.
    pub state: SlotState,
    /// Why the slot cannot be used, when it cannot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The state of a credential slot.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum SlotState {
    /// Workload templates or running Pods use it.
    InUse,
    /// Valid and unused.
    Standby,
    /// Missing, not granted or malformed.
    Unavailable,
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
    /// Running Jobs that started with another proxy configuration, as `Job/name` (and the
    /// CronJob that started it), at most 20: Jobs of a selected CronJob, and Jobs the
    /// selector matches directly. A Job's template cannot change: they are never written and
    /// finish with the values they started with. Refreshed at every reconcile.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 20))]
    pub old_jobs: Vec<String>,
}
