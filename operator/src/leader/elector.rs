//! The elector: reads the Lease every retry period and writes it when [`decide`] says so,
//! with the resourceVersion it read, so two candidates never both win a write.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;

use super::{Leadership, Record, Step, Timing, decide};
use crate::controller::describe;

/// The field manager of the elector's writes.
const FIELD_MANAGER: &str = "egress-proxy-operator-leader";

/// One candidate for one Lease.
pub struct Elector {
    pub api: Api<Lease>,
    pub name: String,
    /// This process's identity (unique per process).
    pub me: String,
    pub timing: Timing,
    pub leadership: Leadership,
}

/// What the elector remembers between rounds.
#[derive(Default)]
struct Memory {
    record: Option<Record>,
    changed_at: Option<Instant>,
    last_renewal: Option<Instant>,
    /// When the Lease was first seen missing after another instance had held it.
    missing_since: Option<Instant>,
}

impl Elector {
    /// Runs until `stop` resolves, then releases the Lease if it holds it.
    pub async fn run(self, stop: impl Future<Output = ()>) {
        let mut stop = std::pin::pin!(stop);
        let mut memory = Memory::default();
        loop {
            // As client-go: a round may take up to the renew deadline, so a slow API server
            // does not cancel every renewal after it was sent.
            let round = tokio::time::timeout(self.timing.renew_deadline, self.round(&mut memory));
            tokio::select! {
                _ = &mut stop => break,
                r = round => if r.is_err() {
                    tracing::warn!(lease = %self.name, "no answer from the API server about the lease");
                },
            }
            self.check_deadline(&memory);
            tokio::select! {
                _ = &mut stop => break,
                _ = tokio::time::sleep(self.timing.retry_period) => {}
            }
        }
        self.release().await;
    }

    /// A leader that could not renew for the renew deadline stops leading.
    fn check_deadline(&self, memory: &Memory) {
        let leading = self.leadership.flagged();
        let expired = memory
            .last_renewal
            .is_none_or(|t| t.elapsed() >= self.timing.renew_deadline);
        if leading && expired {
            tracing::warn!(lease = %self.name, "could not renew the lease in time; no longer leading");
            self.leadership.lost();
        }
    }

    /// Reads the Lease and takes the step [`decide`] gives.
    async fn round(&self, memory: &mut Memory) {
        let lease = match self.api.get_opt(&self.name).await {
            Ok(l) => l,
            Err(e) => return self.failed(&e, "reading the lease failed"),
        };
        let now = Instant::now();
        let Some(lease) = lease else {
            return self.missing(memory, now).await;
        };
        memory.missing_since = None;
        let record = record_of(&lease);
        if memory.record.as_ref() != Some(&record) {
            memory.record = Some(record.clone());
            memory.changed_at = Some(now);
        }
        let changed_at = memory.changed_at.unwrap_or(now);
        match decide(&self.me, &record, changed_at, now, &self.timing) {
            Step::Wait => {
                if self.leadership.flagged() {
                    tracing::warn!(lease = %self.name, holder = ?record.holder, "another instance holds the lease; no longer leading");
                }
                self.leadership.lost();
            }
            step => self.write(lease, &record, step, memory).await,
        }
    }

    /// The Lease does not exist. On a fresh install it is created at once. After another
    /// instance held it (an admin or a GitOps prune deleted it), that instance may lead
    /// until its deadline, so the Lease is created only once it has been missing for the
    /// lease duration.
    async fn missing(&self, memory: &mut Memory, now: Instant) {
        let held_by_other = memory
            .record
            .as_ref()
            .and_then(|r| r.holder.as_deref())
            .is_some_and(|h| h != self.me);
        if held_by_other {
            let since = *memory.missing_since.get_or_insert(now);
            if now.saturating_duration_since(since) < self.timing.lease_duration {
                return;
            }
        }
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                ..Default::default()
            },
            spec: Some(self.spec(None, 0)),
        };
        let started = Instant::now();
        match self.api.create(&params(), &lease).await {
            Ok(_) => self.won(started, memory, "acquired"),
            Err(e) => {
                // Another instance created it first: that one leads.
                self.leadership.lost();
                self.failed(&e, "creating the lease failed");
            }
        }
    }

    /// Renews or takes over the Lease, with the resourceVersion that was read.
    async fn write(&self, mut lease: Lease, record: &Record, step: Step, memory: &mut Memory) {
        let acquire = step == Step::Acquire;
        let spec = if acquire {
            self.spec(None, record.transitions + 1)
        } else {
            let acquired = lease.spec.as_ref().and_then(|s| s.acquire_time.clone());
            self.spec(acquired, record.transitions)
        };
        lease.spec = Some(spec);
        let started = Instant::now();
        match self.api.replace(&self.name, &params(), &lease).await {
            Ok(_) => {
                let what = if acquire { "acquired" } else { "renewed" };
                self.won(started, memory, what)
            }
            // On a conflict someone else wrote first: the next round reads who.
            Err(e) => self.failed(&e, "writing the lease failed"),
        }
    }

    /// A conflict is the election at work; anything else (RBAC, a missing namespace, an
    /// unreachable server) is worth a warning, or an instance would stand by without saying
    /// why.
    fn failed(&self, e: &kube::Error, what: &str) {
        if matches!(e, kube::Error::Api(s) if s.code == 409) {
            tracing::debug!(lease = %self.name, error = %describe(e), "{what}");
        } else {
            tracing::warn!(lease = %self.name, error = %describe(e), "{what}");
        }
    }

    fn won(&self, started: Instant, memory: &mut Memory, what: &str) {
        if !self.leadership.is_leader() {
            tracing::info!(lease = %self.name, identity = %self.me, "{what} the lease; leading");
        }
        memory.last_renewal = Some(started);
        // Measured from before the request: the write may have landed at its start.
        self.leadership.renewed(started, self.timing.renew_deadline);
    }

    fn spec(&self, acquired: Option<MicroTime>, transitions: i32) -> LeaseSpec {
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        LeaseSpec {
            holder_identity: Some(self.me.clone()),
            lease_duration_seconds: Some(secs(self.timing.lease_duration)),
            acquire_time: Some(acquired.unwrap_or_else(|| now.clone())),
            renew_time: Some(now),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }

    /// Gives the Lease up on shutdown so the standby takes over at once, not after the lease
    /// duration. Only a Lease whose record still names this process is touched (also when
    /// its term just lapsed: the controller has stopped, and the write is guarded by the
    /// resourceVersion that was read).
    async fn release(&self) {
        self.leadership.lost();
        let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await else {
            return;
        };
        if record_of(&lease).holder.as_deref() != Some(self.me.as_str()) {
            return;
        }
        let spec = lease.spec.get_or_insert_with(Default::default);
        spec.holder_identity = None;
        spec.acquire_time = None;
        spec.renew_time = None;
        spec.lease_duration_seconds = Some(1);
        match self.api.replace(&self.name, &params(), &lease).await {
            Ok(_) => tracing::info!(lease = %self.name, "released the lease"),
            Err(e) => self.failed(&e, "releasing the lease failed"),
        }
    }
}

fn secs(d: Duration) -> i32 {
    i32::try_from(d.as_secs()).unwrap_or(i32::MAX)
}

/// The election's view of a Lease.
pub fn record_of(lease: &Lease) -> Record {
    let spec = lease.spec.as_ref();
    Record {
        holder: spec
            .and_then(|s| s.holder_identity.clone())
            .filter(|h| !h.is_empty()),
        renew_time: spec
            .and_then(|s| s.renew_time.as_ref())
            .map(|t| t.0.to_string()),
        transitions: spec.and_then(|s| s.lease_transitions).unwrap_or(0),
        duration: spec.and_then(|s| s.lease_duration_seconds),
    }
}

fn params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    }
}
