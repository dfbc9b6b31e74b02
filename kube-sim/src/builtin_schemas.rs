//! OpenAPI v3 schemas of the built-in kinds, generated from k8s-openapi's types (their
//! schemars impls carry the upstream names and descriptions), so `kubectl explain` works for
//! them as it does for CRDs.

use std::collections::HashMap;
use std::sync::OnceLock;

use k8s_openapi::api::{
    admissionregistration::v1 as admission, apps::v1 as apps, authentication::v1 as authn,
    authorization::v1 as authz, batch::v1 as batch, coordination::v1 as coordination,
    core::v1 as core, discovery::v1 as discovery, events::v1 as events,
    networking::v1 as networking, policy::v1 as policy, rbac::v1 as rbac,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use schemars::JsonSchema;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value};

/// A kind's schema name and every definition it refers to (itself included).
pub struct KindSchema {
    pub name: String,
    pub definitions: Map<String, Value>,
}

type Key = (&'static str, &'static str, &'static str);

fn generate<T: JsonSchema>() -> KindSchema {
    let mut generator = SchemaGenerator::new(SchemaSettings::openapi3());
    generator.subschema_for::<T>();
    KindSchema {
        name: T::schema_name().into_owned(),
        definitions: generator.take_definitions(true),
    }
}

fn all() -> HashMap<Key, KindSchema> {
    HashMap::from([
        (("", "v1", "Namespace"), generate::<core::Namespace>()),
        (("", "v1", "Secret"), generate::<core::Secret>()),
        (("", "v1", "ConfigMap"), generate::<core::ConfigMap>()),
        (("", "v1", "Service"), generate::<core::Service>()),
        (("", "v1", "Endpoints"), generate::<core::Endpoints>()),
        (("", "v1", "Node"), generate::<core::Node>()),
        (("", "v1", "Pod"), generate::<core::Pod>()),
        (("", "v1", "Event"), generate::<core::Event>()),
        (
            ("", "v1", "ServiceAccount"),
            generate::<core::ServiceAccount>(),
        ),
        (("apps", "v1", "Deployment"), generate::<apps::Deployment>()),
        (("apps", "v1", "ReplicaSet"), generate::<apps::ReplicaSet>()),
        (
            ("apps", "v1", "StatefulSet"),
            generate::<apps::StatefulSet>(),
        ),
        (("apps", "v1", "DaemonSet"), generate::<apps::DaemonSet>()),
        (
            ("apps", "v1", "ControllerRevision"),
            generate::<apps::ControllerRevision>(),
        ),
        (("batch", "v1", "Job"), generate::<batch::Job>()),
        (("batch", "v1", "CronJob"), generate::<batch::CronJob>()),
        (
            ("discovery.k8s.io", "v1", "EndpointSlice"),
            generate::<discovery::EndpointSlice>(),
        ),
        (
            ("events.k8s.io", "v1", "Event"),
            generate::<events::Event>(),
        ),
        (
            ("coordination.k8s.io", "v1", "Lease"),
            generate::<coordination::Lease>(),
        ),
        (
            ("networking.k8s.io", "v1", "ServiceCIDR"),
            generate::<networking::ServiceCIDR>(),
        ),
        (
            ("networking.k8s.io", "v1", "NetworkPolicy"),
            generate::<networking::NetworkPolicy>(),
        ),
        (
            ("policy", "v1", "PodDisruptionBudget"),
            generate::<policy::PodDisruptionBudget>(),
        ),
        (
            (
                "admissionregistration.k8s.io",
                "v1",
                "ValidatingAdmissionPolicy",
            ),
            generate::<admission::ValidatingAdmissionPolicy>(),
        ),
        (
            (
                "admissionregistration.k8s.io",
                "v1",
                "ValidatingAdmissionPolicyBinding",
            ),
            generate::<admission::ValidatingAdmissionPolicyBinding>(),
        ),
        (
            ("rbac.authorization.k8s.io", "v1", "Role"),
            generate::<rbac::Role>(),
        ),
        (
            ("rbac.authorization.k8s.io", "v1", "ClusterRole"),
            generate::<rbac::ClusterRole>(),
        ),
        (
            ("rbac.authorization.k8s.io", "v1", "RoleBinding"),
            generate::<rbac::RoleBinding>(),
        ),
        (
            ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
            generate::<rbac::ClusterRoleBinding>(),
        ),
        (
            ("authentication.k8s.io", "v1", "TokenReview"),
            generate::<authn::TokenReview>(),
        ),
        (
            ("authorization.k8s.io", "v1", "SelfSubjectAccessReview"),
            generate::<authz::SelfSubjectAccessReview>(),
        ),
        (
            ("authorization.k8s.io", "v1", "SelfSubjectRulesReview"),
            generate::<authz::SelfSubjectRulesReview>(),
        ),
        (
            ("authorization.k8s.io", "v1", "SubjectAccessReview"),
            generate::<authz::SubjectAccessReview>(),
        ),
        (
            ("authorization.k8s.io", "v1", "LocalSubjectAccessReview"),
            generate::<authz::LocalSubjectAccessReview>(),
        ),
        (
            ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            generate::<apiextensions::CustomResourceDefinition>(),
        ),
    ])
}

/// The schema of a built-in kind (generated once).
pub fn of(group: &str, version: &str, kind: &str) -> Option<&'static KindSchema> {
    static ALL: OnceLock<HashMap<Key, KindSchema>> = OnceLock::new();
    ALL.get_or_init(all)
        .iter()
        .find(|((g, v, k), _)| *g == group && *v == version && *k == kind)
        .map(|(_, s)| s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_kind_has_a_schema_with_its_upstream_name() {
        let d = of("apps", "v1", "Deployment").expect("deployment");
        assert_eq!(d.name, "io.k8s.api.apps.v1.Deployment");
        let spec = d
            .definitions
            .get("io.k8s.api.apps.v1.DeploymentSpec")
            .expect("spec");
        assert!(spec.pointer("/properties/template").is_some(), "{spec}");
        let tpl = d
            .definitions
            .get("io.k8s.api.core.v1.PodTemplateSpec")
            .expect("template definition is included");
        assert!(tpl.get("description").is_some());
        let reg = crate::resources::Registry::with_builtins();
        let mut gvs = vec![(String::new(), vec!["v1".to_string()])];
        gvs.extend(reg.groups());
        for (g, versions) in gvs {
            for t in versions.iter().flat_map(|v| reg.in_group_version(&g, v)) {
                assert!(of(&t.group, &t.version, &t.kind).is_some(), "{}", t.kind);
            }
        }
    }
}
