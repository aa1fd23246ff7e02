//! A fake of the clusters' API servers, for readiness checks: `GET /{infraId}/readyz` over HTTPS (a certificate
//! issued by a CA of its own, [`FakeClusterApi::ca_bundle`]), answering `200 ok` once the cluster is ready and
//! `503` until then. A cluster is ready `ready_after` its first look, unless it never becomes ready or flaps
//! (ready and not, look after look).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use crate::common::{Clock, Log};
use crate::server::{serve_tls_on, Request, Response};

struct State {
    clock: Clock,
    ready_after: Duration,
    first_look: BTreeMap<String, Duration>,
    never: BTreeSet<String>,
    flapping: BTreeMap<String, bool>,
    log: Log,
}

/// The fake cluster APIs.
#[derive(Clone)]
pub struct FakeClusterApi {
    state: Arc<Mutex<State>>,
    addr: SocketAddr,
    ca_pem: Arc<String>,
}

impl FakeClusterApi {
    /// Starts the fake on a free port of 127.0.0.1: each cluster ready `ready_after` its first look.
    pub async fn start(ready_after: Duration) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let authority =
            crate::tls::authority("Fake cluster CA", &["127.0.0.1", "localhost"]).map_err(std::io::Error::other)?;
        let state = State {
            clock: Clock::wall(),
            ready_after,
            first_look: BTreeMap::new(),
            never: BTreeSet::new(),
            flapping: BTreeMap::new(),
            log: Log::default(),
        };
        let fake = Self {
            state: Arc::new(Mutex::new(state)),
            addr: listener.local_addr()?,
            ca_pem: Arc::new(authority.ca_pem),
        };
        let state = fake.state.clone();
        serve_tls_on(listener, authority.server, Arc::new(move |req: Request| handle(&state, req)))?;
        Ok(fake)
    }

    /// The probe URL template a pool's `readiness.https.url` names.
    pub fn url_template(&self) -> String {
        format!("https://{}/{{infraId}}/readyz", self.addr)
    }

    /// The PEM certificate of the CA that issued the fake's: a pool's `readiness.https.caBundle`.
    pub fn ca_bundle(&self) -> String {
        self.ca_pem.as_ref().clone()
    }

    /// Cluster `infra_id` never becomes ready.
    pub fn never(&self, infra_id: &str) {
        let mut s = self.lock();
        s.flapping.remove(infra_id);
        s.never.insert(infra_id.to_owned());
    }

    /// Cluster `infra_id` answers ready and not ready in turn.
    pub fn flap(&self, infra_id: &str) {
        let mut s = self.lock();
        s.never.remove(infra_id);
        s.flapping.insert(infra_id.to_owned(), false);
    }

    /// Moves the clock on.
    pub fn advance(&self, by: Duration) {
        self.lock().clock.advance(by);
    }

    /// Requests so far, as `METHOD path`, and clears the log.
    pub fn take_log(&self) -> Vec<String> {
        self.lock().log.take()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn handle(state: &Mutex<State>, req: Request) -> Response {
    let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
    s.log.push(&req, None);
    let segments: Vec<&str> = req.path.split('/').filter(|p| !p.is_empty()).collect();
    let infra = match (req.method.as_str(), segments.as_slice()) {
        ("GET", [infra, "readyz"]) => (*infra).to_owned(),
        _ => return Response::json(404, &json!({"message": format!("no route {}", req.path)})),
    };
    let now = s.clock.now();
    let first = *s.first_look.entry(infra.clone()).or_insert(now);
    let ready = if s.never.contains(&infra) {
        false
    } else if let Some(up) = s.flapping.get_mut(&infra) {
        *up = !*up;
        *up
    } else {
        now >= first + s.ready_after
    };
    if ready {
        Response { status: 200, headers: vec![], body: b"ok".to_vec() }
    } else {
        Response { status: 503, headers: vec![], body: b"[-]etcd failed: reason withheld".to_vec() }
    }
}
