//! Every condition and Event reason the operator writes, in one table. They are part of the
//! API: `kubectl wait`, alerts and GitOps health checks match on them.

/// Condition types.
pub const READY: &str = "Ready";
pub const RECONCILING: &str = "Reconciling";
pub const STALLED: &str = "Stalled";
/// Set when `spec.verification` is: the last probe of the current configuration.
pub const VERIFIED: &str = "Verified";
/// Set when `spec.trust` is: True while a source certificate expires within
/// `expiryWarningDays` (a Warning Event tells it when it turns True).
pub const TRUST_EXPIRING: &str = "TrustExpiring";

/// Condition reasons.
pub mod reason {
    /// Ready: every selected workload runs the current configuration.
    pub const RECONCILED: &str = "Reconciled";
    /// Ready: the policy selects nothing.
    pub const NO_WORKLOADS: &str = "NoWorkloadsSelected";
    /// Reconciling/Stalled when nothing is going on.
    pub const IDLE: &str = "Idle";
    pub const ROLLOUT_IN_PROGRESS: &str = "RolloutInProgress";
    pub const ROLLOUT_PAUSED: &str = "RolloutPaused";
    pub const ENV_CONFLICT: &str = "EnvConflict";
    /// A name in `spec.containers` matches no container of any selected workload.
    pub const CONTAINER_NOT_FOUND: &str = "ContainerNotFound";
    pub const POLICY_OVERLAP: &str = "PolicyOverlap";
    pub const WORKLOAD_UPDATE_FAILED: &str = "WorkloadUpdateFailed";
    /// The active slot's Secret is missing or not granted (one reason for both). When it
    /// is the Secret the workloads' credential came from, the credential is withdrawn.
    pub const SECRET_NOT_AVAILABLE: &str = "SecretNotAvailable";
    pub const SECRET_INVALID: &str = "SecretInvalid";
    pub const INVALID_PROXY_URL: &str = "InvalidProxyURL";
    pub const INVALID_NO_PROXY_ENTRY: &str = "InvalidNoProxyEntry";
    pub const INVALID_SELECTOR: &str = "InvalidSelector";
    /// NO_PROXY or the six variables together are too large for a process to start with.
    pub const ENVIRONMENT_TOO_LARGE: &str = "EnvironmentTooLarge";
    pub const DISCOVERY_INCOMPLETE: &str = "DiscoveryIncomplete";
    pub const NAMESPACE_NOT_ENABLED: &str = "NamespaceNotEnabled";
    /// The namespace is enabled but its admin has not bound the tenant role to the operator
    /// (the API server refuses it the namespace's Secrets and ConfigMaps).
    pub const NAMESPACE_NOT_AUTHORIZED: &str = "NamespaceNotAuthorized";
    pub const MANAGED_OBJECT_CONFLICT: &str = "ManagedObjectConflict";
    pub const SUSPENDED: &str = "Suspended";
    /// Verified: every endpoint took its path.
    pub const VERIFICATION_PASSED: &str = "VerificationPassed";
    /// Verified (and Ready while a switch waits on it): an endpoint did not.
    pub const VERIFICATION_FAILED: &str = "VerificationFailed";
    /// Verified: the probe Job for the current configuration is running.
    pub const VERIFICATION_PENDING: &str = "VerificationPending";
    /// A trust source (`spec.trust.sources`) is missing, lacks its key or is not granted.
    pub const TRUST_SOURCE_NOT_AVAILABLE: &str = "TrustSourceNotAvailable";
    /// A trust source holds no PEM, a private key, a certificate that is not a CA, expired
    /// or not yet valid; or the dialect cannot take `roots: Replace`.
    pub const TRUST_INVALID: &str = "TrustInvalid";
    /// TrustExpiring: a source certificate expires within `expiryWarningDays`.
    pub const CERTIFICATE_EXPIRING: &str = "CertificateExpiring";
    /// TrustExpiring False: no source certificate expires soon.
    pub const CERTIFICATES_VALID: &str = "CertificatesValid";
}

/// Event reasons besides the Ready reasons above (an Event is also published with the new
/// Ready reason whenever Ready flips).
pub mod event {
    /// Workloads were written with a new config hash (they roll).
    pub const CONFIG_APPLIED: &str = "ConfigApplied";
    /// The operator's entries were removed from workloads (they roll).
    pub const CONFIG_REMOVED: &str = "ConfigRemoved";
    /// A credential rotation began.
    pub const ROTATION_STARTED: &str = "RotationStarted";
    /// The rotation's target slot cannot be used: nothing was switched.
    pub const ROTATION_BLOCKED: &str = "RotationBlocked";
    /// A switched workload's rollout exceeded its progress deadline.
    pub const ROTATION_STALLED: &str = "RotationStalled";
    /// No workload or Pod uses the slot being left: it may be revoked.
    pub const CREDENTIAL_REVOCABLE: &str = "CredentialRevocable";
    /// The Secret of a slot in use changed in place.
    pub const CREDENTIAL_CHANGED_IN_PLACE: &str = "CredentialChangedInPlace";
}
