//! Apiary's adapters for the clouds reached over their HTTP APIs. Each implements the
//! [`Actuator`](apiary_ports::platform::Actuator) and [`Provisioner`](apiary_ports::platform::Provisioner) ports
//! for one platform kind:
//!
//! - [`gcp`]: Compute Engine (`platform.gcp`).
//! - [`azure`]: Azure Resource Manager (`platform.azure`).
//! - [`vsphere`]: vCenter's Automation REST API (`platform.vsphere`).
//! - [`webhook`]: an external installer behind a signed webhook (`provisioner.webhook`), beside any platform.
//! - [`readiness`]: a pool's readiness check of its clusters: an HTTPS probe (`readiness.https`), or
//!   [`kubernetes`]: nodes and ClusterOperators through the cluster's API (`readiness.kubernetes`), approving
//!   the certificate requests of nodes back from hibernation by [`csr`]'s rules.
//! - [`notify`]: a pool's claim notifications, posted to its `notify` webhooks and signed as the installer's are.
//!
//! They share one [`http::Http`] client (built once per process, bounded and retrying like the AWS calls), read
//! their credentials through the [`Secrets`](apiary_ports::secrets::Secrets) port by the ARN a pool names, and
//! keep tokens per warm process. This crate depends on the ports only, never on another adapter: a function's
//! `main` joins them ([`with_clouds`]).

pub mod azure;
pub mod csr;
pub mod fanout;
pub mod gcp;
pub mod http;
pub mod kubernetes;
pub mod notify;
pub mod readiness;
pub mod secrets;
pub mod tokens;
pub mod vsphere;
pub mod webhook;

use std::sync::Arc;

use apiary_ports::platform::Platforms;
use apiary_ports::secrets::Secrets;
use apiary_ports::Result;

/// Where each cloud's API is, from the environment (unset: the public endpoints).
#[derive(Debug, Clone, Default)]
pub struct Endpoints {
    /// `APIARY_GCP_ENDPOINT`: Compute Engine's API root (default [`gcp::DEFAULT_ENDPOINT`]).
    pub gcp: Option<String>,
    /// `APIARY_AZURE_ENDPOINT`: Azure Resource Manager's root (default [`azure::DEFAULT_ENDPOINT`]).
    pub azure: Option<String>,
    /// `APIARY_AZURE_AUTHORITY`: Entra ID's root (default [`azure::DEFAULT_AUTHORITY`]).
    pub azure_authority: Option<String>,
}

impl Endpoints {
    /// Reads the endpoints from the environment.
    pub fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        Self {
            gcp: var("APIARY_GCP_ENDPOINT"),
            azure: var("APIARY_AZURE_ENDPOINT"),
            azure_authority: var("APIARY_AZURE_AUTHORITY"),
        }
    }
}

/// `platforms` and every cloud of this crate, and the webhook installer, sharing one HTTP client that calls only
/// where `policy` lets a pool's URLs reach, reading credentials and signing keys through `secrets`.
pub fn with_clouds(
    platforms: &Platforms,
    secrets: Arc<dyn Secrets>,
    endpoints: Endpoints,
    policy: apiary_planner::validate::UrlPolicy,
) -> Result<Platforms> {
    with_http(platforms, http::Http::guarded(policy)?, secrets, endpoints)
}

/// [`with_clouds`] over `http` (a client answered in process, in the simulation).
pub fn with_http(
    platforms: &Platforms,
    http: http::Http,
    secrets: Arc<dyn Secrets>,
    endpoints: Endpoints,
) -> Result<Platforms> {
    Ok(platforms
        .clone()
        .with("gcp", Arc::new(gcp::Gcp::new(http.clone(), secrets.clone(), endpoints.gcp)))
        .with(
            "azure",
            Arc::new(azure::Azure::new(http.clone(), secrets.clone(), endpoints.azure, endpoints.azure_authority)),
        )
        .with("vsphere", Arc::new(vsphere::Vsphere::new(http.clone(), secrets.clone())))
        .with_installer(Arc::new(webhook::Webhook::new(http.clone(), secrets.clone())))
        .with_notifier(Arc::new(notify::Notifications::new(http.clone(), secrets.clone())))
        .with_readiness(Arc::new(readiness::Checks::new(http, secrets))))
}
