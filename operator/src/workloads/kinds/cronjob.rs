//! batch/v1 CronJob: the proxy settings go into `spec.jobTemplate.spec.template`, so the
//! next Job it starts has them; Jobs already running keep the values they started with.

use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::{Kind, Rollout};
use crate::api::WorkloadKind;

impl Kind for CronJob {
    const VARIANT: WorkloadKind = WorkloadKind::CronJob;
    const SHORT_NAMES: &'static [&'static str] = &["cj"];
    const TEMPLATE: &'static [&'static str] = &["spec", "jobTemplate", "spec", "template"];
    /// CronJobs came later: a namespaced install whose Roles predate them must still start.
    const MAY_BE_UNREADABLE: bool = true;

    fn pod_template(&self) -> Option<&PodTemplateSpec> {
        let job = self.spec.as_ref()?.job_template.spec.as_ref()?;
        Some(&job.template)
    }

    fn pod_template_mut(&mut self) -> Option<&mut PodTemplateSpec> {
        let job = self.spec.as_mut()?.job_template.spec.as_mut()?;
        Some(&mut job.template)
    }

    /// A CronJob has no rollout: the next Job it starts takes the template as it is, so
    /// it is rolled out as soon as its template is written.
    fn rollout(&self) -> Option<Rollout> {
        self.spec.as_ref().map(|_| Rollout::RolledOut)
    }

    fn drop_unread(&mut self) {
        self.status = None;
        if let Some(s) = self.spec.as_mut() {
            s.job_template.metadata = None;
        }
    }
}
