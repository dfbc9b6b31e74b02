//! Test hooks: fault injection and request accounting.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// What an injected fault does to a matching request.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// Answer with this status code (and a `Retry-After` header for 429/503 when given).
    Status {
        code: u16,
        retry_after_seconds: Option<u64>,
    },
    /// Delay the request, then serve it normally.
    Latency(Duration),
    /// Serve a watch, but end its stream after this long.
    DropWatch(Duration),
}

/// Which requests a fault applies to; `None` matches anything.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRule {
    /// get, list, watch, create, update, patch, delete, deletecollection
    pub verb: Option<String>,
    /// Plural resource name, e.g. `configmaps` or `deployments/status`.
    pub resource: Option<String>,
    pub fault: Fault,
    /// Chance of applying to a matching request, 0.0..=1.0.
    pub probability: f64,
    /// How many more times the rule applies (None: unlimited).
    pub remaining: Option<u64>,
}

impl FaultRule {
    pub fn new(verb: Option<&str>, resource: Option<&str>, fault: Fault) -> Self {
        Self {
            verb: verb.map(str::to_string),
            resource: resource.map(str::to_string),
            fault,
            probability: 1.0,
            remaining: None,
        }
    }

    pub fn times(mut self, n: u64) -> Self {
        self.remaining = Some(n);
        self
    }

    pub fn probability(mut self, p: f64) -> Self {
        self.probability = p.clamp(0.0, 1.0);
        self
    }
}

/// Request counts, for measuring write amplification.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestCounts {
    /// (verb, resource) -> count
    pub by_verb_resource: BTreeMap<(String, String), u64>,
    /// fieldManager query parameter of writes -> count
    pub by_field_manager: BTreeMap<String, u64>,
    /// Updates and patches that changed nothing.
    pub noop_writes: u64,
    /// Requests answered with an error status by an injected fault or the outage.
    pub faulted: u64,
    /// fieldManager of writes answered with an error status by an injected fault or the
    /// outage -> count (they are in `by_field_manager` too: that counts what was sent).
    pub refused_by_field_manager: BTreeMap<String, u64>,
    /// (verb, resource) -> requests answered with an error status, for any reason (a
    /// conflict, a failed precondition, an injected fault); they are in `by_verb_resource`
    /// too.
    pub refused: BTreeMap<(String, String), u64>,
}

impl RequestCounts {
    pub fn get(&self, verb: &str, resource: &str) -> u64 {
        self.by_verb_resource
            .get(&(verb.to_string(), resource.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// Requests of `verb` on `resource` the server answered with success.
    pub fn succeeded(&self, verb: &str, resource: &str) -> u64 {
        let refused = self
            .refused
            .get(&(verb.to_string(), resource.to_string()))
            .copied()
            .unwrap_or(0);
        self.get(verb, resource) - refused
    }

    /// All write requests (create, update, patch, delete, deletecollection).
    pub fn writes(&self) -> u64 {
        self.by_verb_resource
            .iter()
            .filter(|((v, _), _)| {
                matches!(
                    v.as_str(),
                    "create" | "update" | "patch" | "delete" | "deletecollection"
                )
            })
            .map(|(_, n)| n)
            .sum()
    }
}

#[derive(Debug, Default)]
pub struct Hooks {
    pub rules: Vec<FaultRule>,
    pub down_until: Option<Instant>,
    pub counts: RequestCounts,
}

/// A uniform number in 0..1 from the 53 lowest bits of a v4 UUID (all random; the
/// variant bits sit above them, so a shift would keep the result at 0.5 or more).
fn random_unit() -> f64 {
    let b = uuid::Uuid::new_v4().as_u128() as u64;
    (b & ((1u64 << 53) - 1)) as f64 / (1u64 << 53) as f64
}

impl Hooks {
    /// Record a request and pick the faults that apply to it.
    pub fn on_request(
        &mut self,
        verb: &str,
        resource: &str,
        field_manager: Option<&str>,
    ) -> Vec<Fault> {
        *self
            .counts
            .by_verb_resource
            .entry((verb.into(), resource.into()))
            .or_default() += 1;
        let manager = field_manager.filter(|m| !m.is_empty());
        if let Some(m) = manager {
            *self.counts.by_field_manager.entry(m.into()).or_default() += 1;
        }
        let faults = self.pick(verb, resource);
        if faults.iter().any(|f| matches!(f, Fault::Status { .. })) {
            self.counts.faulted += 1;
            if let Some(m) = manager {
                *self
                    .counts
                    .refused_by_field_manager
                    .entry(m.into())
                    .or_default() += 1;
            }
        }
        faults
    }

    /// Record that a request counted by [`Hooks::on_request`] was answered with an error.
    pub fn on_refused(&mut self, verb: &str, resource: &str) {
        *self
            .counts
            .refused
            .entry((verb.into(), resource.into()))
            .or_default() += 1;
    }

    fn pick(&mut self, verb: &str, resource: &str) -> Vec<Fault> {
        if self.down_until.is_some_and(|t| Instant::now() < t) {
            return vec![Fault::Status {
                code: 503,
                retry_after_seconds: Some(1),
            }];
        }
        let mut out = Vec::new();
        for rule in &mut self.rules {
            let matches = rule.verb.as_deref().is_none_or(|v| v == verb)
                && rule.resource.as_deref().is_none_or(|r| r == resource)
                && rule.remaining != Some(0);
            if matches && (rule.probability >= 1.0 || random_unit() < rule.probability) {
                if let Some(n) = rule.remaining.as_mut() {
                    *n -= 1;
                }
                out.push(rule.fault.clone());
            }
        }
        out
    }
}

/// The reason a status code is reported with.
pub fn reason(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        410 => "Expired",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    /// A fault with a low probability fires at about that rate.
    #[test]
    fn random_unit_is_uniform() {
        let n = 20_000;
        let below = |p: f64| (0..n).filter(|_| super::random_unit() < p).count() as f64 / n as f64;
        for p in [0.02, 0.25, 0.5, 0.9] {
            let rate = below(p);
            assert!((rate - p).abs() < 0.02, "p {p}: {rate}");
        }
    }
}
