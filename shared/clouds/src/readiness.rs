//! A pool's readiness check (`readiness.https`): one `GET` of the URL its template makes for the cluster, trusting
//! the pool's CA bundle besides the system's roots. The expected status is ready; another status is not ready
//! (with what the cluster answered); no answer at all (refused, timed out, an untrusted certificate) is
//! unreachable. One attempt per look, bounded like every call: the power function looks again every 15 seconds
//! until the pool's resume timeout.

use std::time::Duration;

use apiary_planner::power::Readiness;
use apiary_planner::HttpsProbe;
use apiary_ports::platform::{ReadinessCheck, Target};
use apiary_ports::{Error, Result};
use async_trait::async_trait;

use crate::http::{error_chain, Bundles, Http};

/// Longest one look may take.
const LOOK: Duration = Duration::from_secs(10);

/// The HTTPS readiness check.
pub struct HttpsReadiness {
    clients: Bundles,
}

impl HttpsReadiness {
    /// Checks through `http` (and clients like it trusting each pool's CA bundle).
    pub fn new(http: Http) -> Self {
        Self { clients: Bundles::new(http) }
    }
}

fn probe<'a>(t: &Target<'a>) -> Result<&'a HttpsProbe> {
    t.spec
        .readiness
        .as_ref()
        .map(|r| &r.https)
        .ok_or_else(|| Error::Config(format!("pool {} has no readiness check", t.pool)))
}

#[async_trait]
impl ReadinessCheck for HttpsReadiness {
    async fn check(&self, t: Target<'_>) -> Result<Readiness> {
        let probe = probe(&t)?;
        let url = match probe.url_for(t.cluster, t.spec.base_domain.as_deref()) {
            Ok(url) => url,
            Err(why) => return Ok(Readiness::NotReady { message: format!("the readiness URL: {why}") }),
        };
        let http = self.clients.client(probe.ca_bundle.as_deref())?;
        apiary_ports::calls::count("readiness.Get");
        let sent = tokio::time::timeout(LOOK, http.client().get(&url).send()).await;
        let response = match sent {
            Err(_) => return Ok(Readiness::Unreachable { message: format!("{url}: no answer within {LOOK:?}") }),
            Ok(Err(e)) => return Ok(Readiness::Unreachable { message: format!("{url}: {}", error_chain(&e)) }),
            Ok(Ok(response)) => response,
        };
        let status = response.status().as_u16();
        if status == probe.expected_status.unwrap_or(200) {
            return Ok(Readiness::Ready);
        }
        let body = response.text().await.unwrap_or_default();
        let body: String = body.chars().take(200).collect();
        Ok(Readiness::NotReady { message: format!("{url} answered {status}: {}", body.trim()) })
    }
}
