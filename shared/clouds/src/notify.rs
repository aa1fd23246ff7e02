//! Claim notifications posted to a pool's `notify` webhooks ([`apiary_ports::notify`]), signed per Standard
//! Webhooks with the hook's key ([`crate::webhook::sign`]) as the installer webhook's requests are: the
//! `webhook-id` is the event's key in the trail, so a receiver drops a notification it already has.
//!
//! Each post is one HTTP request, one attempt in the trail: a 429 or 5xx is that attempt failed, tried again on the
//! documented schedule ([`apiary_planner::notify`]), never again at once behind the trail's back. One post has
//! [`POST_BUDGET`]: a receiver slower than that is one failed attempt, and never holds the power function long.

use std::time::Duration;

use apiary_planner::notify::NotifyHook;
use apiary_ports::platform::Notifier;
use apiary_ports::secrets::Secrets;
use apiary_ports::{Error, Result};
use async_trait::async_trait;
use reqwest::StatusCode;

use crate::http::Http;
use crate::secrets::SecretCache;
use crate::webhook::sign;

/// The longest one post of a notification takes.
pub const POST_BUDGET: Duration = Duration::from_secs(5);

/// Posts notifications through `http` (the URL policy's guarded client), reading signing keys through `secrets`.
pub struct Notifications {
    http: Http,
    secrets: SecretCache,
}

impl Notifications {
    /// Posts through `http` with [`POST_BUDGET`], reading keys through `secrets`.
    pub fn new(http: Http, secrets: std::sync::Arc<dyn Secrets>) -> Self {
        Self { http: http.with_budget(POST_BUDGET), secrets: SecretCache::new(secrets) }
    }
}

#[async_trait]
impl Notifier for Notifications {
    async fn post(&self, pool: &str, hook: &NotifyHook, id: &str, timestamp: i64, body: &[u8]) -> Result<u16> {
        const OP: &str = "notify.post";
        let key = self.secrets.get(&hook.secret, pool).await?;
        let signature = sign(key.expose(), id, timestamp, body)
            .map_err(|why| Error::service(OP, format!("the signing key in {} {why}", hook.secret), false))?;
        let answer = self
            .http
            .send_once(OP, |c| {
                c.post(&hook.url)
                    .header("content-type", "application/json")
                    .header("webhook-id", id)
                    .header("webhook-timestamp", timestamp.to_string())
                    .header("webhook-signature", &signature)
                    .body(body.to_vec())
            })
            .await?;
        if matches!(answer.status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            // A rotated key: the next attempt reads it again.
            self.secrets.forget(&hook.secret);
        }
        Ok(answer.status.as_u16())
    }
}
