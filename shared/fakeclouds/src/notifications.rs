//! A reference receiver of Apiary's claim notifications (a pool's `notify` webhooks), for local use and tests: it
//! verifies each request's Standard Webhooks signature as a receiver must ([`crate::webhook::verify`]), drops a
//! notification it already has by its `webhook-id`, keeps what it received, and answers `204`; a bad signature is
//! `401`. It can be told to fail (a receiver down), to see Apiary try again.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::common::Clock;
use crate::server::{serve_on, Request, Response};
use crate::webhook::verify;

/// One notification received and verified.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    /// Its `webhook-id`: the event's key in the pool's trail.
    pub id: String,
    /// Its body: `type`, `timestamp` and `data`.
    pub body: Value,
}

struct State {
    key: String,
    clock: Clock,
    /// The Unix time, in seconds, at which `clock` read zero.
    epoch: u64,
    down: bool,
    received: Vec<Received>,
    duplicates: u64,
    refused: Vec<String>,
    failing: u32,
    /// How many posts were answered 503 (down, or failing).
    failed: u64,
}

impl State {
    fn new(key: &str, clock: Clock, epoch: u64) -> Self {
        let (received, refused) = (vec![], vec![]);
        Self { key: key.to_owned(), clock, epoch, down: false, received, duplicates: 0, refused, failing: 0, failed: 0 }
    }
}

/// The receiver, served on 127.0.0.1.
#[derive(Clone)]
pub struct FakeReceiver {
    state: Arc<Mutex<State>>,
    addr: SocketAddr,
}

impl FakeReceiver {
    /// Starts the receiver on a free port of 127.0.0.1, verifying with `key` (`whsec_<base64>`), on the wall clock.
    pub async fn start(key: &str) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let epoch = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let state = Arc::new(Mutex::new(State::new(key, Clock::wall(), epoch)));
        let served = state.clone();
        let name = format!("receiver-{}", listener.local_addr()?.port());
        let addr = serve_on(
            listener,
            Arc::new(move |req: Request| {
                // Every post, as it came, for the scan for leaked secrets (`canary`).
                crate::canary::keep("notifications", &name, &String::from_utf8_lossy(&req.body));
                handle(&served, &req)
            }),
        )?;
        Ok(Self { state, addr })
    }

    /// The receiver at `addr`, not served ([`FakeReceiver::handle`] answers), on `clock`, which read zero at Unix
    /// time `epoch` (seconds): the simulation's.
    pub fn new(key: &str, clock: Clock, epoch: u64, addr: SocketAddr) -> Self {
        Self { state: Arc::new(Mutex::new(State::new(key, clock, epoch))), addr }
    }

    /// Answers one request, as the server does.
    pub fn handle(&self, req: &Request) -> Response {
        handle(&self.state, req)
    }

    /// Every notification is answered `503` until [`FakeReceiver::up`].
    pub fn down(&self) {
        self.lock().down = true;
    }

    /// Notifications are answered again.
    pub fn up(&self) {
        self.lock().down = false;
    }

    /// The URL a pool's `notify[].url` names.
    pub fn url(&self) -> String {
        format!("http://{}/notifications", self.addr)
    }

    /// Every notification received and verified, once each, in order.
    pub fn received(&self) -> Vec<Received> {
        self.lock().received.clone()
    }

    /// How many notifications came again (dropped by their `webhook-id`).
    pub fn duplicates(&self) -> u64 {
        self.lock().duplicates
    }

    /// Why each refused request was refused.
    pub fn refused(&self) -> Vec<String> {
        self.lock().refused.clone()
    }

    /// How many posts were answered `503`.
    pub fn failed(&self) -> u64 {
        self.lock().failed
    }

    /// The next `n` notifications are answered `503`, as a receiver that is down.
    pub fn fail_next(&self, n: u32) {
        self.lock().failing = n;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn handle(state: &Mutex<State>, req: &Request) -> Response {
    let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
    if req.method != "POST" {
        return Response::json(405, &json!({"message": "POST only"}));
    }
    let now = s.epoch + s.clock.now().as_secs();
    if let Err(why) = verify(&s.key, req, now) {
        s.refused.push(why.clone());
        return Response::json(401, &json!({"message": why}));
    }
    if s.down || s.failing > 0 {
        s.failing = s.failing.saturating_sub(1);
        s.failed += 1;
        return Response::json(503, &json!({"message": "the receiver is down"}));
    }
    let id = req.headers.get("webhook-id").cloned().unwrap_or_default();
    if s.received.iter().any(|r| r.id == id) {
        s.duplicates += 1;
        return Response { status: 204, headers: vec![], body: vec![] };
    }
    let body = req.json();
    s.received.push(Received { id, body });
    Response { status: 204, headers: vec![], body: vec![] }
}
