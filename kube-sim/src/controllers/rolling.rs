//! The arithmetic of a rolling update, as the Deployment and DaemonSet controllers of
//! kube-controller-manager do it (`deployment/util`, `rolling.go`). Pure, so it is tested
//! step by step.

use serde_json::Value;

/// An int-or-percent value (`maxSurge`, `maxUnavailable`) against `total`: a percentage is
/// rounded up or down as the real controllers do.
pub fn resolve(v: Option<&Value>, default_percent: i64, total: i64, round_up: bool) -> i64 {
    let percent = |p: i64| {
        let x = p * total;
        if round_up { (x + 99) / 100 } else { x / 100 }
    };
    match v {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0).max(0),
        Some(Value::String(s)) => match s.strip_suffix('%').and_then(|p| p.parse().ok()) {
            Some(p) => percent(p),
            None => s.parse().unwrap_or(0),
        },
        _ => percent(default_percent),
    }
}

/// `(maxSurge, maxUnavailable)` of a RollingUpdate strategy for `want` replicas; both zero
/// means one may be unavailable, as the real controller decides.
pub fn surge_and_unavailable(rolling: Option<&Value>, want: i64) -> (i64, i64) {
    let get = |k: &str| rolling.and_then(|r| r.get(k));
    let surge = resolve(get("maxSurge"), 25, want, true);
    let unavailable = resolve(get("maxUnavailable"), 25, want, false).min(want);
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable)
    }
}

/// The new ReplicaSet's replicas after one scale-up step: at most `want + surge` Pods in all
/// ReplicaSets (`all` is the sum of their `spec.replicas`).
pub fn scale_up(want: i64, surge: i64, all: i64, new: i64) -> i64 {
    if new >= want {
        return want;
    }
    let room = (want + surge - all).max(0);
    new + room.min(want - new)
}

/// One ReplicaSet's replicas and available Pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Set {
    pub replicas: i64,
    pub available: i64,
}

/// The old ReplicaSets' replicas after one scale-down step (oldest first): unavailable Pods
/// go first, then available ones while at least `want - unavailable` stay available.
pub fn scale_down(want: i64, unavailable: i64, new: Set, old: &[Set]) -> Vec<i64> {
    let mut out: Vec<i64> = old.iter().map(|s| s.replicas).collect();
    let all: i64 = new.replicas + out.iter().sum::<i64>();
    let min_available = want - unavailable;
    let new_unavailable = (new.replicas - new.available).max(0);
    let max_down = all - min_available - new_unavailable;
    if max_down <= 0 {
        return out;
    }
    // Unhealthy replicas of old sets cost no availability.
    let mut cleaned = 0;
    for (r, s) in out.iter_mut().zip(old) {
        let unhealthy = (*r - s.available).max(0).min(max_down - cleaned);
        *r -= unhealthy;
        cleaned += unhealthy;
    }
    let available: i64 = new.available + old.iter().map(|s| s.available).sum::<i64>();
    let mut budget = (available - min_available).min(max_down - cleaned);
    for r in &mut out {
        let d = (*r).min(budget.max(0));
        *r -= d;
        budget -= d;
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn percentages_round_as_the_controller_does() {
        assert_eq!(resolve(Some(&json!("25%")), 0, 10, true), 3);
        assert_eq!(resolve(Some(&json!("25%")), 0, 10, false), 2);
        assert_eq!(resolve(Some(&json!(2)), 0, 10, false), 2);
        assert_eq!(resolve(Some(&json!("3")), 0, 10, false), 3);
        assert_eq!(resolve(None, 25, 1, true), 1);
        assert_eq!(resolve(None, 25, 1, false), 0);
        assert_eq!(surge_and_unavailable(None, 4), (1, 1));
        assert_eq!(surge_and_unavailable(None, 1), (1, 0));
        let zero = json!({"maxSurge": 0, "maxUnavailable": 0});
        assert_eq!(surge_and_unavailable(Some(&zero), 3), (0, 1));
    }

    #[test]
    fn scale_up_stays_within_the_surge() {
        // 4 replicas, surge 1: the new set gets one Pod while the old one has four.
        assert_eq!(scale_up(4, 1, 4, 0), 1);
        // The old set went down to 3: room for one more.
        assert_eq!(scale_up(4, 1, 4, 1), 2);
        assert_eq!(scale_up(4, 1, 5, 1), 1);
        assert_eq!(scale_up(4, 0, 4, 0), 0);
        assert_eq!(scale_up(4, 10, 4, 0), 4);
        assert_eq!(scale_up(2, 1, 3, 5), 2);
    }

    #[test]
    fn scale_down_keeps_the_minimum_available() {
        let s = |replicas, available| Set {
            replicas,
            available,
        };
        // 4 wanted, 1 unavailable allowed, new set 1 Pod not yet available: one old may go.
        assert_eq!(scale_down(4, 1, s(1, 0), &[s(4, 4)]), vec![3]);
        // One new Pod available, one surging: one more old Pod may go.
        assert_eq!(scale_down(4, 1, s(2, 1), &[s(3, 3)]), vec![2]);
        // maxUnavailable 0: nothing goes until the new Pod is available.
        assert_eq!(scale_down(4, 0, s(1, 0), &[s(4, 4)]), vec![4]);
        assert_eq!(scale_down(4, 0, s(1, 1), &[s(4, 4)]), vec![3]);
        // Unavailable old Pods go first, oldest set first.
        assert_eq!(scale_down(2, 0, s(2, 2), &[s(1, 0), s(1, 1)]), vec![0, 0]);
        assert_eq!(scale_down(3, 1, s(1, 0), &[s(2, 0), s(2, 2)]), vec![0, 2]);
    }
}
