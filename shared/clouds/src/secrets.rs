//! Secrets read through the [`Secrets`] port, cached briefly per warm process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apiary_ports::secrets::{Secret, Secrets};
use apiary_ports::Result;
use tokio::time::Instant;

/// How long a secret read is reused: a rotated credential is picked up within this, or at once when the cloud
/// refuses the old one ([`SecretCache::forget`]).
pub const SECRET_TTL: Duration = Duration::from_secs(300);

/// A cache of secrets by ARN.
pub struct SecretCache {
    source: Arc<dyn Secrets>,
    ttl: Duration,
    held: Mutex<HashMap<String, (Instant, Secret)>>,
}

impl SecretCache {
    /// Reads through `source`, keeping each secret for [`SECRET_TTL`].
    pub fn new(source: Arc<dyn Secrets>) -> Self {
        Self { source, ttl: SECRET_TTL, held: Mutex::new(HashMap::new()) }
    }

    /// The secret under `arn`, from the cache while fresh.
    pub async fn get(&self, arn: &str) -> Result<Secret> {
        if let Some((at, secret)) = self.lock().get(arn) {
            if at.elapsed() < self.ttl {
                return Ok(secret.clone());
            }
        }
        let secret = self.source.secret(arn).await?;
        self.lock().insert(arn.to_owned(), (Instant::now(), secret.clone()));
        Ok(secret)
    }

    /// Drops the cached `arn`: the cloud refused it, so the next use reads it again.
    pub fn forget(&self, arn: &str) {
        self.lock().remove(arn);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Secret)>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}
