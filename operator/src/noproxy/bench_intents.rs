//! The intent sets of `benches/noproxy.rs`, shared with the golden-output test so both
//! measure and check the same thing. Not part of the API.

/// Deterministic pseudo-random numbers (no extra dependency).
pub struct Lcg(pub u64);

impl Lcg {
    /// The next number.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
}

/// `n` node addresses spread over a /16 (a VPC subnet), not one contiguous block.
pub fn node_ips(n: usize, rng: &mut Lcg) -> Vec<String> {
    (0..n)
        .map(|_| {
            let x = rng.next();
            format!("10.0.{}.{}", (x >> 8) & 0xff, x & 0xff)
        })
        .collect()
}

/// The bench's 10,000 mixed entries: 5,000 node IPs, 3,000 hosts, 1,500 domains, 400 IPv4
/// and 100 IPv6 CIDRs (`Lcg(42)`).
pub fn mixed_entries() -> Vec<String> {
    let mut v = node_ips(5_000, &mut Lcg(42));
    v.extend((0..3_000).map(|i| format!("host-{i}.svc-{}.corp.example", i % 97)));
    v.extend((0..1_500).map(|i| format!(".team-{i}.apps.example")));
    v.extend((0..400).map(|i| format!("172.{}.{}.0/24", 16 + i % 16, i / 16)));
    v.extend((0..100).map(|i| format!("fd00:{i:x}::/64")));
    v
}

/// The bench's 5,000-node cluster: node IPs (`Lcg(7)`) and the usual cluster entries.
pub fn cluster_entries() -> Vec<String> {
    let mut v = node_ips(5_000, &mut Lcg(7));
    v.extend(
        [
            "10.96.0.1",
            "10.96.0.0/12",
            "10.244.0.0/16",
            ".svc",
            ".cluster.local",
            "169.254.169.254",
            "metadata.google.internal",
            "localhost",
            "127.0.0.1",
            ".corp.example",
        ]
        .map(str::to_owned),
    );
    v
}
