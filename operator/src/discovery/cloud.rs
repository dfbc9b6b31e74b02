//! Cloud platform from `Node.spec.providerID`, and the platform's metadata service addresses.

use std::collections::{BTreeMap, BTreeSet};

use super::{Host, NodeInputs, found, parse_host, plural};
use crate::api::Fact;

/// One platform: its providerID schemes and its metadata service addresses and names.
struct Platform {
    name: &'static str,
    schemes: &'static [&'static str],
    metadata: &'static [&'static str],
}

/// Only addresses documented by the platform are listed. Platforms without a metadata
/// service are listed so that their name shows in the status.
const PLATFORMS: &[Platform] = &[
    // IMDS; the IPv6 endpoint serves Nitro instances with it enabled.
    p("aws", &["aws"], &["169.254.169.254", "fd00:ec2::254"]),
    p(
        "gce",
        &["gce"],
        &["169.254.169.254", "metadata.google.internal"],
    ),
    p("azure", &["azure"], &["169.254.169.254"]),
    p("openstack", &["openstack"], &["169.254.169.254"]),
    p("digitalocean", &["digitalocean"], &["169.254.169.254"]),
    p(
        "alibaba",
        &["alicloud", "alibabacloud"],
        &["100.100.100.200"],
    ),
    p("oracle", &["oci"], &["169.254.169.254"]),
    p("hetzner", &["hcloud"], &["169.254.169.254"]),
    // IBM Cloud VPC instance metadata service.
    p(
        "ibm",
        &["ibm"],
        &["169.254.169.254", "api.metadata.cloud.ibm.com"],
    ),
    p("vsphere", &["vsphere"], &[]),
    p("kind", &["kind"], &[]),
    p("k3s", &["k3s"], &[]),
    p("rke2", &["rke2"], &[]),
];

const fn p(
    name: &'static str,
    schemes: &'static [&'static str],
    metadata: &'static [&'static str],
) -> Platform {
    Platform {
        name,
        schemes,
        metadata,
    }
}

/// The platform name of a providerID: a known platform, or the scheme itself (sanitised).
fn platform_of(provider_id: &str) -> Option<String> {
    let id = provider_id.trim();
    if id.starts_with("ocid1.") {
        return Some("oracle".into());
    }
    let (scheme, _) = id.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let known = PLATFORMS
        .iter()
        .find(|p| p.schemes.contains(&scheme.as_str()));
    match known {
        Some(p) => Some(p.name.into()),
        None if !scheme.is_empty()
            && scheme.len() <= 32
            && scheme
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'+') =>
        {
            Some(scheme)
        }
        None => None,
    }
}

fn metadata_of(platform: &str) -> &'static [&'static str] {
    PLATFORMS
        .iter()
        .find(|p| p.name == platform)
        .map_or(&[], |p| p.metadata)
}

/// Votes per platform of the nodes' providerIDs, and how many were not recognised.
fn votes(nodes: &[NodeInputs]) -> (BTreeMap<String, usize>, usize) {
    let mut votes: BTreeMap<String, usize> = BTreeMap::new();
    let mut unrecognised = 0usize;
    for id in nodes.iter().filter_map(|n| n.provider_id.as_deref()) {
        if id.trim().is_empty() {
            continue;
        }
        match platform_of(id) {
            Some(p) => *votes.entry(p).or_default() += 1,
            None => unrecognised += 1,
        }
    }
    (votes, unrecognised)
}

/// The platform most nodes run on. Nodes without a providerID do not vote; ties go to a
/// platform with a metadata service, then to the first name.
fn winner(votes: &BTreeMap<String, usize>) -> Option<&String> {
    let best = votes.iter().max_by(|(a, na), (b, nb)| {
        na.cmp(nb)
            .then_with(|| (!metadata_of(a).is_empty()).cmp(&!metadata_of(b).is_empty()))
            .then_with(|| b.cmp(a))
    });
    best.map(|(p, _)| p)
}

/// The platform most nodes run on (`aws`, `gce`, `azure`, ...).
pub(super) fn platform(nodes: &[NodeInputs]) -> Option<String> {
    winner(&votes(nodes).0).cloned()
}

/// The metadata addresses of the platform most nodes run on.
pub(super) fn cloud_metadata(nodes: &[NodeInputs], namespaced_only: bool) -> Fact {
    let (votes, unrecognised) = votes(nodes);
    let winner = winner(&votes);
    let Some(platform) = winner else {
        let why = if namespaced_only && nodes.is_empty() {
            format!("Nodes {}", super::NAMESPACED_ONLY)
        } else if unrecognised > 0 {
            format!(
                "providerID of {} not recognised",
                plural(unrecognised, "node")
            )
        } else {
            "no Node has spec.providerID".to_owned()
        };
        return Fact {
            values: Vec::new(),
            source: None,
            message: Some(format!(
                "no cloud platform with a metadata service detected ({why})"
            )),
        };
    };
    let mut notes = Vec::new();
    if votes.len() > 1 {
        let all: Vec<String> = votes
            .iter()
            .map(|(p, n)| format!("{p} ({})", plural(*n, "node")))
            .collect();
        notes.push(format!(
            "nodes disagree on the platform: {}; using {platform}",
            all.join(", ")
        ));
    }
    let source = format!("Node.spec.providerID ({platform})");
    let values: BTreeSet<Host> = metadata_of(platform)
        .iter()
        .filter_map(|a| parse_host(a))
        .collect();
    if values.is_empty() {
        notes.insert(
            0,
            format!(
                "no cloud platform with a metadata service detected (providerID scheme {platform})"
            ),
        );
        return Fact {
            values: Vec::new(),
            source: Some(source),
            message: Some(notes.join("; ")),
        };
    }
    let mut fact = found(values, source, &Default::default());
    fact.message = (!notes.is_empty()).then(|| notes.join("; "));
    fact
}
