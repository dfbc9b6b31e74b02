//! Tests of the trust module, on certificates generated here (rcgen, ring): exact outputs.

use k8s_openapi::jiff::Timestamp;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, date_time_ymd};

use super::*;
use crate::noproxy::Dialect;

/// The instant every test checks validity at.
fn now() -> Timestamp {
    "2026-06-01T00:00:00Z".parse().unwrap()
}

/// A self-signed certificate (PEM, DER) named `cn`, valid between the two years' Jan 1st.
fn cert(cn: &str, ca: IsCa, from: i32, to: i32) -> (String, Vec<u8>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(DnType::OrganizationName, "Corp");
    params.distinguished_name.push(DnType::CommonName, cn);
    params.is_ca = ca;
    params.not_before = date_time_ymd(from, 1, 1);
    params.not_after = date_time_ymd(to, 1, 1);
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), cert.der().to_vec())
}

fn ca(cn: &str) -> (String, Vec<u8>) {
    cert(cn, IsCa::Ca(BasicConstraints::Unconstrained), 2025, 2030)
}

fn parse(pem: &str) -> Result<Vec<Certificate>, TrustError> {
    parse_source("configMap ns/corp key ca.crt", pem.as_bytes(), now())
}

fn one(pem: &str) -> Certificate {
    parse(pem).unwrap().remove(0)
}

fn sha256(der: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, der);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A root set of two fresh CAs (the shipped one is large; its own tests are below).
fn small_root_set() -> RootSet {
    let pem = format!("{}{}", ca("Root A").0, ca("Root B").0);
    RootSet::from_pem("test roots", pem.as_bytes()).unwrap()
}

#[test]
fn a_source_gives_each_certificate_in_order() {
    let (a, a_der) = ca("Corp Root CA");
    let (b, b_der) = ca("Corp Issuing CA");
    let pem = format!("# Corp Root CA\n{a}\nsome comment\n{b}");
    let certs = parse(&pem).unwrap();
    assert_eq!(certs.len(), 2);
    assert_eq!(certs[0].der, a_der);
    assert_eq!(certs[0].subject, "CN=Corp Root CA, O=Corp");
    assert_eq!(certs[0].sha256, sha256(&a_der));
    assert_eq!(certs[0].not_before, "2025-01-01T00:00:00Z".parse().unwrap());
    assert_eq!(certs[0].not_after, "2030-01-01T00:00:00Z".parse().unwrap());
    assert_eq!(certs[1].subject, "CN=Corp Issuing CA, O=Corp");
    assert_eq!(certs[1].sha256, sha256(&b_der));
    // CRLF line endings too.
    assert_eq!(parse(&a.replace('\n', "\r\n")).unwrap()[0].der, a_der);
}

#[test]
fn not_pem_malformed_and_no_certificate_are_errors_naming_the_source() {
    let err = parse("just some text\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "configMap ns/corp key ca.crt: not PEM (no -----BEGIN block)"
    );
    let err = parse("-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "configMap ns/corp key ca.crt: malformed PEM (a block's framing or base64 is broken)"
    );
    let truncated = ca("Corp").0.replace("-----END CERTIFICATE-----", "");
    assert!(matches!(
        parse(&truncated),
        Err(TrustError::MalformedPem { .. })
    ));
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["a.example".to_owned()]).unwrap();
    params.is_ca = IsCa::NoCa;
    let csr = params.serialize_request(&key).unwrap().pem().unwrap();
    let err = parse(&csr).unwrap_err();
    assert_eq!(
        err.to_string(),
        "configMap ns/corp key ca.crt: no CERTIFICATE block"
    );
    // A certificate and a CSR: the CSR is an error, not skipped.
    let err = parse(&format!("{}{csr}", ca("Corp").0)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "configMap ns/corp key ca.crt: block 2 is a certificate request (CSR), not a CERTIFICATE"
    );
    let odd = format!(
        "{}-----BEGIN MY SECRET LABEL-----\nAAAA\n-----END MY SECRET LABEL-----\n",
        ca("Corp").0
    );
    let err = parse(&odd).unwrap_err().to_string();
    assert!(
        err.ends_with("block 2 is a block of another type, not a CERTIFICATE"),
        "{err}"
    );
    assert!(!err.contains("SECRET"), "{err}");
}

/// Every 12-character window of `secret` (whitespace removed) is absent from `text`.
fn assert_no_piece(text: &str, secret: &str) {
    let secret: Vec<char> = secret.chars().filter(|c| !c.is_whitespace()).collect();
    for w in secret.windows(12) {
        let piece: String = w.iter().collect();
        assert!(!text.contains(&piece), "{piece:?} appears in {text:?}");
    }
}

#[test]
fn a_private_key_of_any_kind_is_refused_without_its_bytes() {
    let key = KeyPair::generate().unwrap();
    let key_pem = key.serialize_pem();
    let body: String = key_pem
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    let (corp, _) = ca("Corp");
    for label in [
        "PRIVATE KEY",
        "RSA PRIVATE KEY",
        "EC PRIVATE KEY",
        "ENCRYPTED PRIVATE KEY",
    ] {
        let block = key_pem.replace("PRIVATE KEY", label);
        for (pem, index) in [(block.clone(), 1), (format!("{corp}{block}"), 2)] {
            let err = parse(&pem).unwrap_err();
            assert_eq!(
                err,
                TrustError::PrivateKey {
                    label: "configMap ns/corp key ca.crt".to_owned(),
                    index
                }
            );
            assert_no_piece(&err.to_string(), &body);
            assert_no_piece(&format!("{err:?}"), &body);
        }
    }
    // Found before anything is parsed: a broken key block, after a broken certificate.
    let broken = format!(
        "-----BEGIN CERTIFICATE-----\n!!\n{}",
        &key_pem[..key_pem.len() / 2]
    );
    let err = parse(&broken).unwrap_err();
    assert!(
        matches!(err, TrustError::PrivateKey { index: 2, .. }),
        "{err:?}"
    );
    assert_no_piece(&format!("{err} {err:?}"), &body);
    assert_eq!(
        err.to_string(),
        "configMap ns/corp key ca.crt: block 2 is a private key; a trust source must hold CA \
         certificates only (remove the key, and treat it as disclosed)"
    );
}

#[test]
fn a_certificate_that_does_not_parse_is_an_error() {
    let junk = pem::encode(&pem::Pem::new("CERTIFICATE", b"not a certificate".to_vec()));
    let (corp, der) = ca("Corp");
    let err = parse(&format!("{corp}{junk}")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "configMap ns/corp key ca.crt: certificate 2 does not parse as X.509"
    );
    // Trailing bytes after the certificate.
    let mut long = der.clone();
    long.push(0);
    let trailing = pem::encode(&pem::Pem::new("CERTIFICATE", long));
    assert!(matches!(
        parse(&trailing),
        Err(TrustError::BadCertificate { index: 1, .. })
    ));
}

#[test]
fn a_certificate_that_is_not_a_ca_is_an_error() {
    for ca_flag in [IsCa::NoCa, IsCa::ExplicitNoCa] {
        let (leaf, _) = cert("leaf.example", ca_flag, 2025, 2030);
        let err = parse(&format!("{}{leaf}", ca("Corp").0)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "configMap ns/corp key ca.crt: certificate 2 (CN=leaf.example, O=Corp) is not a CA \
             certificate (basicConstraints CA:TRUE missing)"
        );
    }
}

#[test]
fn expired_and_not_yet_valid_certificates_are_errors() {
    let unconstrained = || IsCa::Ca(BasicConstraints::Unconstrained);
    let (old, _) = cert("Old CA", unconstrained(), 2020, 2026);
    assert_eq!(
        parse(&old).unwrap_err().to_string(),
        "configMap ns/corp key ca.crt: certificate 1 (CN=Old CA, O=Corp) expired at \
         2026-01-01T00:00:00Z"
    );
    let (future, _) = cert("Future CA", unconstrained(), 2027, 2030);
    assert_eq!(
        parse(&future).unwrap_err().to_string(),
        "configMap ns/corp key ca.crt: certificate 1 (CN=Future CA, O=Corp) is not valid \
         before 2027-01-01T00:00:00Z"
    );
}

#[test]
fn expiring_lists_the_certificates_within_the_days() {
    let at = |s: &str| s.parse::<Timestamp>().unwrap();
    let mut soon = one(&ca("Soon").0);
    soon.not_after = at("2026-06-11T00:00:00Z");
    let mut edge = one(&ca("Edge").0);
    edge.not_after = at("2026-07-01T00:00:00Z");
    let later = one(&ca("Later").0);
    let certs = vec![soon.clone(), later, edge.clone()];
    assert_eq!(expiring(&certs, now(), 30), vec![&soon, &edge]);
    assert_eq!(expiring(&certs, now(), 9), Vec::<&Certificate>::new());
    // Exactly `days` ahead is within.
    assert_eq!(expiring(&certs, now(), 10), vec![&soon]);
}

#[test]
fn the_shipped_root_set_is_webpki_root_certs_whole() {
    let set = RootSet::shipped();
    assert_eq!(set.name, "webpki-root-certs 1.0.11 (Mozilla)");
    assert_eq!(
        set.certs.len(),
        webpki_root_certs::TLS_SERVER_ROOT_CERTS.len()
    );
    assert!(set.certs.len() > 100, "{}", set.certs.len());
    for (cert, der) in set
        .certs
        .iter()
        .zip(webpki_root_certs::TLS_SERVER_ROOT_CERTS)
    {
        assert_eq!(cert.der, der.as_ref());
    }
}

#[test]
fn the_shipped_roots_version_is_the_one_in_cargo_lock() {
    let lock =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock")).unwrap();
    let entry = "name = \"webpki-root-certs\"\nversion = \"";
    let at = lock.find(entry).expect("webpki-root-certs in Cargo.lock") + entry.len();
    let version = &lock[at..at + lock[at..].find('"').unwrap()];
    assert_eq!(SHIPPED_ROOTS_VERSION, version);
}

#[test]
fn a_root_set_file_may_hold_expired_roots_but_only_cas() {
    let (old, old_der) = cert(
        "Old Root",
        IsCa::Ca(BasicConstraints::Unconstrained),
        2000,
        2001,
    );
    let set = RootSet::from_pem("file roots.pem", old.as_bytes()).unwrap();
    assert_eq!(set.name, "file roots.pem");
    assert_eq!(set.certs.len(), 1);
    assert_eq!(set.certs[0].der, old_der);
    let (leaf, _) = cert("leaf", IsCa::NoCa, 2025, 2030);
    let err = RootSet::from_pem("file roots.pem", leaf.as_bytes()).unwrap_err();
    assert!(matches!(err, TrustError::NotCa { index: 1, .. }), "{err:?}");
    let key = KeyPair::generate().unwrap().serialize_pem();
    let err = RootSet::from_pem("file roots.pem", key.as_bytes()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "file roots.pem: block 1 is a private key; a trust source must hold CA certificates only (remove the key, and treat it as disclosed)"
    );
}

/// A CERTIFICATE block written independently of the module: base64 in 64 columns, LF.
fn block(der: &[u8]) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        lines.join("\n")
    )
}

fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect()
}

const B: &str = "/etc/egress-proxy/trust/ca-bundle.crt";

#[test]
fn keep_writes_the_sources_deduplicated_then_the_root_set() {
    let a = one(&ca("A").0);
    let b = one(&ca("B").0);
    let roots = small_root_set();
    // A source that is also a root is written once, where the sources are.
    let sources = vec![a.clone(), b.clone(), a.clone(), roots.certs[1].clone()];
    let bundle = build(Dialect::Curl, &sources, Roots::Keep, &roots, TRUST_DIR).unwrap();
    let pem = [&a, &b, &roots.certs[1], &roots.certs[0]]
        .iter()
        .map(|c| block(&c.der))
        .collect::<String>();
    assert_eq!(bundle.pem, pem);
    assert_eq!(bundle.id, sha256(pem.as_bytes())[..16]);
    assert_eq!(bundle.root_count, 1);
    assert_eq!(bundle.vars, vars(&[("CURL_CA_BUNDLE", B)]));
    assert_eq!(
        (bundle.truststore, bundle.wgetrc, bundle.java_options),
        (None, None, None)
    );
}

#[test]
fn replace_writes_the_sources_only_and_hides_the_system_directory() {
    let a = one(&ca("A").0);
    let roots = small_root_set();
    let bundle = build(
        Dialect::Go,
        &[a.clone(), a.clone()],
        Roots::Replace,
        &roots,
        "/t/",
    )
    .unwrap();
    assert_eq!(bundle.pem, block(&a.der));
    assert_eq!(bundle.root_count, 0);
    assert_eq!(
        bundle.vars,
        vars(&[
            ("SSL_CERT_FILE", "/t/ca-bundle.crt"),
            ("SSL_CERT_DIR", "/t")
        ])
    );
    let keep = build(Dialect::Go, &[a], Roots::Keep, &roots, "/t").unwrap();
    assert_eq!(keep.vars, vars(&[("SSL_CERT_FILE", "/t/ca-bundle.crt")]));
    assert_eq!(keep.root_count, 2);
}

#[test]
fn each_dialect_gets_its_variables() {
    let a = vec![one(&ca("A").0)];
    let roots = small_root_set();
    let w = "/etc/egress-proxy/trust/wgetrc";
    let ssl = vars(&[("SSL_CERT_FILE", B)]);
    let node = vars(&[("NODE_EXTRA_CA_CERTS", B)]);
    let all = vars(&[
        ("CURL_CA_BUNDLE", B),
        ("NODE_EXTRA_CA_CERTS", B),
        ("REQUESTS_CA_BUNDLE", B),
        ("SSL_CERT_FILE", B),
        ("WGETRC", w),
    ]);
    let expected = [
        (Dialect::Portable, all.clone()),
        (Dialect::Curl, vars(&[("CURL_CA_BUNDLE", B)])),
        (Dialect::Wget, vars(&[("WGETRC", w)])),
        (Dialect::Go, ssl.clone()),
        (Dialect::PythonUrllib, ssl.clone()),
        (Dialect::PythonRequests, vars(&[("REQUESTS_CA_BUNDLE", B)])),
        (Dialect::PythonHttpx, ssl.clone()),
        (Dialect::NodeAxios, node.clone()),
        (Dialect::NodeProxyFromEnv, node.clone()),
        (Dialect::NodeUndici, node),
        (Dialect::Ruby, ssl.clone()),
        (Dialect::RustReqwest, ssl),
        (Dialect::Java, all),
    ];
    assert_eq!(expected.len(), Dialect::ALL.len());
    for (dialect, vars) in expected {
        let bundle = build(dialect, &a, Roots::Keep, &roots, TRUST_DIR).unwrap();
        assert_eq!(bundle.vars, vars, "{dialect:?}");
        let wget = matches!(dialect, Dialect::Wget | Dialect::Portable | Dialect::Java);
        let wgetrc = wget.then(|| format!("ca_certificate = {B}\n"));
        assert_eq!(bundle.wgetrc, wgetrc, "{dialect:?}");
        assert_eq!(bundle.truststore.is_some(), dialect == Dialect::Java);
    }
}

#[test]
fn java_gets_the_truststore_and_its_properties() {
    let sources = vec![one(&ca("A").0), one(&ca("B").0)];
    let roots = small_root_set();
    let bundle = build(Dialect::Java, &sources, Roots::Keep, &roots, TRUST_DIR).unwrap();
    assert_eq!(
        bundle.java_options.as_deref(),
        Some(
            "-Djavax.net.ssl.trustStore=/etc/egress-proxy/trust/truststore.p12 \
             -Djavax.net.ssl.trustStoreType=PKCS12"
        )
    );
    let in_order: Vec<&Certificate> = sources.iter().chain(&roots.certs).collect();
    assert_eq!(bundle.truststore, Some(truststore(in_order)));
}

#[test]
fn replace_is_refused_for_dialects_whose_clients_only_add() {
    let a = vec![one(&ca("A").0)];
    let roots = small_root_set();
    for dialect in Dialect::ALL {
        let result = build(dialect, &a, Roots::Replace, &roots, TRUST_DIR);
        let only_adds = match dialect {
            Dialect::NodeAxios | Dialect::NodeProxyFromEnv | Dialect::NodeUndici => {
                Some("NODE_EXTRA_CA_CERTS")
            }
            Dialect::Curl | Dialect::Portable | Dialect::Java => Some("CURL_CA_BUNDLE"),
            _ => None,
        };
        match only_adds {
            Some(variable) => assert_eq!(
                result.unwrap_err(),
                TrustError::ReplaceUnsupported { dialect, variable },
                "{dialect:?}"
            ),
            None => assert!(result.is_ok(), "{dialect:?}"),
        }
    }
    let err = build(Dialect::NodeUndici, &a, Roots::Replace, &roots, TRUST_DIR).unwrap_err();
    assert_eq!(
        err.to_string(),
        "roots: Replace is not possible with dialect node-undici: its clients read \
         NODE_EXTRA_CA_CERTS, which only adds to their own roots and cannot remove them; use \
         roots: Keep, or a dialect whose clients can drop their roots (wget, go, python-urllib, \
         python-requests, python-httpx, ruby, rust-reqwest)"
    );
    let wget = build(Dialect::Wget, &a, Roots::Replace, &roots, TRUST_DIR).unwrap();
    assert_eq!(
        wget.wgetrc.as_deref(),
        Some(
            "ca_certificate = /etc/egress-proxy/trust/ca-bundle.crt\n\
             ca_directory = /etc/egress-proxy/trust\n"
        )
    );
    let none = build(Dialect::Curl, &[], Roots::Keep, &roots, TRUST_DIR);
    assert_eq!(none.unwrap_err(), TrustError::NoSources);
}

#[test]
fn the_same_input_gives_the_same_bytes() {
    let sources = vec![one(&ca("A").0), one(&ca("B").0)];
    let roots = RootSet::shipped();
    let first = build(Dialect::Java, &sources, Roots::Keep, &roots, TRUST_DIR).unwrap();
    let again = build(
        Dialect::Java,
        &sources.clone(),
        Roots::Keep,
        &RootSet::shipped(),
        TRUST_DIR,
    );
    assert_eq!(first, again.unwrap());
    // Another order is another bundle.
    let swapped = [sources[1].clone(), sources[0].clone()];
    let other = build(Dialect::Java, &swapped, Roots::Keep, &roots, TRUST_DIR).unwrap();
    assert_ne!(first.id, other.id);
    assert_ne!(first.truststore, other.truststore);
}
