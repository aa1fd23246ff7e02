//! Bearer tokens and sessions, per warm process: kept until a minute before they expire, dropped when the
//! cloud refuses one.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// How long before its expiry a token is renewed.
pub const RENEW_BEFORE: Duration = Duration::from_secs(60);

/// Tokens by whose they are (an account and the endpoint that issued them).
#[derive(Default)]
pub struct TokenCache {
    held: Mutex<HashMap<String, (String, Instant)>>,
}

impl TokenCache {
    /// `key`'s token while it has more than [`RENEW_BEFORE`] left.
    pub fn get(&self, key: &str) -> Option<String> {
        let held = self.lock();
        let (token, until) = held.get(key)?;
        (Instant::now() < *until).then(|| token.clone())
    }

    /// Keeps `token` for `key`, valid for `lifetime` from now.
    pub fn put(&self, key: &str, token: &str, lifetime: Duration) {
        let until = Instant::now() + lifetime.saturating_sub(RENEW_BEFORE);
        self.lock().insert(key.to_owned(), (token.to_owned(), until));
    }

    /// Drops `key`'s token: the cloud refused it.
    pub fn forget(&self, key: &str) {
        self.lock().remove(key);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, Instant)>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_kept_until_a_minute_before_it_expires() {
        let cache = TokenCache::default();
        cache.put("a", "t1", Duration::from_secs(3600));
        assert_eq!(cache.get("a").as_deref(), Some("t1"));
        cache.put("b", "t2", Duration::from_secs(30));
        assert_eq!(cache.get("b"), None, "less than a minute left: renewed");
        cache.forget("a");
        assert_eq!(cache.get("a"), None);
    }
}
