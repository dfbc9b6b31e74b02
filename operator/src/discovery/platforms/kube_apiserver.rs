//! The API server's static Pods in kube-system: `--service-cluster-ip-range`, the Service
//! network. Distributions label them differently: kubeadm (and most others)
//! `component=kube-apiserver`, Talos `k8s-app=kube-apiserver`; one watch per label.

use k8s_openapi::api::core::v1::Pod;

use super::{
    DiscoverySource, Object, Select, Watched, When, all_typed, keep_commands, named, pod_command,
};
use crate::discovery::candidate::{Candidate, Label, Ranked};
use crate::discovery::{ClusterInputs, PlatformInputs, sorted_by_name, sources};

/// The Service network: after OpenShift's config, before k3s' arguments.
const RANK: u8 = 30;

pub(super) struct KubeApiserver;

/// How distributions label the API server's static Pods.
pub(super) const LABELS: [&str; 2] = ["component=kube-apiserver", "k8s-app=kube-apiserver"];

const OBJECTS: [Object; 1] = [Object {
    group: "",
    version: "v1",
    kind: "Pod",
    resource: "pods",
    namespace: Some("kube-system"),
    select: Select::Labels(&LABELS),
    when: When::Always,
    keep: |o| keep_commands(o, &["spec"]),
}];

impl DiscoverySource for KubeApiserver {
    fn objects(&self) -> &'static [Object] {
        &OBJECTS
    }

    /// The Pods of every label, each once (the caller merges the watches by name).
    fn read(&self, watched: &[Watched], into: &mut PlatformInputs) {
        let pods: Vec<(String, Pod)> = watched[0]
            .as_ref()
            .map(|p| all_typed(p, None))
            .unwrap_or_default();
        into.apiserver_pods = named(&pods, |p| pod_command(p.spec.as_ref()));
    }

    fn service_network(&self, inp: &ClusterInputs) -> Vec<Ranked<Candidate>> {
        let pods = &inp.platform.apiserver_pods;
        if pods.is_empty() {
            return Vec::new();
        }
        let flag = "--service-cluster-ip-range";
        let c = Candidate {
            parts: sorted_by_name(pods)
                .into_iter()
                .map(|p| {
                    let what = format!("Pod kube-system/{} {flag}", p.name);
                    (what, sources::flag_values(&p.values, flag))
                })
                .collect(),
            label: Label::Names,
            absent: Some(format!("the kube-apiserver Pods have no valid {flag}")),
        };
        vec![(RANK, c)]
    }
}
