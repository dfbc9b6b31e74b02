//! The credential-slot stage: each slot's content fingerprint, the rotation decision, the
//! target slot's URLs and configuration hash, the managed Secret's slot keys, and whether an
//! in-use slot was withdrawn.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::ByteString;
use ring::hmac;

use super::verify::{self, Wanted};
use super::{Blocker, HASH_KEY, Inputs, SOURCE_KEY, SecretData, own_names};
use crate::api::reasons::reason;
use crate::api::{CredentialSlotStatus, SlotState};
use crate::controller::objects::{Rollout, WorkloadView};
use crate::credentials::{CredentialError, ProxyUrls, hex};
use crate::rotation::{self, Decision, Gate, Problem, Progress};
use crate::workloads;

/// One credential slot as the executor read it.
#[derive(Clone)]
pub struct SlotRead {
    pub name: String,
    /// `namespace/name` of its Secret.
    pub source: String,
    /// The Secret's `httpProxy` and `httpsProxy` bytes, length-prefixed, when it could be
    /// read: fingerprinted under the hash key, never shown.
    pub content: Option<Vec<u8>>,
    pub urls: Result<ProxyUrls, CredentialError>,
}

impl fmt::Debug for SlotRead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlotRead")
            .field("name", &self.name)
            .field("source", &self.source)
            .field("urls", &self.urls)
            .finish_non_exhaustive()
    }
}

/// What the slot stage decided.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Stage {
    pub decision: Decision,
    /// The target slot's URLs, when it can be used.
    pub urls: Option<ProxyUrls>,
    /// The configuration hash of the target, when it can be used.
    pub hash: Option<String>,
    pub credentials: Vec<CredentialSlotStatus>,
    /// An in-use slot's Secret was deleted or its grant withdrawn.
    pub withdrawn: Option<Blocker>,
    /// The verification run the target needs (`spec.verification`), and its gate.
    pub verify: Option<Wanted>,
    pub gate: Gate,
}

/// The hash key: the managed Secret's, or the new one.
fn hash_key(i: &Inputs) -> Vec<u8> {
    match i.secret.data.as_ref().and_then(|d| d.0.get(HASH_KEY)) {
        Some(k) if k.0.len() >= 16 => k.0.clone(),
        _ => i.new_key.to_vec(),
    }
}

/// A keyed fingerprint of a slot's content (16 bytes of HMAC-SHA256, hex): it tells that
/// the content changed without letting anyone test guesses of it.
fn fingerprint(key: &[u8], slot: &str, content: &[u8]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
    let mut ctx = hmac::Context::with_key(&key);
    for part in [
        b"egressproxy.io/slot-fingerprint/v1".as_slice(),
        slot.as_bytes(),
        content,
    ] {
        ctx.update(&(part.len() as u64).to_be_bytes());
        ctx.update(part);
    }
    hex(&ctx.sign().as_ref()[..16])
}

fn problem(e: &CredentialError) -> Problem {
    Problem {
        reason: e.reason(),
        message: e.to_string(),
        withdrawn: e.withdrawn(),
    }
}

fn progress(r: Rollout) -> Progress {
    match r {
        Rollout::RolledOut => Progress::RolledOut,
        Rollout::Stalled => Progress::Stalled,
        Rollout::WaitingForManualRestart | Rollout::Paused => Progress::Waiting,
        Rollout::NotStarted | Rollout::Rolling => Progress::Rolling,
    }
}

/// The slot stage for the workloads this policy manages (`mine`).
pub(super) fn stage(
    i: &Inputs,
    no_proxy: &str,
    mine: &[&WorkloadView],
    domain: Option<&str>,
) -> Result<Stage, Blocker> {
    let Some(reads) = i.slots else {
        let message = "the credential Secrets were not read".into();
        let reason = reason::SECRET_NOT_AVAILABLE;
        return Err(Blocker {
            reason,
            message,
            withdrawn: false,
        });
    };
    let key = hash_key(i);
    let views: Vec<rotation::Slot> = reads
        .iter()
        .map(|r| rotation::Slot {
            name: r.name.clone(),
            fingerprint: r.content.as_ref().map(|c| fingerprint(&key, &r.name, c)),
            problem: r.urls.as_ref().err().map(problem),
        })
        .collect();
    let baselines = baselines(i);
    let spec = &i.policy.spec.proxy;
    let mut input = rotation::Input {
        mode: spec.rotation,
        declared: &spec.active,
        slots: &views,
        previous_active: i.previous.active_credential.as_deref(),
        previous: i.previous.rotation.as_ref(),
        baselines: &baselines,
        gate: Gate::NotRequired,
        workloads: &[],
        pods: i.pods,
    };
    let (target, _) = rotation::target(&input);
    let urls = reads
        .iter()
        .find(|r| r.name == target)
        .and_then(|r| r.urls.clone().ok());
    let own = own_names(i.policy);
    let hash = urls.as_ref().map(|u| {
        let (http, https) = (&u.http_proxy, &u.https_proxy);
        workloads::hash::config_hash(&key, &target, http, https, no_proxy, &own, &own)
    });
    let on_rotation: Vec<rotation::Workload> = mine
        .iter()
        .map(|v| workload(i, v, &own, &target, hash.as_deref()))
        .collect();
    input.workloads = &on_rotation;
    let verify = hash
        .as_deref()
        .and_then(|h| verify::wanted(i, &target, h, domain));
    input.gate = verify::gate(i, verify.as_ref());
    let decision = rotation::decide(&input);
    let withdrawn = withdrawn(i, reads, &on_rotation, &target);
    let credentials = credentials(&views, &decision, &on_rotation);
    Ok(Stage {
        decision,
        urls,
        hash,
        credentials,
        withdrawn,
        verify,
        gate: input.gate,
    })
}

/// The fingerprints last seen. Fingerprints under another key say nothing: without the
/// stored key (a new or recreated managed Secret) they are not compared, so nothing looks
/// changed.
fn baselines(i: &Inputs) -> BTreeMap<String, String> {
    let stored = i
        .secret
        .data
        .as_ref()
        .and_then(|d| d.0.get(HASH_KEY))
        .is_some_and(|k| k.0.len() >= 16);
    i.previous
        .credentials
        .iter()
        .filter(|_| stored)
        .filter_map(|c| Some((c.name.clone(), c.fingerprint.clone()?)))
        .collect()
}

/// One managed workload as the rotation sees it; a write the cache has not shown yet counts
/// as made.
fn workload(
    i: &Inputs,
    v: &WorkloadView,
    own: &str,
    target: &str,
    hash: Option<&str>,
) -> rotation::Workload {
    let written = hash.is_some_and(|h| i.recent.get(&v.id).is_some_and(|m| m.is_hash(h)));
    let current = written || (hash.is_some() && workloads::current_hash(&v.template) == hash);
    rotation::Workload {
        name: v.id.to_string(),
        slot: if written {
            Some(target.to_owned())
        } else {
            workloads::slot_of(&v.template, own)
        },
        current,
        progress: if written {
            Progress::Rolling
        } else {
            progress(v.rollout)
        },
    }
}

/// A slot in use (templates read it, or, when none reads any, the target) whose Secret is
/// gone or no longer granted, and is the one the managed credential came from: a withdrawn
/// authorization, which takes the credential away. (Pointing a slot at another, unavailable
/// Secret is the team's own mistake instead; a rotation's unused target that is missing
/// blocks the rotation.)
fn withdrawn(
    i: &Inputs,
    reads: &[SlotRead],
    on: &[rotation::Workload],
    target: &str,
) -> Option<Blocker> {
    let data = i.secret.data.as_ref();
    let none_used = on.iter().all(|w| w.slot.is_none());
    reads.iter().find_map(|r| {
        let used =
            on.iter().any(|w| w.slot.as_ref() == Some(&r.name)) || (none_used && r.name == target);
        let e = r.urls.as_ref().err().filter(|e| e.withdrawn())?;
        let recorded = data.and_then(|d| d.0.get(&source_key(&r.name)));
        let same = recorded.is_none_or(|s| s.0 == r.source.as_bytes());
        (used && same).then(|| Blocker {
            reason: e.reason(),
            message: e.to_string(),
            withdrawn: true,
        })
    })
}

fn credentials(
    views: &[rotation::Slot],
    d: &Decision,
    on: &[rotation::Workload],
) -> Vec<CredentialSlotStatus> {
    views
        .iter()
        .map(|s| {
            let used = on.iter().any(|w| w.slot.as_ref() == Some(&s.name))
                || (d.keep.contains(&s.name) && s.name != d.target)
                || (s.name == d.target && d.may_write);
            let state = match (&s.problem, used) {
                (_, true) => SlotState::InUse,
                (Some(_), false) => SlotState::Unavailable,
                (None, false) => SlotState::Standby,
            };
            CredentialSlotStatus {
                name: s.name.clone(),
                fingerprint: d.baselines.get(&s.name).cloned(),
                state,
                message: s.problem.as_ref().map(|p| p.message.clone()),
            }
        })
        .collect()
}

/// The managed Secret's key recording the Secret a slot's credential came from.
fn source_key(slot: &str) -> String {
    if slot.is_empty() {
        SOURCE_KEY.to_owned()
    } else {
        workloads::slot_key(slot, "source")
    }
}

fn slot_keys(slot: &str) -> [String; 3] {
    [
        workloads::slot_key(slot, "HTTP_PROXY"),
        workloads::slot_key(slot, "HTTPS_PROXY"),
        source_key(slot),
    ]
}

fn bytes(s: &str) -> ByteString {
    ByteString(s.as_bytes().to_vec())
}

/// The managed Secret's data: the hash key, and the credentials of every slot the decision
/// keeps (a slot that cannot be read now keeps its last good credential); other slots'
/// keys go.
pub(super) fn managed_data(i: &Inputs, s: &Stage, mut data: SecretData) -> SecretData {
    data.0.insert(HASH_KEY.into(), ByteString(hash_key(i)));
    let reads = i.slots.unwrap_or_default();
    let mut names: Vec<String> = reads.iter().map(|r| r.name.clone()).collect();
    names.push(String::new());
    // Slots the spec no longer names (removed or renamed) leave with their credentials.
    let gone: Vec<String> = data
        .0
        .keys()
        .filter_map(|k| k.strip_prefix(workloads::SLOT_PREFIX)?.rsplit_once('.'))
        .map(|(slot, _)| slot.to_owned())
        .filter(|slot| !names.contains(slot))
        .collect();
    names.extend(gone);
    for name in names {
        let keys = slot_keys(&name);
        if !s.decision.keep.contains(&name) {
            for k in &keys {
                data.0.remove(k);
            }
            continue;
        }
        let read = reads.iter().find(|r| r.name == name);
        if let Some((r, Ok(urls))) = read.map(|r| (r, &r.urls)) {
            data.0.insert(keys[0].clone(), bytes(&urls.http_proxy));
            data.0.insert(keys[1].clone(), bytes(&urls.https_proxy));
            data.0.insert(keys[2].clone(), bytes(&r.source));
        }
    }
    data
}

/// Data without any credential: what a withdrawn source leaves.
pub(super) fn stripped(data: &SecretData) -> SecretData {
    let mut out = data.clone();
    let legacy = slot_keys("");
    out.0
        .retain(|k, _| !k.starts_with(workloads::SLOT_PREFIX) && !legacy.contains(k));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_are_keyed_and_per_slot() {
        let a = fingerprint(b"0123456789abcdef", "blue", b"content");
        assert_eq!(a.len(), 32);
        assert_eq!(a, fingerprint(b"0123456789abcdef", "blue", b"content"));
        assert_ne!(a, fingerprint(b"another key 0123", "blue", b"content"));
        assert_ne!(a, fingerprint(b"0123456789abcdef", "green", b"content"));
        assert_ne!(a, fingerprint(b"0123456789abcdef", "blue", b"content2"));
    }
}
