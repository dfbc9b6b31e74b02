//! Leader election on a `coordination.k8s.io/v1` Lease, the way client-go's leaderelection
//! does it: a holder renews every retry period and stops leading when it could not renew for
//! the renew deadline; a candidate takes the Lease over once its record has not changed for
//! the lease duration, measured on its own clock (never by comparing another node's
//! timestamps). Hand-written rather than kube-lease-manager: that crate keeps reporting
//! leadership while renewals fail and compares the holder's timestamps with the local clock.
//!
//! This module decides (pure); [`elector`] talks to the API server. [`Leadership`] is what
//! the rest of the operator asks: whether it may write now.

pub mod elector;

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// The timing of an election, as client-go names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How long a candidate waits after the Lease record last changed before taking it over.
    pub lease_duration: Duration,
    /// How long a leader keeps leading without a successful renewal.
    pub renew_deadline: Duration,
    /// How often the holder renews and a candidate looks again.
    pub retry_period: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl Timing {
    /// The orderings the election relies on: a leader stops before a candidate may take over,
    /// and renews several times within its deadline.
    pub fn check(&self) -> Result<(), String> {
        if self.renew_deadline >= self.lease_duration {
            return Err("the renew deadline must be shorter than the lease duration".into());
        }
        if self.retry_period >= self.renew_deadline {
            return Err("the retry period must be shorter than the renew deadline".into());
        }
        if self.retry_period.is_zero() {
            return Err("the retry period must be above zero".into());
        }
        Ok(())
    }
}

/// The parts of a Lease record the election reads. A change of any of them (a renewal
/// included) proves the holder is alive.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    pub holder: Option<String>,
    pub renew_time: Option<String>,
    pub transitions: i32,
    /// The holder's lease duration, in seconds.
    pub duration: Option<i32>,
}

/// What to do with the Lease now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// It is ours: write a new renew time.
    Renew,
    /// Free or expired: write ourselves as holder.
    Acquire,
    /// Someone else holds it and renewed within the lease duration.
    Wait,
}

/// Decides the next step for candidate `me`, given the record and when it last changed (as
/// this process saw it).
pub fn decide(me: &str, record: &Record, changed_at: Instant, now: Instant, t: &Timing) -> Step {
    match record.holder.as_deref() {
        Some(h) if h == me => Step::Renew,
        None | Some("") => Step::Acquire,
        Some(_) => {
            let held_for = record
                .duration
                .filter(|d| *d > 0)
                .map(|d| Duration::from_secs(d as u64))
                .unwrap_or(t.lease_duration);
            if now.saturating_duration_since(changed_at) >= held_for {
                Step::Acquire
            } else {
                Step::Wait
            }
        }
    }
}

/// Whether this process may write now, shared by the elector, the client's write gate, the
/// controller and the admin endpoint.
#[derive(Debug, Clone)]
pub struct Leadership {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Election off: always the leader.
    always: bool,
    /// While leading: the instant the last renewal stops covering.
    until: Mutex<Option<Instant>>,
    /// The Lease has been read at least once (or election is off).
    known: AtomicBool,
    /// Flips of leadership, for whoever must act on them.
    changes: watch::Sender<bool>,
}

impl Leadership {
    /// No election: this process is the only writer.
    pub fn always() -> Leadership {
        Leadership::new(true)
    }

    /// An election not yet decided: not leading until the elector says so.
    pub fn elected() -> Leadership {
        Leadership::new(false)
    }

    fn new(always: bool) -> Leadership {
        Leadership {
            inner: Arc::new(Inner {
                always,
                until: Mutex::new(None),
                known: AtomicBool::new(always),
                changes: watch::channel(always).0,
            }),
        }
    }

    /// Whether this process leads at this instant. A leader whose renewals stopped working
    /// stops here at its deadline, whatever the elector task is doing.
    pub fn is_leader(&self) -> bool {
        self.inner.always || self.until().is_some_and(|u| Instant::now() < u)
    }

    /// Whether the election's state is known (the Lease was read), for readiness.
    pub fn known(&self) -> bool {
        self.inner.known.load(Ordering::Relaxed)
    }

    /// Leadership flips (`true`: became leader).
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.inner.changes.subscribe()
    }

    /// Whether the last flip said leading (the deadline may have passed since).
    pub(crate) fn flagged(&self) -> bool {
        *self.inner.changes.borrow()
    }

    fn until(&self) -> Option<Instant> {
        *self.inner.until.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How long this instance still leads without another renewal; `None` without election.
    pub(crate) fn remaining(&self) -> Option<Duration> {
        if self.inner.always {
            return None;
        }
        let until = self.until()?;
        Some(until.saturating_duration_since(Instant::now()))
    }

    /// The elector renewed (or acquired) the Lease at `at`. A term that had lapsed (its
    /// deadline passed before this renewal) is a new term: it is announced even if no loss
    /// was, so the new term reconciles everything again.
    pub(crate) fn renewed(&self, at: Instant, deadline: Duration) {
        let mut until = self.inner.until.lock().unwrap_or_else(|p| p.into_inner());
        let lapsed = until.is_none_or(|u| Instant::now() >= u);
        *until = Some(at + deadline);
        drop(until);
        self.inner.known.store(true, Ordering::Relaxed);
        if lapsed {
            self.inner.changes.send_replace(true);
        }
    }

    /// The elector saw another holder, released the Lease, or passed its renew deadline.
    pub(crate) fn lost(&self) {
        *self.inner.until.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.inner.known.store(true, Ordering::Relaxed);
        self.inner
            .changes
            .send_if_modified(|v| std::mem::replace(v, false));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_by(h: &str, duration: Option<i32>) -> Record {
        Record {
            holder: Some(h.into()),
            renew_time: Some("2026-12-03T10:00:00.000000Z".into()),
            transitions: 1,
            duration,
        }
    }

    #[test]
    fn steps() {
        let t = Timing::default();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let free = Record::default();
        assert_eq!(decide("a", &free, t0, t0, &t), Step::Acquire);
        let emptied = Record {
            holder: Some(String::new()),
            ..held_by("", None)
        };
        assert_eq!(decide("a", &emptied, t0, t0, &t), Step::Acquire);
        assert_eq!(
            decide("a", &held_by("a", None), t0, at(60), &t),
            Step::Renew
        );
        // Another holder: waited out from when this process saw the record change.
        let b = held_by("b", None);
        assert_eq!(decide("a", &b, t0, at(14), &t), Step::Wait);
        assert_eq!(decide("a", &b, t0, at(15), &t), Step::Acquire);
        // The holder's own duration wins over ours.
        let b30 = held_by("b", Some(30));
        assert_eq!(decide("a", &b30, t0, at(29), &t), Step::Wait);
        assert_eq!(decide("a", &b30, t0, at(30), &t), Step::Acquire);
        // A clock that went backwards never expires a lease.
        assert_eq!(decide("a", &b, at(5), t0, &t), Step::Wait);
    }

    #[test]
    fn timing_orderings() {
        assert_eq!(Timing::default().check(), Ok(()));
        let s = Duration::from_secs;
        let bad = |l, r, p| Timing {
            lease_duration: s(l),
            renew_deadline: s(r),
            retry_period: s(p),
        };
        assert!(
            bad(10, 10, 2)
                .check()
                .unwrap_err()
                .contains("renew deadline")
        );
        assert!(
            bad(15, 10, 10)
                .check()
                .unwrap_err()
                .contains("retry period")
        );
        assert!(bad(15, 10, 0).check().unwrap_err().contains("above zero"));
    }

    #[test]
    fn leadership_follows_renewals_and_deadline() {
        let l = Leadership::elected();
        let mut flips = l.subscribe();
        assert!(!l.is_leader() && !l.known());
        l.renewed(Instant::now(), Duration::from_secs(60));
        assert!(l.is_leader() && l.known());
        assert!(flips.has_changed().unwrap() && *flips.borrow_and_update());
        // A renewal while leading is not a flip.
        l.renewed(Instant::now(), Duration::from_secs(60));
        assert!(!flips.has_changed().unwrap());
        // Past the deadline the process stops leading on its own.
        l.renewed(
            Instant::now() - Duration::from_secs(61),
            Duration::from_secs(60),
        );
        assert!(!l.is_leader());
        assert_eq!(l.remaining(), Some(Duration::ZERO));
        // A renewal after the lapse starts a new term, announced though no loss was.
        l.renewed(Instant::now(), Duration::from_secs(60));
        assert!(l.is_leader());
        assert!(flips.has_changed().unwrap() && *flips.borrow_and_update());
        l.lost();
        assert!(!l.is_leader());
        assert!(flips.has_changed().unwrap() && !*flips.borrow_and_update());
        assert!(Leadership::always().is_leader() && Leadership::always().known());
        assert_eq!(Leadership::always().remaining(), None);
    }
}
