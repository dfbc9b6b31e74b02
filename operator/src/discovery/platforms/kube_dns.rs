//! kube-dns (GKE): the `kube-system/kube-dns` Deployment's `--domain`, the cluster domain.

use k8s_openapi::api::apps::v1::Deployment;

use super::{
    DiscoverySource, Object, Select, Watched, When, find, keep_commands, pod_command, typed,
};
use crate::discovery::candidate::Domain;
use crate::discovery::candidate::Ranked;
use crate::discovery::{ClusterInputs, PlatformInputs, sources};

/// After OpenShift's DNS operator, before k3s' arguments.
const RANK: u8 = 50;

pub(super) struct KubeDns;

const OBJECTS: [Object; 1] = [Object {
    group: "apps",
    version: "v1",
    kind: "Deployment",
    resource: "deployments",
    namespace: Some("kube-system"),
    select: Select::Name("kube-dns"),
    when: When::Always,
    keep: |o| keep_commands(o, &["spec", "template", "spec"]),
}];

impl DiscoverySource for KubeDns {
    fn objects(&self) -> &'static [Object] {
        &OBJECTS
    }

    fn read(&self, watched: &[Watched], into: &mut PlatformInputs) {
        into.kube_dns_args = find(watched[0].as_ref(), "kube-dns").and_then(|d| {
            let d: Deployment = typed(d)?;
            Some(pod_command(d.spec?.template.spec.as_ref()))
        });
    }

    fn cluster_domain(&self, inp: &ClusterInputs) -> Vec<Ranked<Domain>> {
        let Some(args) = &inp.platform.kube_dns_args else {
            return Vec::new();
        };
        let what = "Deployment kube-system/kube-dns --domain";
        let d = match sources::flag_values(args, "--domain").into_iter().next() {
            None => Domain::Looked(format!("{what} is not set")),
            Some(d) => Domain::Found(what.into(), Some(d.trim_end_matches('.').to_owned())),
        };
        vec![(RANK, d)]
    }
}
