//! The trust stage in the plan: sources to bundle, ConfigMap, workloads and status.

use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::api::reasons::TRUST_EXPIRING;
use crate::trust::{Certificate, RootSet, TrustError};

const SHOWN: &str = "ConfigMap team-a/corp-ca key ca.crt";

/// A CA certificate named `cn`, valid from 2026-01-01 to `until` (y, m, d), checked as the
/// executor checks a source at the world's time.
fn ca(cn: &str, until: (i32, u8, u8)) -> Certificate {
    let pem = crate::trust::testing::ca_pem(cn, (2026, 1, 1), until);
    let at = Timestamp::from_second(1_800_000_000).expect("time");
    crate::trust::parse_source(SHOWN, pem.as_bytes(), at)
        .expect("a valid CA")
        .remove(0)
}

fn trusting(spec: Value, certs: Vec<Certificate>) -> World {
    let mut trust =
        json!({"trust": {"sources": [{"configMap": {"name": "corp-ca", "key": "ca.crt"}}]}});
    merge(&mut trust, spec);
    let mut w = World::new(trust, vec![proxied("api"), proxied("web")]);
    w.trust = Some(vec![SourceRead {
        shown: SHOWN.into(),
        certs: Ok(certs),
    }]);
    w.root_set = RootSet {
        name: "test roots".into(),
        certs: vec![ca("Public Root", (2035, 1, 1))],
    };
    w
}

fn config_map(w: &World) -> ConfigMapData {
    w.config_map.data.clone().expect("the managed ConfigMap")
}

fn status(w: &World) -> crate::api::TrustStatus {
    w.previous.trust.clone().expect("status.trust")
}

fn condition(w: &World, type_: &str) -> (String, String) {
    let c = w.previous.conditions.iter().find(|c| c.type_ == type_);
    let c = c.expect("condition");
    (c.status.clone(), c.reason.clone())
}

fn settle_all(w: &mut World) {
    for _ in 0..4 {
        w.settle();
    }
}

#[test]
fn a_policy_with_trust_writes_the_bundle_and_mounts_it_in_every_workload() {
    let corp = ca("Corp Proxy CA", (2030, 1, 1));
    let mut w = trusting(json!({}), vec![corp.clone()]);
    let first = w.plan();
    let Change::Create(cm) = &first.config_map else {
        panic!("{:?}", first.config_map)
    };
    let keys: Vec<&str> = cm.data.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "CURL_CA_BUNDLE",
            "NODE_EXTRA_CA_CERTS",
            "NO_PROXY",
            "REQUESTS_CA_BUNDLE",
            "SSL_CERT_FILE",
            "WGETRC",
            "ca-bundle.crt",
            "wgetrc"
        ]
    );
    assert_eq!(
        cm.data["SSL_CERT_FILE"],
        "/etc/egress-proxy/trust/ca-bundle.crt"
    );
    assert!(cm.binary.is_empty(), "portable: no truststore");
    let blocks = cm.data["ca-bundle.crt"]
        .matches("BEGIN CERTIFICATE")
        .count();
    assert_eq!(blocks, 2, "the CA, then the root set");
    settle_all(&mut w);
    assert!(w.plan().writes.is_empty());
    for v in &w.workloads {
        let spec = v.template.spec.as_ref().expect("spec");
        let volume = &spec.volumes.as_ref().expect("volumes")[0];
        assert_eq!(
            volume.config_map.as_ref().map(|c| c.name.as_str()),
            Some(OWN)
        );
        let mounts = spec.containers[0].volume_mounts.as_ref().expect("mount");
        assert_eq!(mounts[0].mount_path, "/etc/egress-proxy/trust");
        assert!(env_names(v, "app").contains(&"SSL_CERT_FILE".to_owned()));
    }
    let s = status(&w);
    assert_eq!((s.roots.as_str(), s.root_count), ("Keep", Some(1)));
    assert_eq!(s.root_set.as_deref(), Some("test roots"));
    assert_eq!(s.certificates.len(), 1);
    assert_eq!(s.certificates[0].subject, "CN=Corp Proxy CA");
    assert_eq!(s.certificates[0].sha256, corp.sha256);
    assert_eq!(s.certificates[0].source, SHOWN);
    assert_eq!((s.up_to_date, s.pending.len()), (2, 0));
    let bundle = config_map(&w).data["ca-bundle.crt"].clone();
    let digest = ring::digest::digest(&ring::digest::SHA256, bundle.as_bytes());
    assert_eq!(s.bundle, crate::credentials::hex(digest.as_ref())[..16]);
    assert_eq!(
        condition(&w, TRUST_EXPIRING),
        ("False".into(), reason::CERTIFICATES_VALID.into())
    );
    assert_eq!(
        condition(&w, "Ready"),
        ("True".into(), reason::RECONCILED.into())
    );
}

#[test]
fn a_ca_rotation_rolls_each_workload_once_per_step_and_ends_on_the_new_bundle() {
    let (old, new) = (
        ca("Corp CA 2026", (2030, 1, 1)),
        ca("Corp CA 2027", (2031, 1, 1)),
    );
    let mut w = trusting(json!({}), vec![old.clone()]);
    settle_all(&mut w);
    let hashes = |w: &World| w.workloads.iter().map(hash_of).collect::<Vec<_>>();
    let before = hashes(&w);
    for step in [vec![old.clone(), new.clone()], vec![new.clone()]] {
        w.trust = Some(vec![SourceRead {
            shown: SHOWN.into(),
            certs: Ok(step.clone()),
        }]);
        let p = w.plan();
        assert_eq!(ids(&p), ["Deployment/api", "Deployment/web"], "each once");
        let Change::Apply(cm) = &p.config_map else {
            panic!("the bundle changes: {:?}", p.config_map)
        };
        let pem = &cm.data["ca-bundle.crt"];
        assert_eq!(pem.matches("BEGIN CERTIFICATE").count(), step.len() + 1);
        settle_all(&mut w);
        assert!(w.plan().writes.is_empty());
        let s = status(&w);
        let listed: Vec<&str> = s.certificates.iter().map(|c| c.sha256.as_str()).collect();
        let want: Vec<&str> = step.iter().map(|c| c.sha256.as_str()).collect();
        assert_eq!(listed, want);
        assert_eq!((s.up_to_date, s.pending.len()), (2, 0));
        let bundles: Vec<_> = w
            .workloads
            .iter()
            .map(|v| workloads::trust_bundle(&v.template))
            .collect();
        assert_eq!(bundles, [Some(s.bundle.as_str()); 2]);
    }
    assert_ne!(hashes(&w), before);
}

#[test]
fn a_source_that_cannot_be_used_blocks_and_keeps_what_runs() {
    let mut w = trusting(json!({}), vec![ca("Corp CA", (2030, 1, 1))]);
    settle_all(&mut w);
    let running: Vec<_> = w.workloads.iter().map(|v| v.template.clone()).collect();
    let key = TrustError::PrivateKey {
        label: SHOWN.into(),
        index: 2,
    };
    w.trust = Some(vec![SourceRead {
        shown: SHOWN.into(),
        certs: Err(key.into()),
    }]);
    assert_blocked(&w, reason::TRUST_INVALID, "block 2 is a private key");
    w.trust = Some(vec![SourceRead {
        shown: SHOWN.into(),
        certs: Err(SourceProblem::NotAvailable {
            shown: SHOWN.into(),
            namespace: NS.into(),
        }),
    }]);
    assert_blocked(
        &w,
        reason::TRUST_SOURCE_NOT_AVAILABLE,
        "ConfigMap team-a/corp-ca key ca.crt is not available",
    );
    let now: Vec<_> = w.workloads.iter().map(|v| v.template.clone()).collect();
    assert_eq!(now, running);
}

#[test]
fn replace_is_refused_where_a_client_only_adds() {
    let corp = ca("Corp CA", (2030, 1, 1));
    let w = trusting(
        json!({"trust": {"roots": "Replace"}, "noProxy": {"dialect": "node-undici"}}),
        vec![corp.clone()],
    );
    assert_blocked(&w, reason::TRUST_INVALID, "node");
    let mut w = trusting(
        json!({"trust": {"roots": "Replace"}, "noProxy": {"dialect": "go"}}),
        vec![corp],
    );
    settle_all(&mut w);
    let cm = config_map(&w);
    assert_eq!(
        cm.data["ca-bundle.crt"]
            .matches("BEGIN CERTIFICATE")
            .count(),
        1,
        "no roots"
    );
    assert_eq!(cm.data["SSL_CERT_DIR"], "/etc/egress-proxy/trust");
    assert_eq!(status(&w).root_count, None);
}

#[test]
fn an_expiring_certificate_is_a_condition_and_one_warning() {
    // The world's clock is 2027-01-15: this CA ends within the 30 days.
    let mut w = trusting(json!({}), vec![ca("Corp CA", (2027, 2, 1))]);
    let mut warnings = Vec::new();
    for _ in 0..4 {
        let p = w.plan();
        let r = p.report(&[], &now());
        warnings.extend(
            r.events
                .iter()
                .filter(|e| e.warning)
                .map(|e| e.reason.clone()),
        );
        w.settle();
    }
    assert_eq!(warnings, [reason::CERTIFICATE_EXPIRING]);
    assert_eq!(
        condition(&w, TRUST_EXPIRING),
        ("True".into(), reason::CERTIFICATE_EXPIRING.into())
    );
    let c = w
        .previous
        .conditions
        .iter()
        .find(|c| c.type_ == TRUST_EXPIRING)
        .expect("c");
    assert!(
        c.message.contains("CN=Corp CA expires at 2027-02-01"),
        "{}",
        c.message
    );
    // Ready all the same: nothing is broken yet.
    assert_eq!(condition(&w, "Ready").0, "True");
}

#[test]
fn java_gets_a_truststore_and_its_options() {
    let mut w = trusting(
        json!({"noProxy": {"dialect": "java"}}),
        vec![ca("Corp CA", (2030, 1, 1))],
    );
    settle_all(&mut w);
    let cm = config_map(&w);
    assert!(cm.binary.contains_key("truststore.p12"));
    let java = w.previous.java_options.clone().expect("java options");
    assert!(
        java.ends_with("-Djavax.net.ssl.trustStore=/etc/egress-proxy/trust/truststore.p12 -Djavax.net.ssl.trustStoreType=PKCS12"),
        "{java}"
    );
    let spec = w.workloads[0].template.spec.clone().expect("spec");
    let items = spec.volumes.expect("volumes")[0]
        .config_map
        .clone()
        .expect("cm")
        .items
        .expect("items");
    let keys: Vec<&str> = items.iter().map(|i| i.key.as_str()).collect();
    assert_eq!(keys, ["ca-bundle.crt", "truststore.p12", "wgetrc"]);
}

#[test]
fn trust_taken_out_of_the_spec_leaves_the_workloads_and_the_config_map() {
    let mut w = trusting(json!({}), vec![ca("Corp CA", (2030, 1, 1))]);
    settle_all(&mut w);
    w.policy.spec.trust = None;
    w.trust = None;
    let p = w.plan();
    assert_eq!(ids(&p), ["Deployment/api", "Deployment/web"]);
    assert!(p.writes.iter().all(|x| matches!(x.write, Write::Patch(_))));
    let Change::Apply(cm) = &p.config_map else {
        panic!("{:?}", p.config_map)
    };
    let keys: Vec<&str> = cm.data.keys().map(String::as_str).collect();
    assert_eq!(keys, ["NO_PROXY"]);
    settle_all(&mut w);
    assert!(w.plan().writes.is_empty());
    for v in &w.workloads {
        let spec = v.template.spec.as_ref().expect("spec");
        assert!(spec.volumes.iter().flatten().next().is_none());
        assert!(
            spec.containers[0]
                .volume_mounts
                .iter()
                .flatten()
                .next()
                .is_none()
        );
        assert_eq!(env_names(v, "app").len(), 7, "LOG and the six");
        assert_eq!(workloads::trust_bundle(&v.template), None);
    }
    assert_eq!(w.previous.trust, None);
    assert!(
        !w.previous
            .conditions
            .iter()
            .any(|c| c.type_ == TRUST_EXPIRING)
    );
}

#[test]
fn the_cached_digests_of_the_bundle_and_truststore_are_enough_to_write_nothing() {
    let mut w = trusting(
        json!({"noProxy": {"dialect": "java"}}),
        vec![ca("Corp CA", (2030, 1, 1))],
    );
    settle_all(&mut w);
    let full = config_map(&w);
    let digested = full.digested();
    assert!(digested.data["ca-bundle.crt"].starts_with("sha256:"));
    assert!(digested.binary["truststore.p12"].0.starts_with(b"sha256:"));
    assert_eq!(digested.data["NO_PROXY"], full.data["NO_PROXY"]);
    assert_eq!(digested.digested(), digested, "a digest stays a digest");
    w.config_map.data = Some(digested);
    let p = w.plan();
    assert_eq!(p.config_map, Change::Keep);
    assert!(p.writes.is_empty());
    // Another CA: the digest differs, the full bundle is written.
    w.trust = Some(vec![SourceRead {
        shown: SHOWN.into(),
        certs: Ok(vec![ca("Corp CA 2", (2030, 1, 1))]),
    }]);
    let Change::Apply(cm) = w.plan().config_map else {
        panic!("the new bundle is written")
    };
    assert!(cm.data["ca-bundle.crt"].starts_with("-----BEGIN CERTIFICATE-----"));
}

#[test]
fn a_bundle_too_large_for_admission_blocks() {
    let corp = ca("Corp CA", (2030, 1, 1));
    let mut w = trusting(json!({}), vec![corp]);
    let many: Vec<Certificate> = (0..900)
        .map(|n| ca(&format!("Root {n}"), (2035, 1, 1)))
        .collect();
    w.root_set = RootSet {
        name: "huge".into(),
        certs: many,
    };
    assert_blocked(&w, reason::TRUST_INVALID, "more than 409600");
}

#[test]
fn the_probe_job_carries_the_cas_under_test_not_the_managed_config_map() {
    let corp = ca("Corp CA", (2030, 1, 1));
    let spec = json!({"trust": {"roots": "Replace"}, "noProxy": {"dialect": "go"},
        "verification": {"endpoints": [{"url": "https://status.example.com/", "expect": "Proxied"}]}});
    let mut w = trusting(spec, vec![corp.clone()]);
    w.probe = Some(verify::ProbeRun::Missing);
    let job = w.plan().create_probe.expect("the probe Job");
    let pod = job.spec.expect("spec").template.spec.expect("pod");
    assert!(pod.volumes.is_none(), "the probe mounts nothing");
    let env = pod.containers[0].env.clone().expect("env");
    let value = |n: &str| {
        env.iter()
            .find(|e| e.name == n)
            .and_then(|e| e.value.clone())
    };
    let pem = value(verify::TRUST_ENV).expect("the CAs under test");
    let parsed = crate::trust::parse_source(
        "probe",
        pem.as_bytes(),
        Timestamp::from_second(1_800_000_000).expect("t"),
    );
    assert_eq!(
        parsed
            .expect("PEM")
            .iter()
            .map(|c| &c.sha256)
            .collect::<Vec<_>>(),
        [&corp.sha256]
    );
    assert_eq!(value(verify::TRUST_ROOTS_ENV).as_deref(), Some("replace"));
    assert!(env.iter().all(|e| e.name != "SSL_CERT_FILE"));
}
