//! Secrets read through the [`Secrets`] port for a pool, cached briefly per warm process: a secret is read only
//! when its tags name the pool ([`secret_serves`]), checked on every use, cached or not.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apiary_planner::secret_tags::secret_serves;
use apiary_ports::secrets::{Secret, Secrets};
use apiary_ports::{Error, Result};
use tokio::time::Instant;

/// How long a secret read is reused: a rotated credential is picked up within this, or at once when the cloud
/// refuses the old one ([`SecretCache::forget`]); so is a change of its tags.
pub const SECRET_TTL: Duration = Duration::from_secs(300);

/// A cache of secrets, with their tags, by ARN.
pub struct SecretCache {
    source: Arc<dyn Secrets>,
    ttl: Duration,
    held: Mutex<HashMap<String, Held>>,
}

/// A secret read, when, and the tags it had then.
struct Held {
    at: Instant,
    tags: BTreeMap<String, String>,
    secret: Secret,
}

impl SecretCache {
    /// Reads through `source`, keeping each secret for [`SECRET_TTL`].
    pub fn new(source: Arc<dyn Secrets>) -> Self {
        Self { source, ttl: SECRET_TTL, held: Mutex::new(HashMap::new()) }
    }

    /// The secret under `arn`, for `pool`, from the cache while fresh. A secret whose tags do not name the pool is
    /// refused as the pool's credentials are ([`Error::Credentials`], on the pool's `AuthenticationFailure`
    /// condition), and its value is not read.
    pub async fn get(&self, arn: &str, pool: &str) -> Result<Secret> {
        let cached =
            self.lock().get(arn).filter(|h| h.at.elapsed() < self.ttl).map(|h| (h.tags.clone(), h.secret.clone()));
        if let Some((tags, secret)) = cached {
            secret_serves(arn, &tags, pool).map_err(Error::Credentials)?;
            return Ok(secret);
        }
        let tags = self.source.tags(arn).await?;
        secret_serves(arn, &tags, pool).map_err(Error::Credentials)?;
        let secret = self.source.secret(arn).await?;
        self.lock().insert(arn.to_owned(), Held { at: Instant::now(), tags, secret: secret.clone() });
        Ok(secret)
    }

    /// Drops the cached `arn`: the cloud refused it, so the next use reads it again.
    pub fn forget(&self, arn: &str) {
        self.lock().remove(arn);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A pool's settings for one platform or installer, with the pool's name: what an adapter reads the pool's secrets
/// for. Derefs to the settings.
pub(crate) struct ForPool<'a, P> {
    /// The pool's name, which the secrets it names must carry ([`SecretCache::get`]).
    pub pool: &'a str,
    /// The pool's settings for one platform or installer.
    pub settings: &'a P,
}

impl<P> Clone for ForPool<'_, P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P> Copy for ForPool<'_, P> {}

impl<P> std::ops::Deref for ForPool<'_, P> {
    type Target = P;

    fn deref(&self) -> &P {
        self.settings
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;

    use super::*;

    const ARN: &str = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:team-a/gcp-AbCdEf";

    /// One secret, tagged for `pools`, counting the reads of its value.
    struct One {
        pools: Mutex<String>,
        reads: AtomicUsize,
    }

    #[async_trait]
    impl Secrets for One {
        async fn secret(&self, _: &str) -> Result<Secret> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            Ok(Secret::new("key"))
        }

        async fn tags(&self, _: &str) -> Result<BTreeMap<String, String>> {
            let pools = self.pools.lock().unwrap_or_else(|e| e.into_inner()).clone();
            Ok([("apiary".to_owned(), "true".to_owned()), ("apiary:pools".to_owned(), pools)].into())
        }
    }

    fn one(pools: &str) -> Arc<One> {
        Arc::new(One { pools: Mutex::new(pools.to_owned()), reads: AtomicUsize::new(0) })
    }

    #[tokio::test]
    async fn a_secret_is_read_only_for_the_pools_its_tags_name_cached_or_not() {
        let source = one("team-a-ci team-a-nightly");
        let cache = SecretCache::new(source.clone());
        // Refused before its value is read.
        assert!(matches!(cache.get(ARN, "team-b-ci").await, Err(Error::Credentials(_))));
        assert_eq!(source.reads.load(Ordering::SeqCst), 0, "the value is not read for a pool the tags do not name");
        assert_eq!(cache.get(ARN, "team-a-ci").await.expect("named").expose(), "key");
        assert_eq!(cache.get(ARN, "team-a-nightly").await.expect("named").expose(), "key");
        assert_eq!(source.reads.load(Ordering::SeqCst), 1, "read once, then from the cache");
        // A cached secret is still checked against each pool that asks for it.
        let Err(Error::Credentials(why)) = cache.get(ARN, "team-b-ci").await else { panic!("served from the cache") };
        assert!(why.contains("team-b-ci") && why.contains(ARN), "{why}");
    }

    #[tokio::test]
    async fn a_tag_taken_back_holds_once_the_secret_is_forgotten_or_the_cache_expires() {
        let source = one("team-a-ci");
        let mut cache = SecretCache::new(source.clone());
        cache.get(ARN, "team-a-ci").await.expect("named");
        *source.pools.lock().expect("lock") = "team-b-ci".into();
        cache.forget(ARN);
        assert!(matches!(cache.get(ARN, "team-a-ci").await, Err(Error::Credentials(_))));
        assert!(cache.get(ARN, "team-b-ci").await.is_ok());
        *source.pools.lock().expect("lock") = String::new();
        cache.ttl = Duration::ZERO;
        assert!(matches!(cache.get(ARN, "team-b-ci").await, Err(Error::Credentials(_))));
    }
}
