//! The clouds reached over HTTP, for the local process: the power function's wiring (credentials from the
//! emulator's Secrets Manager), and the fake clouds `make run` and the system tests drive.

use std::sync::Arc;
use std::time::Duration;

use apiary_aws::secrets::SecretsManager;
use apiary_aws::SdkConfig;
use apiary_clouds::Endpoints;
use apiary_fakeclouds::gcp::{FakeGcp, Timings};
use apiary_ports::{Deps, Result};

/// `deps` with the clouds of `apiary-clouds` added to its platforms, as the power function's `main` does.
pub fn with_clouds(mut deps: Deps, sdk: &SdkConfig, endpoints: Endpoints) -> Result<Deps> {
    let secrets = Arc::new(SecretsManager::new(sdk));
    deps.platforms = Arc::new(apiary_clouds::with_clouds(&deps.platforms, secrets, endpoints)?);
    Ok(deps)
}

/// A fake Compute Engine with an instance template `apiary-node` and a service account whose key is stored in
/// Secrets Manager as `secret_name`.
pub struct DemoGcp {
    /// The fake.
    pub fake: FakeGcp,
    /// The ARN of the secret holding the service account's key: a pool's `credentialsSecret`.
    pub credentials: String,
}

/// The project the demo pools use.
pub const DEMO_PROJECT: &str = "apiary-demo";

/// Starts a fake Compute Engine (instances boot in `boot`, stop in `stop`) and stores its service account's key.
pub async fn demo_gcp(sdk: &SdkConfig, secret_name: &str, boot: Duration, stop: Duration) -> anyhow::Result<DemoGcp> {
    let fake = FakeGcp::start(Timings { boot, stop }).await?;
    fake.add_template("apiary-node");
    let key = fake.service_account(&format!("apiary@{DEMO_PROJECT}.iam.gserviceaccount.com"), DEMO_PROJECT);
    let credentials = SecretsManager::new(sdk).create(secret_name, &key).await?;
    Ok(DemoGcp { fake, credentials })
}
