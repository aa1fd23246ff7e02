//! A pool's role in another account (`platform.aws.roleArn`): assumed through STS's regional endpoint with the
//! pool's ExternalId, its credentials kept for the process (across invocations) until [`REFRESH_BEFORE`] their
//! expiry.
//!
//! - One assumption at a time per role, ExternalId and region: a batch of one pool's messages makes one STS call,
//!   and a slow or failing role holds no other pool's calls.
//! - A refusal (AccessDenied, another ExternalId, a region not enabled) is remembered for [`REFUSAL_KEPT`], so a
//!   pool whose role is wrong costs STS one call a minute per process, not one per cluster look; it is
//!   [`Error::Credentials`], naming the role, the ExternalId and STS's reason. Throttling and timeouts are retried
//!   like any call and not remembered.
//! - Credentials are never logged, returned or written anywhere: they live in the clients built from them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use apiary_planner::Timestamp;
use apiary_ports::{Error, Result};
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use chrono::{DateTime, TimeDelta, Utc};

use crate::calls::count;

/// Credentials are assumed again this long before they expire.
pub const REFRESH_BEFORE: TimeDelta = TimeDelta::minutes(5);
/// A refused assumption is not tried again for this long.
pub const REFUSAL_KEPT: TimeDelta = TimeDelta::minutes(1);
/// Asked-for session length: IAM's default maximum for a role.
const SESSION_SECONDS: i32 = 3600;

/// What a role was last found to give.
#[derive(Clone)]
enum Session<C> {
    /// Credentials, as the client `C` built from them, valid until `expires`.
    Ready { client: C, expires: Timestamp },
    /// STS refused: `message` until `until`.
    Refused { message: String, until: Timestamp },
}

/// Which role, for which pool, where.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Assumption {
    /// The role's ARN.
    pub role_arn: String,
    /// The pool's ExternalId.
    pub external_id: String,
    /// The STS session name (the pool's).
    pub session_name: String,
    /// The region of the STS endpoint and of the clients built.
    pub region: String,
}

/// Temporary credentials STS gave.
pub struct Granted {
    /// The credentials, as the SDK takes them.
    pub credentials: aws_sdk_sts::config::Credentials,
    /// When they expire.
    pub expires: Timestamp,
}

/// The sessions of every role this process assumed, each giving a client `C` (an EC2 client).
pub struct Roles<C> {
    sdk: aws_config::SdkConfig,
    sts: Mutex<HashMap<String, aws_sdk_sts::Client>>,
    sessions: Mutex<HashMap<Assumption, Slot<C>>>,
}

/// One role's session, behind a lock held across its assumption (one STS call at a time per role).
type Slot<C> = Arc<tokio::sync::Mutex<Option<Session<C>>>>;

impl<C: Clone> Roles<C> {
    /// Roles assumed with the process's own credentials from `sdk`.
    pub fn new(sdk: aws_config::SdkConfig) -> Self {
        Roles { sdk, sts: Mutex::new(HashMap::new()), sessions: Mutex::new(HashMap::new()) }
    }

    /// The client `build` makes from `a`'s credentials, assuming the role when this process holds none that are
    /// still good at `now`.
    pub async fn client(&self, a: &Assumption, now: Timestamp, build: impl FnOnce(Granted) -> C) -> Result<C> {
        let slot = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
            sessions.entry(a.clone()).or_default().clone()
        };
        let mut session = slot.lock().await;
        match &*session {
            Some(Session::Ready { client, expires }) if now + REFRESH_BEFORE < *expires => return Ok(client.clone()),
            Some(Session::Refused { message, until }) if now < *until => {
                return Err(Error::Credentials(message.clone()));
            }
            _ => {}
        }
        match self.assume(a).await {
            Ok(granted) => {
                let expires = granted.expires;
                let client = build(granted);
                *session = Some(Session::Ready { client: client.clone(), expires });
                Ok(client)
            }
            Err(Refusal::Refused(message)) => {
                tracing::warn!(role = %a.role_arn, region = %a.region, reason = %message, "the pool's role could not be assumed");
                *session = Some(Session::Refused { message: message.clone(), until: now + REFUSAL_KEPT });
                Err(Error::Credentials(message))
            }
            Err(Refusal::Transient(e)) => Err(e),
        }
    }

    fn sts(&self, region: &str) -> aws_sdk_sts::Client {
        let mut clients = self.sts.lock().unwrap_or_else(|e| e.into_inner());
        clients
            .entry(region.to_owned())
            .or_insert_with(|| {
                let conf = aws_sdk_sts::config::Builder::from(&self.sdk)
                    .region(aws_config::Region::new(region.to_owned()))
                    .build();
                aws_sdk_sts::Client::from_conf(conf)
            })
            .clone()
    }

    async fn assume(&self, a: &Assumption) -> std::result::Result<Granted, Refusal> {
        count("sts:AssumeRole");
        let answer = self
            .sts(&a.region)
            .assume_role()
            .role_arn(&a.role_arn)
            .role_session_name(&a.session_name)
            .external_id(&a.external_id)
            .duration_seconds(SESSION_SECONDS)
            .send()
            .await;
        let refused = |reason: String| {
            Refusal::Refused(format!(
                "cannot assume role {} with ExternalId {} in {}: {reason}",
                a.role_arn, a.external_id, a.region
            ))
        };
        let out = match answer {
            Ok(out) => out,
            Err(e) => {
                let reason = match &e {
                    SdkError::ServiceError(s) => {
                        format!("{}: {}", s.err().code().unwrap_or("Error"), s.err().message().unwrap_or_default())
                    }
                    _ => String::new(),
                };
                let wrapped = crate::error::aws("sts:AssumeRole", e);
                return Err(if wrapped.is_retryable() {
                    Refusal::Transient(wrapped)
                } else if reason.is_empty() {
                    refused(wrapped.to_string())
                } else {
                    refused(reason)
                });
            }
        };
        let Some(c) = out.credentials() else { return Err(refused("STS answered without credentials".into())) };
        let expires = DateTime::<Utc>::from_timestamp(c.expiration().secs(), 0)
            .ok_or_else(|| refused("STS answered with an expiry out of range".into()))?;
        let credentials = aws_sdk_sts::config::Credentials::new(
            c.access_key_id(),
            c.secret_access_key(),
            Some(c.session_token().to_owned()),
            Some(
                std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(c.expiration().secs().max(0) as u64),
            ),
            "apiary-pool-role",
        );
        Ok(Granted { credentials, expires })
    }
}

/// Why an assumption failed.
enum Refusal {
    /// STS refused: the message for the pool's condition.
    Refused(String),
    /// Throttled, timed out, unreachable: try again as any call.
    Transient(Error),
}

/// The STS session name of `pool`'s calls: `apiary-<pool>`, within STS's 64 characters.
pub fn session_name(pool: &str) -> String {
    let mut name = format!("apiary-{pool}");
    name.truncate(64);
    name
}
