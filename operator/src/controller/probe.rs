//! The probe Job's I/O: find a run's Job and read its Pods, create it. Probe Jobs are
//! short-lived, so a policy waiting on one is requeued soon rather than every namespace's
//! Jobs being watched.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};

use super::errors::{self, Category, Error};
use super::plan::verify::{self, ProbeRun, Wanted};
use crate::credentials::{MANAGED_BY, MANAGED_BY_LABEL, POLICY_LABEL};

/// The run as the cluster shows it: its Job (among the policy's probe Jobs) and its Pods.
pub(super) async fn run(
    client: &Client,
    ns: &str,
    policy: &str,
    policy_uid: &str,
    w: &Wanted,
) -> Result<ProbeRun, Error> {
    let mine = format!("{MANAGED_BY_LABEL}={MANAGED_BY},{POLICY_LABEL}={policy}");
    let jobs = Api::<Job>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&mine))
        .await
        .map_err(Error::kube("listing", format!("probe Jobs in {ns}")))?;
    let job = jobs.items.iter().find(|j| {
        j.name_any() == w.job_name
            && verify::owned_by(j, policy_uid)
            && j.meta().deletion_timestamp.is_none()
    });
    let Some(job) = job else {
        // A Job going away (its TTL) is as good as gone: the run starts again.
        return Ok(verify::missing(policy_uid, &jobs.items));
    };
    // The run's own Pods, by the Job's UID: a Pod merely labelled with its name is not one.
    let selector = format!(
        "batch.kubernetes.io/controller-uid={}",
        job.uid().unwrap_or_default()
    );
    let pods = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(Error::kube(
            "listing",
            format!("Pods of Job {ns}/{}", w.job_name),
        ))?;
    Ok(verify::read(w, job, &pods.items))
}

/// Creates the run's Job; one another instance created first is the same run.
pub(super) async fn create(client: &Client, ns: &str, job: &Job) -> Result<(), Error> {
    let name = job.metadata.name.clone().unwrap_or_default();
    match Api::<Job>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), job)
        .await
    {
        Ok(_) => {
            tracing::info!(namespace = %ns, job = %name, "started a verification probe");
            Ok(())
        }
        Err(e) if errors::category_of(&e) == Category::Conflict => Ok(()),
        Err(e) => Err(Error::kube("creating", format!("Job {ns}/{name}"))(e)),
    }
}
