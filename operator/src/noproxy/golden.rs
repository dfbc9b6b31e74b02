//! Golden outputs: every dialect's render of the bench's intent sets (and of a set of names
//! with the properties the client models look at) must stay byte for byte what it was
//! before render memoized its model checks. `golden.txt` holds, per set, dialect and widen
//! choice, the value's length and the SHA-256 of the value and of the whole result as JSON
//! (value, uncovered, warnings). It was written once, by the render of commit f64c59d (before
//! the memo), from these same [`lines`]; no test rewrites it. A new dialect adds
//! its lines and changes `portable`'s `full=` hashes: rewrite it then, and review the change.

use ring::digest::{SHA256, digest};

use super::bench_intents::{cluster_entries, mixed_entries};
use super::{Dialect, IntentSet, Widen, render_with};

/// Names with every property a model checks: `localhost`, single labels, IP-like and
/// hex-like labels, `xn--`, `_`, long labels, ports (default ones too), all three scopes.
pub(super) const EDGE: &[&str] = &[
    "localhost",
    "localhost:8080",
    ".localhost",
    "*.localhost",
    "sub.localhost",
    "localhost.example",
    "xlocalhost",
    "a",
    ".b",
    "*.c",
    "d:443",
    "e:80",
    "xn--bcher-kva.example",
    ".xn--p1ai",
    "*.xn--80ak6aa92e.com",
    "xn--zz.example",
    "xn--a.example",
    "a.xn--b",
    "1a.example",
    "123.example.com",
    "host.123",
    ".svc.1",
    "a.0x7f",
    "0x7f.example",
    "a.0xg",
    "a.1.2.3",
    "1.2.3.example",
    "_svc._tcp.example",
    "under_score.example:8443",
    "*.apps.example:443",
    ".corp.example:8443",
    "r.example:5000",
    "r.example:65535",
    "r.example:1",
    "*.wild.example",
    ".wild.example",
    "wild.example",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example",
    "a-b.c-d.example",
    "x.y.z.w.v.u.example",
    "10.1.2.3:8080",
    "[fd00::5]:443",
    "fd00::6",
    "192.168.0.0/16",
    "192.168.1.1",
    "fd00:1::/32",
    "127.0.0.1",
    "::1",
];

/// The lines of `golden.txt` for the current code.
pub(super) fn lines() -> Vec<String> {
    let mixed = mixed_entries();
    let cluster = cluster_entries();
    let sets: [(&str, Vec<&str>, &[Widen]); 3] = [
        (
            "mixed",
            mixed.iter().map(String::as_str).collect(),
            &[Widen::Deny],
        ),
        (
            "cluster",
            cluster.iter().map(String::as_str).collect(),
            &[Widen::Deny],
        ),
        ("edge", EDGE.to_vec(), &[Widen::Deny, Widen::Allow]),
    ];
    let mut out = Vec::new();
    for (name, entries, widens) in sets {
        let set = IntentSet::parse(entries).expect("golden entries are valid");
        for &widen in widens {
            for d in Dialect::ALL {
                let r = render_with(d, &set, widen);
                let json = serde_json::to_string(&r).expect("serializes");
                out.push(format!(
                    "{name} {d} {widen:?} len={} value={} full={}",
                    r.value.len(),
                    sha256(&r.value),
                    sha256(&json)
                ));
            }
        }
    }
    out
}

fn sha256(s: &str) -> String {
    digest(&SHA256, s.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn renders_are_byte_identical_to_the_golden_file() {
    let want = include_str!("golden.txt");
    let got = lines();
    let want: Vec<&str> = want.lines().collect();
    assert_eq!(got.len(), want.len(), "line count");
    let diff: Vec<String> = got
        .iter()
        .zip(&want)
        .filter(|(g, w)| g != w)
        .map(|(g, w)| format!("want {w}\n got {g}"))
        .collect();
    assert!(
        diff.is_empty(),
        "{} renders changed:\n{}",
        diff.len(),
        diff.join("\n")
    );
}
