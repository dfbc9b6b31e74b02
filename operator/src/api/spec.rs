//! `EgressProxyPolicy.spec`: what the policy asks for.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::status::EgressProxyPolicyStatus;
use crate::noproxy::{Dialect, Widen};

/// `roots: Replace` needs a dialect whose clients can drop their own roots
/// ([`crate::trust::replaceable`]): the CRD's rule and its message name them.
fn replace_rule() -> kube::core::Rule {
    let names = crate::trust::replaceable_names();
    let quoted: Vec<String> = crate::trust::replaceable()
        .map(|d| format!("'{}'", d.name()))
        .collect();
    kube::core::Rule::new(format!(
        "!has(self.trust) || self.trust.roots != 'Replace' || (has(self.noProxy) && has(self.noProxy.dialect) && self.noProxy.dialect in [{}])",
        quoted.join(", ")
    ))
    .message(kube::core::Message::Message(format!(
        "trust roots Replace needs a dialect whose clients can drop their own roots ({names}): node's NODE_EXTRA_CA_CERTS and curl's CURL_CA_BUNDLE only add"
    )))
    .field_path(".trust.roots")
}

/// Proxy settings for the workloads of one namespace: which workloads get them, where the
/// proxy credentials come from, and what must bypass the proxy (NO_PROXY).
// Each `printcolumn(...)` repeats the keys `name`/`type_`, which clippy mistakes for duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "egressproxy.io",
    version = "v1alpha1",
    kind = "EgressProxyPolicy",
    plural = "egressproxypolicies",
    singular = "egressproxypolicy",
    shortname = "epp",
    category = "egressproxy",
    namespaced,
    status = "EgressProxyPolicyStatus",
    derive = "PartialEq",
    doc = "EgressProxyPolicy wires an outbound HTTP proxy into the selected workloads of its namespace: proxy URLs from a Secret through secretKeyRef, and a NO_PROXY computed from the live cluster in the syntax of the workloads' HTTP client.",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        priority = "1",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason"
    ),
    printcolumn(
        name = "Active",
        type_ = "string",
        description = "The credential slot the workloads use",
        json_path = ".status.activeCredential"
    ),
    printcolumn(
        name = "Rotation",
        type_ = "string",
        description = "The phase of the last credential rotation",
        json_path = ".status.rotation.phase"
    ),
    printcolumn(
        name = "Up-To-Date",
        type_ = "integer",
        description = "Selected workloads running the current proxy configuration",
        json_path = ".status.workloads.upToDate"
    ),
    printcolumn(
        name = "Selected",
        type_ = "integer",
        description = "Workloads the policy selects",
        json_path = ".status.workloads.selected"
    ),
    printcolumn(
        name = "Dialect",
        type_ = "string",
        priority = "1",
        json_path = ".spec.noProxy.dialect"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = replace_rule(),
)]
pub struct EgressProxyPolicySpec {
    /// Labels of the workloads (in this namespace) that receive the proxy settings. Required;
    /// an empty selector selects nothing, never everything.
    pub workload_selector: LabelSelector,

    /// Kinds of workloads the selector applies to. Default: Deployment, StatefulSet and
    /// DaemonSet; CronJob only when listed.
    #[serde(default = "default_workload_kinds")]
    // maxItems: every kind once (`workloads/kinds/tests.rs` checks it against `ALL`).
    #[schemars(length(min = 1, max = 4))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub workload_kinds: Vec<WorkloadKind>,

    /// Names of the containers that receive the variables. Empty: every container (and every
    /// init container unless `initContainers` is `Exclude`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub containers: Vec<ContainerName>,

    /// Whether init containers receive the variables when `containers` is empty.
    #[serde(default)]
    pub init_containers: InitContainers,

    /// What to do when a container already sets one of the proxy variables itself: `Keep`
    /// leaves the container's own value and reports a conflict; `Override` replaces it.
    #[serde(default)]
    pub existing_env: ExistingEnv,

    /// Where the proxy URLs (and their credentials) come from.
    pub proxy: ProxySpec,

    /// What bypasses the proxy.
    #[serde(default)]
    pub no_proxy: NoProxySpec,

    /// How workloads are restarted when their configuration changes.
    #[serde(default)]
    pub rollout: RolloutSpec,

    /// Endpoints checked through the proxy from inside the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<VerificationSpec>,

    /// The CA certificates the selected containers trust, for proxies that inspect TLS
    /// (re-sign HTTPS certificates with a corporate CA). Unset: trust is left alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<TrustSpec>,

    /// Freezes the policy: nothing is written to workloads or managed objects while true.
    #[serde(default)]
    pub suspend: bool,
}

/// A container name (a DNS label).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(transparent)]
pub struct ContainerName(
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub String,
);

/// A workload kind the operator can inject into.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema,
)]
pub enum WorkloadKind {
    /// apps/v1 Deployment.
    Deployment,
    /// apps/v1 StatefulSet.
    StatefulSet,
    /// apps/v1 DaemonSet.
    DaemonSet,
    /// batch/v1 CronJob: the proxy settings go into `spec.jobTemplate.spec.template`, so the
    /// next Job it starts has them; Jobs already running keep the values they started with.
    CronJob,
}

fn default_workload_kinds() -> Vec<WorkloadKind> {
    vec![
        WorkloadKind::Deployment,
        WorkloadKind::StatefulSet,
        WorkloadKind::DaemonSet,
    ]
}

/// Whether init containers receive the proxy variables.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum InitContainers {
    /// Init containers get the variables like the other containers.
    #[default]
    Include,
    /// Init containers are left alone.
    Exclude,
}

/// Policy for proxy variables a container already sets.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ExistingEnv {
    /// Leave the container's own value and report the conflict in status.
    #[default]
    Keep,
    /// Replace the container's own value with the operator's.
    Override,
}

/// Proxy credentials: one or two slots (two allow rotation without downtime).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("self.credentials.exists(c, c.name == self.active)").message("active must name one of the credential slots").field_path(".active"),
    validation = Rule::new("self.rotation != 'Auto' || size(self.credentials) == 2").message("rotation Auto needs two credential slots").field_path(".rotation"),
)]
pub struct ProxySpec {
    /// One or two credential slots, each backed by a Secret with the keys `httpProxy` and
    /// `httpsProxy` (proxy URLs, optionally with `user:password@`). Slot names are unique.
    #[schemars(length(min = 1, max = 2))]
    #[x_kube(
        merge_strategy = ListMerge::Map(vec!["name".into()]),
        validation = Rule::new("self.all(c, self.exists_one(d, d.name == c.name))").message("credential slot names must be unique").reason(Reason::FieldValueDuplicate),
    )]
    pub credentials: Vec<CredentialSlot>,

    /// Name of the slot the workloads use.
    #[schemars(length(min = 1, max = 63))]
    pub active: String,

    /// `Manual`: only a change of `active` switches slots. `Auto`: a change of the standby
    /// slot's Secret switches to it once verified.
    #[serde(default)]
    pub rotation: RotationMode,
}

/// One credential slot.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CredentialSlot {
    /// Slot name (a DNS label), e.g. `blue` or `green`.
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub name: String,

    /// The Secret holding this slot's proxy URLs.
    pub secret_ref: SecretRef,
}

/// Reference to a Secret. A Secret in another namespace is used only if it grants the
/// policy's namespace (annotation `egressproxy.io/allowed-namespaces`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretRef {
    /// Secret name.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub name: String,

    /// Secret namespace; default: the policy's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub namespace: Option<String>,
}

/// How credential slots are switched.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum RotationMode {
    /// Only a change of `spec.proxy.active` switches slots.
    #[default]
    Manual,
    /// A change of the standby slot's Secret switches to it once verified.
    Auto,
}

/// What bypasses the proxy, and how NO_PROXY is written.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NoProxySpec {
    /// Which cluster facts are discovered and added to NO_PROXY.
    #[serde(default)]
    pub discover: DiscoverSpec,

    /// Cluster DNS domain (e.g. `cluster.local`). Empty: discovered from the cluster, never
    /// assumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 253),
        regex(pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?$")
    )]
    pub cluster_domain: Option<String>,

    /// `Direct`: the platform's cloud metadata addresses bypass the proxy. `Omit`: they are
    /// not listed (requests to them go through the proxy).
    #[serde(default)]
    pub cloud_metadata: CloudMetadata,

    /// More entries that bypass the proxy: `host`, `.domain`, `domain`, `*.domain`,
    /// `host:port`, IPv4/IPv6 addresses and CIDRs. One entry per item.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 1000), inner(length(min = 1, max = 261)))]
    #[x_kube(
        merge_strategy = ListMerge::Set,
        validation = Rule::new("self.all(e, !e.contains(',') && !e.contains(' ') && !e.contains('://'))").message("each entry is one host, domain, IP or CIDR: no commas, spaces or URL schemes"),
    )]
    pub additional: Vec<String>,

    /// How NO_PROXY is written: the HTTP client family the workloads use. `portable` is
    /// misrouted by no supported client; what some clients ignore is listed in
    /// `status.uncovered` with those clients.
    #[serde(default)]
    pub dialect: Dialect,

    /// `Deny`: an entry the dialect can only write more widely (a `*.domain` whose spelling
    /// would also send `domain` itself direct) is left out and listed in `status.uncovered`,
    /// so nothing goes direct that should use the proxy. `Allow`: it is written, and the
    /// extra hosts that go direct are listed in `status.warnings`.
    #[serde(default)]
    pub widen: Widen,

    /// How node addresses are written: as the subnets of these prefix lengths that cover
    /// them, so that nodes joining inside a known subnet change nothing (and roll nothing).
    /// `ipv4: 32`, `ipv6: 128` write each address.
    #[serde(default)]
    pub node_subnets: NodeSubnets,
}

/// Prefix lengths of the subnets node addresses are written as.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSubnets {
    /// IPv4 prefix length, 8 to 32.
    #[serde(default = "v4_prefix")]
    #[schemars(range(min = 8, max = 32))]
    pub ipv4: u8,
    /// IPv6 prefix length, 32 to 128.
    #[serde(default = "v6_prefix")]
    #[schemars(range(min = 32, max = 128))]
    pub ipv6: u8,
}

fn v4_prefix() -> u8 {
    24
}

fn v6_prefix() -> u8 {
    64
}

impl Default for NodeSubnets {
    fn default() -> Self {
        NodeSubnets {
            ipv4: v4_prefix(),
            ipv6: v6_prefix(),
        }
    }
}

/// Switches for cluster discovery. Each discovered fact is reported with its source.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverSpec {
    /// The `kubernetes` Service ClusterIP, its endpoints, and the API host.
    #[serde(default = "yes")]
    pub api_server: bool,
    /// Service CIDRs.
    #[serde(default = "yes")]
    pub service_network: bool,
    /// Pod CIDRs.
    #[serde(default = "yes")]
    pub pod_network: bool,
    /// Node InternalIPs.
    #[serde(default = "yes")]
    pub node_addresses: bool,
    /// The cluster DNS domain and `.svc`.
    #[serde(default = "yes")]
    pub cluster_domain: bool,
}

fn yes() -> bool {
    true
}

impl Default for DiscoverSpec {
    fn default() -> Self {
        DiscoverSpec {
            api_server: true,
            service_network: true,
            pod_network: true,
            node_addresses: true,
            cluster_domain: true,
        }
    }
}

/// Whether cloud metadata addresses bypass the proxy.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum CloudMetadata {
    /// Listed in NO_PROXY.
    #[default]
    Direct,
    /// Not listed.
    Omit,
}

/// How restarts are paced.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutSpec {
    /// At most this many selected workloads roll at the same time.
    #[serde(default = "default_max_concurrent")]
    #[schemars(range(min = 1, max = 1000))]
    pub max_concurrent: i32,
    /// While true, configuration changes are computed and reported but not written.
    #[serde(default)]
    pub paused: bool,
}

fn default_max_concurrent() -> i32 {
    2
}

impl Default for RolloutSpec {
    fn default() -> Self {
        RolloutSpec {
            max_concurrent: default_max_concurrent(),
            paused: false,
        }
    }
}

/// Endpoints checked from inside the cluster.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerificationSpec {
    /// Each endpoint and the path its traffic must take, besides the Kubernetes API
    /// Service (`https://kubernetes.default.svc.<cluster domain>/`, expected `Direct`), which
    /// is always checked.
    #[serde(default)]
    #[schemars(length(max = 20))]
    pub endpoints: Vec<VerificationEndpoint>,
    /// Verify again this often (`30m`, `6h`, `1d`; at least `5m`) even when nothing
    /// changed. Unset: only before a switch and on demand (annotation `egressproxy.io/verify`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[1-9][0-9]{0,5}(m|h|d)$"))]
    pub interval: Option<String>,
}

impl VerificationSpec {
    /// `interval` in seconds; `None` when unset or shorter than five minutes.
    pub fn interval_seconds(&self) -> Option<u64> {
        let text = self.interval.as_deref()?;
        let (n, unit) = [("m", 60), ("h", 3600), ("d", 86_400)]
            .into_iter()
            .find_map(|(suffix, unit)| Some((text.strip_suffix(suffix)?, unit)))?;
        let secs = n.parse::<u64>().ok()?.checked_mul(unit)?;
        (secs >= 300).then_some(secs)
    }
}

/// One endpoint to check.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerificationEndpoint {
    /// An `http://` or `https://` URL.
    #[schemars(length(min = 8, max = 2048), regex(pattern = r"^https?://[^\s]+$"))]
    pub url: String,
    /// The path the request must take.
    pub expect: ExpectedPath,
}

/// The path a verification request must take.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ExpectedPath {
    /// Not through the proxy (Service or internal traffic).
    Direct,
    /// Through the proxy, authenticated.
    Proxied,
    /// Refused by the proxy (and not silently sent direct).
    Blocked,
}

/// Trust for a TLS-inspecting proxy: the CA certificates written into the managed ConfigMap,
/// mounted read-only at `/etc/egress-proxy/trust` and named by each client's own variables.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TrustSpec {
    /// Where the CA certificates (PEM) come from, in order. A source in another namespace is
    /// used only if it grants the policy's namespace (annotation
    /// `egressproxy.io/allowed-namespaces`), as credential Secrets do.
    #[schemars(length(min = 1, max = 8))]
    pub sources: Vec<TrustSource>,

    /// `Keep` (default): the CAs are added to the roots the clients trust (for clients whose
    /// variable replaces their roots, the operator's root set is written with them). `Replace`:
    /// the clients trust only these CAs.
    #[serde(default)]
    pub roots: crate::trust::Roots,

    /// A source certificate expiring within this many days is reported (condition
    /// `TrustExpiring`, a Warning Event) before it breaks anything.
    #[serde(default = "default_expiry_warning_days")]
    #[schemars(range(min = 1, max = 365))]
    pub expiry_warning_days: u32,
}

fn default_expiry_warning_days() -> u32 {
    30
}

/// One CA source: a key of a ConfigMap or of a Secret holding PEM certificates (a
/// trust-manager Bundle's target ConfigMap is a ConfigMap source).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.configMap) != has(self.secret)").message("a trust source is exactly one of configMap and secret"))]
pub struct TrustSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<KeyRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<KeyRef>,
}

/// A key of a ConfigMap or Secret.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyRef {
    /// Object name.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub name: String,

    /// The data key holding the certificates, e.g. `ca.crt`.
    #[schemars(length(min = 1, max = 253), regex(pattern = r"^[-._a-zA-Z0-9]+$"))]
    pub key: String,

    /// Object namespace; default: the policy's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub namespace: Option<String>,
}

impl TrustSource {
    /// `ConfigMap ns/name key` or `Secret ns/name key`, the source as messages name it.
    pub fn shown(&self, policy_namespace: &str) -> String {
        let (kind, r) = match (&self.config_map, &self.secret) {
            (Some(r), _) => ("ConfigMap", r),
            (None, Some(r)) => ("Secret", r),
            (None, None) => return "an empty trust source".into(),
        };
        let ns = r.namespace.as_deref().unwrap_or(policy_namespace);
        format!("{kind} {ns}/{} key {}", r.name, r.key)
    }
}
