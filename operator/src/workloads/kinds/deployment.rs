//! apps/v1 Deployment.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus};
use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::{Kind, Rollout, observed};
use crate::api::WorkloadKind;

impl Kind for Deployment {
    const VARIANT: WorkloadKind = WorkloadKind::Deployment;
    const SHORT_NAMES: &'static [&'static str] = &["deploy"];
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
        // What `kubectl rollout status` waits for.
        let updated = st.updated_replicas.unwrap_or(0);
        let rolled_out = observed(self, st.observed_generation)
            && updated >= want
            && st.replicas.unwrap_or(0) <= updated
            && st.available_replicas.unwrap_or(0) >= updated;
        let deadline = st.conditions.iter().flatten().any(|c| {
            c.type_ == "Progressing"
                && c.status == "False"
                && c.reason.as_deref() == Some("ProgressDeadlineExceeded")
        });
        Some(if rolled_out {
            Rollout::RolledOut
        } else if spec.paused == Some(true) {
            Rollout::Paused
        } else if deadline {
            Rollout::Stalled
        } else if !observed(self, st.observed_generation) {
            Rollout::NotStarted
        } else {
            Rollout::Rolling
        })
    }

    fn drop_unread(&mut self) {
        if let Some(s) = self.spec.as_mut() {
            s.strategy = None;
            s.min_ready_seconds = None;
            s.revision_history_limit = None;
        }
        self.status = self.status.take().map(|s| DeploymentStatus {
            observed_generation: s.observed_generation,
            replicas: s.replicas,
            updated_replicas: s.updated_replicas,
            available_replicas: s.available_replicas,
            // The rollout reads whether Progressing failed, and why; message and times are
            // long.
            conditions: s.conditions.map(|c| {
                c.into_iter()
                    .filter(|c| c.type_ == "Progressing")
                    .map(|c| DeploymentCondition {
                        type_: c.type_,
                        status: c.status,
                        reason: c.reason,
                        ..Default::default()
                    })
                    .collect()
            }),
            ..Default::default()
        });
    }
}
