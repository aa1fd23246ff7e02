//! A pool's readiness check: [`Checks`] runs the one the pool sets, the HTTPS probe here or the Kubernetes check
//! ([`crate::kubernetes`]).
//!
//! The HTTPS probe (`readiness.https`): one `GET` of the URL its template makes for the cluster, trusting
//! the pool's CA bundle besides the system's roots. The expected status is ready; another status is not ready
//! (with what the cluster answered); no answer at all (refused, timed out, an untrusted certificate) is
//! unreachable. One attempt per look, bounded like every call: the power function looks again every 15 seconds
//! until the pool's resume timeout.

use apiary_planner::power::Readiness;
use apiary_planner::HttpsProbe;
use apiary_ports::platform::{NodesFound, ReadinessCheck, Target};
use apiary_ports::secrets::Secrets;
use apiary_ports::{Error, Result};
use async_trait::async_trait;

use crate::http::{look_once, Bundles, Http};
use crate::kubernetes::KubernetesReadiness;

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
        .and_then(|r| r.https.as_ref())
        .ok_or_else(|| Error::Config(format!("pool {} has no https readiness check", t.pool)))
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
        let (status, body) = match look_once(&http, &url, http.client().get(&url)).await {
            Ok(answer) => answer,
            Err(message) => return Ok(Readiness::Unreachable { message }),
        };
        if status == probe.expected_status.unwrap_or(200) {
            return Ok(Readiness::Ready);
        }
        let body = crate::http::excerpt(&String::from_utf8_lossy(&body));
        Ok(Readiness::NotReady { message: format!("{url} answered {status}: {body}") })
    }
}

/// The readiness checks a pool may set, each run for the pools that set it.
pub struct Checks {
    https: HttpsReadiness,
    kubernetes: KubernetesReadiness,
}

impl Checks {
    /// Checks through clients like `http`, reading the Kubernetes check's credentials through `secrets`.
    pub fn new(http: Http, secrets: std::sync::Arc<dyn Secrets>) -> Self {
        Self { https: HttpsReadiness::new(http.clone()), kubernetes: KubernetesReadiness::new(http, secrets) }
    }

    fn kubernetes(t: &Target<'_>) -> bool {
        t.spec.readiness.as_ref().is_some_and(|r| r.kubernetes.is_some())
    }
}

#[async_trait]
impl ReadinessCheck for Checks {
    async fn check(&self, t: Target<'_>) -> Result<Readiness> {
        if Self::kubernetes(&t) {
            self.kubernetes.check(t).await
        } else {
            self.https.check(t).await
        }
    }

    async fn nodes(&self, t: Target<'_>) -> Result<Option<NodesFound>> {
        if Self::kubernetes(&t) {
            self.kubernetes.nodes(t).await
        } else {
            Ok(None)
        }
    }
}
