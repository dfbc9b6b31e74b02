//! A record of what the operator has looked at: which objects its caches applied, and which
//! reconciles ran after that. It answers "has the operator seen this change and acted on it?",
//! which a test must know before it can claim that nothing happened. Off unless a caller
//! hands one in through `Metrics::recording`: it keeps an entry per object.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// An object as a cache applied it: kind, namespace (empty if cluster-scoped), name.
type ObjectKey = (String, String, String);

/// A policy: namespace and name.
type PolicyKey = (String, String);

/// How many finished reconciles are kept per policy.
const KEPT: usize = 64;

/// One reconcile of a policy, by the logical clock of [`Activity`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    /// Cache events applied before it started.
    pub after_events: u64,
    /// When it started and ended.
    pub started: u64,
    pub ended: u64,
}

/// A started reconcile, until [`Activity::finished`].
#[derive(Debug, Clone, Copy)]
pub struct Started {
    after_events: u64,
    started: u64,
}

/// What a cache applied last for one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Its resourceVersion (none on some deletions).
    pub resource_version: Option<String>,
    /// The count of cache events once it was applied.
    pub event: u64,
    pub deleted: bool,
}

#[derive(Debug, Default)]
struct State {
    events: u64,
    clock: u64,
    objects: HashMap<ObjectKey, Applied>,
    passes: HashMap<PolicyKey, VecDeque<Pass>>,
}

#[derive(Debug, Default)]
pub struct Activity {
    state: Mutex<State>,
}

impl Activity {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A cache applied an object (after the store holds it).
    pub(crate) fn applied(
        &self,
        kind: &str,
        ns: &str,
        name: &str,
        rv: Option<&str>,
        deleted: bool,
    ) {
        let mut s = self.state();
        s.events += 1;
        let applied = Applied {
            resource_version: rv.map(str::to_owned),
            event: s.events,
            deleted,
        };
        let key = (kind.to_owned(), ns.to_owned(), name.to_owned());
        s.objects.insert(key, applied);
    }

    /// A reconcile starts, before it reads any cache.
    pub(crate) fn started(&self) -> Started {
        let mut s = self.state();
        s.clock += 1;
        Started {
            after_events: s.events,
            started: s.clock,
        }
    }

    /// The reconcile of `policy` begun at `start` has ended, whatever its result.
    pub(crate) fn finished(&self, policy: (&str, &str), start: Started) {
        let mut s = self.state();
        s.clock += 1;
        let pass = Pass {
            after_events: start.after_events,
            started: start.started,
            ended: s.clock,
        };
        let key = (policy.0.to_owned(), policy.1.to_owned());
        let passes = s.passes.entry(key).or_default();
        if passes.len() == KEPT {
            passes.pop_front();
        }
        passes.push_back(pass);
    }

    /// What the caches last applied of an object.
    pub fn object(&self, kind: &str, ns: &str, name: &str) -> Option<Applied> {
        let key = (kind.to_owned(), ns.to_owned(), name.to_owned());
        self.state().objects.get(&key).cloned()
    }

    /// The finished reconciles of a policy still kept, oldest first.
    pub fn passes(&self, ns: &str, name: &str) -> Vec<Pass> {
        let key = (ns.to_owned(), name.to_owned());
        let s = self.state();
        s.passes.get(&key).into_iter().flatten().copied().collect()
    }

    /// The logical clock: it ticks when a reconcile starts or ends.
    pub fn now(&self) -> u64 {
        self.state().clock
    }

    /// The first finished reconcile of a policy that started once the caches had applied
    /// event `event`, and after clock tick `since`.
    pub fn first_pass(&self, ns: &str, name: &str, event: u64, since: u64) -> Option<Pass> {
        let passes = self.passes(ns, name);
        let mut after = passes.into_iter();
        after.find(|p| p.after_events >= event && p.started > since)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_counts_if_it_started_after_the_event_and_the_tick() {
        let a = Activity::default();
        let early = a.started();
        a.applied("Deployment", "team-a", "api", Some("7"), false);
        let event = a.object("Deployment", "team-a", "api").unwrap().event;
        assert_eq!(event, 1);
        // Started before the event, ended after it: not a look at it.
        a.finished(("team-a", "p"), early);
        assert_eq!(a.first_pass("team-a", "p", event, 0), None);
        let first = a.started();
        let overlapping = a.started();
        a.finished(("team-a", "p"), first);
        a.finished(("team-a", "p"), overlapping);
        let f = a.first_pass("team-a", "p", event, 0).unwrap();
        assert_eq!((f.started, f.ended), (3, 5));
        // Started before the first ended: not a later look.
        assert_eq!(a.first_pass("team-a", "p", event, f.ended), None);
        let second = a.started();
        a.finished(("team-a", "p"), second);
        let s = a.first_pass("team-a", "p", event, f.ended).unwrap();
        assert_eq!(s.started, 7);
        assert_eq!(a.first_pass("team-a", "p", event, a.now()), None);
        assert_eq!(a.first_pass("team-a", "other", event, 0), None);
    }

    #[test]
    fn keeps_the_last_state_of_each_object_and_a_bounded_history() {
        let a = Activity::default();
        a.applied("Secret", "team-a", "s", Some("3"), false);
        a.applied("Secret", "team-a", "s", None, true);
        let s = a.object("Secret", "team-a", "s").unwrap();
        assert_eq!((s.resource_version, s.event, s.deleted), (None, 2, true));
        for _ in 0..KEPT + 5 {
            let p = a.started();
            a.finished(("team-a", "p"), p);
        }
        let passes = a.passes("team-a", "p");
        assert_eq!(passes.len(), KEPT);
        assert_eq!(passes[0].started, 11);
    }
}
