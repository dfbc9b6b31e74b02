//! The operator's metrics, served in OpenMetrics text by the admin endpoint. Every label has
//! a bounded set of values: categories, API resources and verbs, workload states, and per
//! policy (never per workload).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::activity::{Activity, Started};
use crate::api::{EgressProxyPolicy, EgressProxyPolicyStatus, RotationPhase};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Outcome {
    /// `success`, `error`, or `standby` (left to the leader).
    result: &'static str,
    /// The error category (`conflict`, `forbidden`, ...); empty on success.
    category: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Write {
    /// The API resource, `plural` or `plural/subresource`.
    pub resource: String,
    /// `create`, `update`, `patch`, `delete` or `deletecollection`.
    pub verb: &'static str,
    /// `2xx`, `4xx`, `5xx`, or `refused` (not sent: this instance is not the leader) or
    /// `failed` (no answer).
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Kind {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct State {
    /// `selected`, `up_to_date` or `pending`.
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyKey {
    namespace: String,
    policy: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyValue {
    namespace: String,
    policy: String,
    value: String,
}

/// A policy's namespace and name.
type PolicyId = (String, String);

/// What one policy's status contributes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Figures {
    selected: i64,
    up_to_date: i64,
    ready: bool,
    /// The Verified condition, when the policy has `spec.verification`.
    verified: Option<bool>,
    phase: String,
    slot: String,
}

/// Every metric of the process.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    reconciles: Family<Outcome, Counter>,
    reconcile_duration: Histogram,
    writes: Family<Write, Counter>,
    watch_restarts: Family<Kind, Counter>,
    leader: Gauge,
    workloads: Family<State, Gauge>,
    ready: Family<PolicyKey, Gauge>,
    verified: Family<PolicyKey, Gauge>,
    phase: Family<PolicyValue, Gauge>,
    slot: Family<PolicyValue, Gauge>,
    policies: Mutex<BTreeMap<(String, String), Figures>>,
    /// The policies listed since the policy watch started a re-list.
    /// Per policy watch in a re-list (its namespace; `None`: cluster-wide), what it listed.
    relist: Mutex<BTreeMap<Option<String>, BTreeSet<PolicyId>>>,
    /// What the caches applied and which reconciles ran; kept only when asked for.
    activity: Option<Arc<Activity>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("egress_proxy");
        let m = Metrics {
            reconciles: Family::default(),
            reconcile_duration: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
            writes: Family::default(),
            watch_restarts: Family::default(),
            leader: Gauge::default(),
            workloads: Family::default(),
            ready: Family::default(),
            verified: Family::default(),
            phase: Family::default(),
            slot: Family::default(),
            policies: Mutex::default(),
            relist: Mutex::default(),
            activity: None,
            registry: Registry::default(),
        };
        let r = &mut registry;
        r.register(
            "reconciles",
            "Reconciles of policies, by result and error category",
            m.reconciles.clone(),
        );
        r.register(
            "reconcile_duration_seconds",
            "Time one reconcile took",
            m.reconcile_duration.clone(),
        );
        r.register(
            "api_writes",
            "Write requests to the API server, by resource, verb and outcome",
            m.writes.clone(),
        );
        r.register(
            "watch_restarts",
            "Watches that failed and were re-established, by kind",
            m.watch_restarts.clone(),
        );
        r.register(
            "leader",
            "1 while this instance leads (may write), else 0",
            m.leader.clone(),
        );
        r.register(
            "workloads",
            "Workloads selected by all policies, up to date, and pending",
            m.workloads.clone(),
        );
        r.register(
            "policy_ready",
            "1 when the policy's Ready condition is True",
            m.ready.clone(),
        );
        r.register(
            "policy_verified",
            "1 when the policy's last verification passed, 0 when it failed or is pending (only \
             for policies with spec.verification)",
            m.verified.clone(),
        );
        r.register(
            "policy_rotation_phase",
            "1 for the phase of the policy's last rotation (value None: never rotated)",
            m.phase.clone(),
        );
        r.register(
            "policy_active_slot",
            "1 for the credential slot the policy's workloads are switched to",
            m.slot.clone(),
        );
        for state in ["selected", "up_to_date", "pending"] {
            m.workloads.get_or_create(&State { state }).set(0);
        }
        Metrics { registry, ..m }
    }

    /// Metrics that also keep `activity` (see [`Activity`]).
    pub fn recording(activity: Arc<Activity>) -> Metrics {
        Metrics {
            activity: Some(activity),
            ..Metrics::new()
        }
    }

    /// The [`Activity`] these metrics keep, if any.
    pub fn activity(&self) -> Option<&Arc<Activity>> {
        self.activity.as_ref()
    }

    /// A cache applied an object: recorded if this keeps [`Activity`].
    pub(crate) fn applied<K: kube::Resource<DynamicType = ()>>(&self, o: &K, deleted: bool) {
        if let Some(a) = &self.activity {
            let m = o.meta();
            let ns = m.namespace.as_deref().unwrap_or_default();
            let name = m.name.as_deref().unwrap_or_default();
            let rv = m.resource_version.as_deref();
            a.applied(&K::kind(&()), ns, name, rv, deleted);
        }
    }

    /// A reconcile starts; hand the result to [`Metrics::finished`].
    pub(crate) fn starting(&self) -> Option<Started> {
        self.activity.as_ref().map(|a| a.started())
    }

    /// The reconcile of `policy` begun at `start` ended.
    pub(crate) fn finished(&self, policy: (&str, &str), start: Option<Started>) {
        if let (Some(a), Some(start)) = (&self.activity, start) {
            a.finished(policy, start);
        }
    }

    /// One reconcile finished: `category` is `None` on success.
    pub(crate) fn reconciled(&self, took: Duration, category: Option<&'static str>) {
        let (result, category) = match category {
            None => ("success", ""),
            Some(c) => ("error", c),
        };
        self.reconciles
            .get_or_create(&Outcome { result, category })
            .inc();
        self.reconcile_duration.observe(took.as_secs_f64());
    }

    /// A standby looked at a policy and left it to the leader.
    pub(crate) fn standby(&self) {
        let o = Outcome {
            result: "standby",
            category: "",
        };
        self.reconciles.get_or_create(&o).inc();
    }

    pub(crate) fn wrote(&self, write: &Write) {
        self.writes.get_or_create(write).inc();
    }

    pub(crate) fn watch_restarted(&self, kind: &str) {
        self.watch_restarts
            .get_or_create(&Kind {
                kind: kind.to_owned(),
            })
            .inc();
    }

    /// The policy cache applied `policy` (or deleted it, `None`): its status's figures.
    pub(crate) fn saw_policy(&self, ns: &str, name: &str, policy: Option<&EgressProxyPolicy>) {
        let key = (ns.to_owned(), name.to_owned());
        let mut relists = self.relist.lock().unwrap_or_else(|p| p.into_inner());
        for (scope, seen) in relists.iter_mut() {
            if covers(scope.as_deref(), ns) {
                seen.insert(key.clone());
            }
        }
        drop(relists);
        let figures = policy.map(|p| figures(p.status.as_ref()));
        let mut all = self.policies.lock().unwrap_or_else(|p| p.into_inner());
        let before = match &figures {
            Some(f) => all.insert(key, f.clone()),
            None => all.remove(&key),
        };
        if before == figures {
            return;
        }
        let pk = PolicyKey {
            namespace: ns.to_owned(),
            policy: name.to_owned(),
        };
        let value = |value: &str| PolicyValue {
            namespace: ns.to_owned(),
            policy: name.to_owned(),
            value: value.to_owned(),
        };
        // Only a value that changed replaces its series, so a scrape never misses one.
        let (old, new) = (before.as_ref(), figures.as_ref());
        if let Some(b) = old {
            if new.is_none_or(|f| f.phase != b.phase) {
                self.phase.remove(&value(&b.phase));
            }
            if new.is_none_or(|f| f.slot != b.slot) {
                self.slot.remove(&value(&b.slot));
            }
        }
        match new {
            Some(f) => {
                self.ready.get_or_create(&pk).set(i64::from(f.ready));
                match f.verified {
                    Some(v) => {
                        self.verified.get_or_create(&pk).set(i64::from(v));
                    }
                    None => {
                        self.verified.remove(&pk);
                    }
                }
                self.phase.get_or_create(&value(&f.phase)).set(1);
                if !f.slot.is_empty() {
                    self.slot.get_or_create(&value(&f.slot)).set(1);
                }
            }
            None => {
                self.ready.remove(&pk);
                self.verified.remove(&pk);
            }
        }
        let (selected, up) = all
            .values()
            .fold((0, 0), |(s, u), f| (s + f.selected, u + f.up_to_date));
        for (state, n) in [
            ("selected", selected),
            ("up_to_date", up),
            ("pending", selected - up),
        ] {
            self.workloads.get_or_create(&State { state }).set(n);
        }
    }

    /// The policy watch of `scope` (a namespace, or `None` for the cluster) re-lists: the
    /// policies there that it does not list again were deleted meanwhile.
    pub(crate) fn relisting(&self, scope: Option<&str>) {
        let mut relists = self.relist.lock().unwrap_or_else(|p| p.into_inner());
        relists.insert(scope.map(str::to_owned), BTreeSet::new());
    }

    /// The re-list of `scope` is complete: forget its policies that it did not list.
    pub(crate) fn relisted(&self, scope: Option<&str>) {
        let key = scope.map(str::to_owned);
        let seen = self
            .relist
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&key);
        let Some(seen) = seen else {
            return;
        };
        let gone: Vec<(String, String)> = {
            let all = self.policies.lock().unwrap_or_else(|p| p.into_inner());
            let stale = |k: &&(String, String)| covers(scope, &k.0) && !seen.contains(*k);
            all.keys().filter(stale).cloned().collect()
        };
        for (ns, name) in gone {
            self.saw_policy(&ns, &name, None);
        }
    }

    /// The metrics in OpenMetrics text.
    pub fn encode(&self, leader: bool) -> String {
        self.leader.set(i64::from(leader));
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// Whether a policy watch of `scope` sees namespace `ns`.
fn covers(scope: Option<&str>, ns: &str) -> bool {
    scope.is_none_or(|s| s == ns)
}

fn figures(status: Option<&EgressProxyPolicyStatus>) -> Figures {
    let Some(s) = status else {
        return Figures {
            phase: "None".into(),
            ..Default::default()
        };
    };
    let counts = s.workloads.as_ref();
    let ready = s
        .conditions
        .iter()
        .any(|c| c.type_ == crate::api::reasons::READY && c.status == "True");
    let verified = s
        .conditions
        .iter()
        .find(|c| c.type_ == crate::api::reasons::VERIFIED)
        .map(|c| c.status == "True");
    let phase = s
        .rotation
        .as_ref()
        .map(|r| phase_name(r.phase))
        .unwrap_or("None");
    Figures {
        selected: counts.map_or(0, |c| i64::from(c.selected)),
        up_to_date: counts.map_or(0, |c| i64::from(c.up_to_date)),
        ready,
        verified,
        phase: phase.into(),
        slot: s.active_credential.clone().unwrap_or_default(),
    }
}

fn phase_name(p: RotationPhase) -> &'static str {
    match p {
        RotationPhase::Verifying => "Verifying",
        RotationPhase::Rolling => "Rolling",
        RotationPhase::Draining => "Draining",
        RotationPhase::Complete => "Complete",
        RotationPhase::Blocked => "Blocked",
        RotationPhase::Stalled => "Stalled",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(
        ready: &str,
        selected: i32,
        up: i32,
        phase: Option<&str>,
        slot: &str,
    ) -> EgressProxyPolicy {
        let mut status = serde_json::json!({
            "conditions": [{"type": "Ready", "status": ready, "reason": "X", "message": "",
                "lastTransitionTime": "2026-12-03T10:00:00Z"}],
            "workloads": {"selected": selected, "upToDate": up},
            "activeCredential": slot,
        });
        if let Some(p) = phase {
            status["rotation"] = serde_json::json!({"phase": p, "from": "a", "to": "b",
                "trigger": "Manual", "workloads": {"total": 0, "switched": 0, "rolledOut": 0}});
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "egressproxy.io/v1alpha1", "kind": "EgressProxyPolicy",
            "metadata": {"name": "p", "namespace": "n"},
            "spec": {"workloadSelector": {}, "proxy": {"credentials": [], "active": ""}},
            "status": status,
        }))
        .expect("policy")
    }

    fn lines(m: &Metrics, prefix: &str) -> Vec<String> {
        let text = m.encode(false);
        text.lines()
            .filter(|l| l.starts_with(prefix))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn policy_figures_follow_the_cache_and_go_with_the_policy() {
        let m = Metrics::new();
        m.saw_policy(
            "n",
            "p",
            Some(&policy("False", 5, 2, Some("Rolling"), "blue")),
        );
        m.saw_policy("n", "q", Some(&policy("True", 3, 3, None, "main")));
        let mut w = lines(&m, "egress_proxy_workloads");
        w.sort();
        assert_eq!(
            w,
            [
                "egress_proxy_workloads{state=\"pending\"} 3",
                "egress_proxy_workloads{state=\"selected\"} 8",
                "egress_proxy_workloads{state=\"up_to_date\"} 5",
            ]
        );
        // The phase moves: the old series goes, the new one is there once.
        m.saw_policy(
            "n",
            "p",
            Some(&policy("True", 5, 5, Some("Complete"), "green")),
        );
        let phases = lines(&m, "egress_proxy_policy_rotation_phase");
        assert_eq!(phases.len(), 2, "{phases:?}");
        assert!(
            phases
                .iter()
                .any(|l| l.contains("policy=\"p\"") && l.contains("value=\"Complete\""))
        );
        assert!(
            phases
                .iter()
                .any(|l| l.contains("policy=\"q\"") && l.contains("value=\"None\""))
        );
        let slots = lines(&m, "egress_proxy_policy_active_slot");
        assert!(
            slots
                .iter()
                .any(|l| l.contains("policy=\"p\"") && l.contains("value=\"green\""))
        );
        assert!(!slots.iter().any(|l| l.contains("value=\"blue\"")));
        // Deleted: its series go, the totals drop.
        m.saw_policy("n", "p", None);
        assert!(!m.encode(false).contains("policy=\"p\""));
        assert!(
            lines(&m, "egress_proxy_workloads")
                .contains(&"egress_proxy_workloads{state=\"selected\"} 3".to_owned())
        );
        // A re-list that does not list q again: q was deleted while the watch was down.
        m.saw_policy("n", "p", Some(&policy("True", 1, 1, None, "main")));
        m.relisting(None);
        m.saw_policy("n", "p", Some(&policy("True", 1, 1, None, "main")));
        m.relisted(None);
        let text = m.encode(false);
        assert!(
            !text.contains("policy=\"q\"") && text.contains("policy=\"p\""),
            "{text}"
        );
        // A namespaced install: one namespace's re-list forgets nothing of another's.
        m.saw_policy("a", "x", Some(&policy("True", 1, 1, None, "main")));
        m.relisting(Some("n"));
        m.relisted(Some("n"));
        let text = m.encode(false);
        assert!(text.contains("namespace=\"a\",policy=\"x\""), "{text}");
        assert!(!text.contains("policy=\"p\""), "{text}");
        m.reconciled(Duration::from_millis(20), Some("conflict"));
        m.reconciled(Duration::from_millis(20), None);
        let r = lines(&m, "egress_proxy_reconciles_total");
        assert!(
            r.contains(
                &"egress_proxy_reconciles_total{result=\"error\",category=\"conflict\"} 1"
                    .to_owned()
            ),
            "{r:?}"
        );
        assert!(m.encode(true).contains("egress_proxy_leader 1"));
    }

    #[test]
    fn verified_is_a_series_only_for_policies_with_verification() {
        let m = Metrics::new();
        let mut p = policy("True", 1, 1, None, "main");
        m.saw_policy("n", "p", Some(&p));
        assert!(lines(&m, "egress_proxy_policy_verified").is_empty());
        let verified = |status: &str| {
            serde_json::from_value(serde_json::json!({"type": "Verified", "status": status,
                "reason": "X", "message": "", "lastTransitionTime": "2026-12-03T10:00:00Z"}))
            .expect("condition")
        };
        let conditions = &mut p.status.as_mut().expect("status").conditions;
        conditions.push(verified("False"));
        m.saw_policy("n", "p", Some(&p));
        assert_eq!(
            lines(&m, "egress_proxy_policy_verified"),
            ["egress_proxy_policy_verified{namespace=\"n\",policy=\"p\"} 0"]
        );
        let conditions = &mut p.status.as_mut().expect("status").conditions;
        conditions.pop();
        conditions.push(verified("True"));
        m.saw_policy("n", "p", Some(&p));
        assert_eq!(
            lines(&m, "egress_proxy_policy_verified"),
            ["egress_proxy_policy_verified{namespace=\"n\",policy=\"p\"} 1"]
        );
        m.saw_policy("n", "p", None);
        assert!(lines(&m, "egress_proxy_policy_verified").is_empty());
    }
}
