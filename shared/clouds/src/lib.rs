//! Apiary's adapters for the clouds reached over their HTTP APIs. Each implements the
//! [`Actuator`](apiary_ports::platform::Actuator) and [`Provisioner`](apiary_ports::platform::Provisioner) ports
//! for one platform kind:
//!
//! - [`gcp`]: Compute Engine (`platform.gcp`).
//!
//! They share one [`http::Http`] client (built once per process, bounded and retrying like the AWS calls), read
//! their credentials through the [`Secrets`](apiary_ports::secrets::Secrets) port by the ARN a pool names, and
//! keep tokens per warm process. This crate depends on the ports only, never on another adapter: a function's
//! `main` joins them ([`with_clouds`]).

pub mod gcp;
pub mod http;
pub mod secrets;

use std::sync::Arc;

use apiary_ports::platform::Platforms;
use apiary_ports::secrets::Secrets;
use apiary_ports::Result;

/// Where each cloud's API is, from the environment (unset: the public endpoints).
#[derive(Debug, Clone, Default)]
pub struct Endpoints {
    /// `APIARY_GCP_ENDPOINT`: Compute Engine's API root (default [`gcp::DEFAULT_ENDPOINT`]).
    pub gcp: Option<String>,
}

impl Endpoints {
    /// Reads the endpoints from the environment.
    pub fn from_env() -> Self {
        Self { gcp: std::env::var("APIARY_GCP_ENDPOINT").ok().filter(|v| !v.is_empty()) }
    }
}

/// `platforms` and every cloud of this crate, sharing one HTTP client, reading credentials through `secrets`.
pub fn with_clouds(platforms: &Platforms, secrets: Arc<dyn Secrets>, endpoints: Endpoints) -> Result<Platforms> {
    let http = http::Http::new(None)?;
    Ok(platforms.clone().with("gcp", Arc::new(gcp::Gcp::new(http, secrets, endpoints.gcp))))
}
