//! apps/v1 StatefulSet.

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::{Kind, Rollout, observed, on_delete};
use crate::api::WorkloadKind;

impl Kind for StatefulSet {
    const VARIANT: WorkloadKind = WorkloadKind::StatefulSet;
    const SHORT_NAMES: &'static [&'static str] = &["sts"];
    const TEMPLATE: &'static [&'static str] = &["spec", "template"];
    const MAY_BE_UNREADABLE: bool = false;

    fn pod_template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().map(|s| &s.template)
    }

    fn pod_template_mut(&mut self) -> Option<&mut PodTemplateSpec> {
        self.spec.as_mut().map(|s| &mut s.template)
    }

    fn rollout(&self) -> Option<Rollout> {
        let spec = self.spec.as_ref()?;
        let st = self.status.clone().unwrap_or_default();
        let want = spec.replicas.unwrap_or(1);
        let seen = observed(self, st.observed_generation);
        let updated = st.updated_replicas.unwrap_or(0) >= want;
        let rolled_out = seen
            && updated
            && st.ready_replicas.unwrap_or(0) >= want
            && (st.update_revision.is_none() || st.update_revision == st.current_revision);
        let strategy = spec
            .update_strategy
            .as_ref()
            .and_then(|u| u.type_.as_deref());
        Some(if rolled_out {
            Rollout::RolledOut
        } else if !seen {
            Rollout::NotStarted
        } else if on_delete(strategy) && !updated {
            Rollout::WaitingForManualRestart
        } else {
            Rollout::Rolling
        })
    }

    fn drop_unread(&mut self) {
        if let Some(s) = self.spec.as_mut() {
            s.volume_claim_templates = None;
            s.persistent_volume_claim_retention_policy = None;
        }
        self.status = self.status.take().map(|s| StatefulSetStatus {
            observed_generation: s.observed_generation,
            updated_replicas: s.updated_replicas,
            ready_replicas: s.ready_replicas,
            update_revision: s.update_revision,
            current_revision: s.current_revision,
            replicas: s.replicas,
            ..Default::default()
        });
    }
}
