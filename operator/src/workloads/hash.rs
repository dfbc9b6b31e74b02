//! The config hash: the pod-template annotation that changes exactly when the effective
//! proxy configuration changes.
//!
//! It is an HMAC-SHA256 under a random per-policy key kept in the managed Secret, so the
//! annotation (readable by anyone who can read the workload) does not let anyone test
//! password guesses against it.

use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

use crate::credentials::hex;

/// Domain separation: a hash of this scheme never equals a hash of another.
const DOMAIN: &str = "egressproxy.io/config-hash/v2";

/// A new random hash key (32 bytes).
pub fn new_key() -> Result<Vec<u8>, ring::error::Unspecified> {
    let mut key = vec![0u8; 32];
    SystemRandom::new().fill(&mut key)?;
    Ok(key)
}

/// `v2-` and 32 hex characters (the first 16 bytes of an HMAC-SHA256 under `key`) over the
/// length-prefixed inputs, so no two different input tuples share an encoding. The slot is an
/// input: switching slots is a change of configuration even when the content is the same.
pub fn config_hash(
    key: &[u8],
    slot: &str,
    http_proxy: &str,
    https_proxy: &str,
    no_proxy: &str,
    secret_name: &str,
    config_map_name: &str,
) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, key);
    let mut ctx = hmac::Context::with_key(&key);
    for field in [
        DOMAIN,
        slot,
        http_proxy,
        https_proxy,
        no_proxy,
        secret_name,
        config_map_name,
    ] {
        ctx.update(&(field.len() as u64).to_be_bytes());
        ctx.update(field.as_bytes());
    }
    let tag = ctx.sign();
    format!("v2-{}", hex(&tag.as_ref()[..16]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";
    const IN: [&str; 6] = [
        "blue",
        "http://u:Pw5ecret@proxy:3128",
        "http://u:Pw5ecret@proxy:3128",
        ".svc,10.0.0.0/8",
        "egress-proxy-corp",
        "egress-proxy-corp",
    ];

    fn h(key: &[u8], i: [&str; 6]) -> String {
        config_hash(key, i[0], i[1], i[2], i[3], i[4], i[5])
    }

    #[test]
    fn format_and_stability() {
        let a = h(KEY, IN);
        assert_eq!(a, h(KEY, IN));
        assert_eq!(a.len(), 3 + 32);
        assert!(a.starts_with("v2-"));
        assert!(
            a[3..]
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert!(!a.contains("Pw5ecret"));
    }

    #[test]
    fn every_input_and_the_key_matter() {
        let base = h(KEY, IN);
        for i in 0..6 {
            let mut changed = IN;
            let longer = format!("{}x", IN[i]);
            changed[i] = &longer;
            assert_ne!(h(KEY, changed), base, "input {i}");
        }
        assert_ne!(h(b"another key", IN), base);
    }

    #[test]
    fn encoding_is_unambiguous() {
        // Moving a character from one field to the next must change the hash.
        let a = config_hash(KEY, "s", "ab", "c", "", "s", "c");
        let b = config_hash(KEY, "s", "a", "bc", "", "s", "c");
        assert_ne!(a, b);
        let c = config_hash(KEY, "", "", "", "x", "", "");
        let d = config_hash(KEY, "", "", "", "", "x", "");
        assert_ne!(c, d);
    }

    #[test]
    fn random_keys() {
        let (a, b) = (new_key().unwrap(), new_key().unwrap());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}
