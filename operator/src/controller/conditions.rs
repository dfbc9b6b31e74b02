//! Status conditions in the Kubernetes convention: `Ready`, plus `Reconciling` and `Stalled`
//! (the kstatus pair Argo CD and Flux read). Pure.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::api::reasons::READY;
#[cfg(test)]
use crate::api::reasons::reason;

/// One condition as decided by the reconciler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    pub type_: &'static str,
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

/// Builds the conditions, keeping `lastTransitionTime` from `old` unless the status flipped.
/// Conditions of other types in `old` are dropped (the operator owns the whole list).
pub fn build(
    old: &[Condition],
    decided: &[Decided],
    generation: Option<i64>,
    now: &Time,
) -> Vec<Condition> {
    decided
        .iter()
        .map(|d| {
            let status = if d.status { "True" } else { "False" };
            let last = old
                .iter()
                .find(|c| c.type_ == d.type_ && c.status == status)
                .map(|c| c.last_transition_time.clone())
                .unwrap_or_else(|| now.clone());
            Condition {
                type_: d.type_.to_owned(),
                status: status.to_owned(),
                reason: d.reason.to_owned(),
                message: bounded(&d.message),
                observed_generation: generation,
                last_transition_time: last,
            }
        })
        .collect()
}

/// The API limits a condition message to 32768 bytes; keep well under it.
fn bounded(message: &str) -> String {
    const MAX: usize = 4096;
    if message.len() <= MAX {
        return message.to_owned();
    }
    let mut end = MAX;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &message[..end])
}

/// The Ready condition of `conditions`, as (status, reason).
pub fn ready_of(conditions: &[Condition]) -> Option<(&str, &str)> {
    conditions
        .iter()
        .find(|c| c.type_ == READY)
        .map(|c| (c.status.as_str(), c.reason.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Time {
        Time(s.parse().expect("timestamp"))
    }

    #[test]
    fn transition_time_changes_only_when_status_flips() {
        let d = |status, reason: &'static str| Decided {
            type_: READY,
            status,
            reason,
            message: String::new(),
        };
        let first = build(
            &[],
            &[d(false, reason::SECRET_NOT_AVAILABLE)],
            Some(1),
            &t("2026-01-01T00:00:00Z"),
        );
        assert_eq!(first[0].last_transition_time, t("2026-01-01T00:00:00Z"));
        let same = build(
            &first,
            &[d(false, reason::INVALID_PROXY_URL)],
            Some(2),
            &t("2026-01-02T00:00:00Z"),
        );
        assert_eq!(same[0].last_transition_time, t("2026-01-01T00:00:00Z"));
        assert_eq!(same[0].reason, "InvalidProxyURL");
        assert_eq!(same[0].observed_generation, Some(2));
        let flipped = build(
            &same,
            &[d(true, reason::RECONCILED)],
            Some(2),
            &t("2026-01-03T00:00:00Z"),
        );
        assert_eq!(flipped[0].last_transition_time, t("2026-01-03T00:00:00Z"));
        assert_eq!(ready_of(&flipped), Some(("True", "Reconciled")));
    }

    #[test]
    fn long_messages_are_cut_on_a_char_boundary() {
        let long = "é".repeat(5000);
        let c = build(
            &[],
            &[Decided {
                type_: READY,
                status: false,
                reason: reason::ENV_CONFLICT,
                message: long,
            }],
            None,
            &t("2026-01-01T00:00:00Z"),
        );
        assert!(c[0].message.len() <= 4096 + "…".len());
        assert!(c[0].message.ends_with('…'));
    }
}
