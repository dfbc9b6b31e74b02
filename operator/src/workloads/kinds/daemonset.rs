//! apps/v1 DaemonSet.

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::{Kind, Rollout, observed, on_delete};
use crate::api::WorkloadKind;

impl Kind for DaemonSet {
    const VARIANT: WorkloadKind = WorkloadKind::DaemonSet;
    const SHORT_NAMES: &'static [&'static str] = &["ds"];
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
        let seen = observed(self, st.observed_generation);
        let rolled_out = seen
            && st.updated_number_scheduled.unwrap_or(0) >= st.desired_number_scheduled
            && st.number_available.unwrap_or(0) >= st.desired_number_scheduled;
        let strategy = spec
            .update_strategy
            .as_ref()
            .and_then(|u| u.type_.as_deref());
        Some(if rolled_out {
            Rollout::RolledOut
        } else if !seen {
            Rollout::NotStarted
        } else if on_delete(strategy) {
            Rollout::WaitingForManualRestart
        } else {
            Rollout::Rolling
        })
    }

    fn drop_unread(&mut self) {
        self.status = self.status.take().map(|s| DaemonSetStatus {
            observed_generation: s.observed_generation,
            updated_number_scheduled: s.updated_number_scheduled,
            desired_number_scheduled: s.desired_number_scheduled,
            number_available: s.number_available,
            ..Default::default()
        });
    }
}
