//! The EgressProxyPolicy API (egressproxy.io/v1alpha1).

pub mod reasons;
mod spec;
mod status;

pub use spec::*;
pub use status::*;

use kube::CustomResourceExt;

/// The CRD as YAML, exactly as committed under `crds/`.
pub fn crd_yaml() -> Result<String, serde_yaml_ng::Error> {
    let yaml = serde_yaml_ng::to_string(&EgressProxyPolicy::crd())?;
    Ok(format!("---\n{yaml}"))
}
