//! The driver: the real handlers of the four functions, run as Lambda runs them, on one in-memory world.
//!
//! Each invocation (a reconcile or power batch, a sweep, an API request) is a future polled by hand. Every port
//! call yields first, so with several invocations in flight the driver interleaves them call by call, choosing
//! the next to poll from the seeded stream: every order two concurrent Lambdas could take is reachable. When
//! nothing is in flight, virtual time jumps to the next event: a message becoming deliverable, the next sweep, the
//! next client request. Queues are consumed as Lambda's event source mappings consume them (batches of up to ten,
//! the reconcile queue one group at a time, deletes of everything but the reported failures, redelivery after the
//! visibility timeout), with each function's reserved concurrency.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use apiary_planner::Timestamp;
use apiary_ports::store::Key;
use apiary_ports::{Config, Deps};
use apiary_testkit::queue::QueueName;
use apiary_testkit::time::SplitMix;
use apiary_testkit::{World, ADMIN};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use chrono::TimeDelta;
use serde_json::Value;

use crate::clouds::SimClouds;
use crate::faults::{Faults, SimHook};

/// How the simulated deployment runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Every draw comes from this seed.
    pub seed: u64,
    /// The faults injected until [`Sim::quiet`].
    pub faults: Faults,
    /// Whether concurrent invocations interleave call by call (otherwise each runs to its end when polled).
    pub interleave: bool,
    /// Reserved concurrency of the reconcile and power functions.
    pub concurrency: usize,
    /// The queues' visibility timeout.
    pub visibility: TimeDelta,
    /// The sweep's rate.
    pub sweep_every: TimeDelta,
    /// How often the sweep makes a full pass.
    pub full_sweep_every: TimeDelta,
    /// `APIARY_MAX_RECHECK_SECONDS`.
    pub max_recheck_seconds: u32,
}

impl Options {
    /// The deployment as the template sets it up (visibility 360 s, a sweep every minute, a full pass every ten,
    /// concurrency 10), without faults, each invocation running to its end.
    pub fn deployed(seed: u64) -> Self {
        Self {
            seed,
            faults: Faults::none(),
            interleave: false,
            concurrency: 10,
            visibility: TimeDelta::seconds(360),
            sweep_every: TimeDelta::minutes(1),
            full_sweep_every: TimeDelta::minutes(10),
            max_recheck_seconds: 900,
        }
    }
}

/// A request a client makes through the API.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// `PUT /pools/{pool}` as the admin.
    PutPool {
        /// The pool.
        pool: String,
        /// Its spec.
        spec: Value,
    },
    /// `DELETE /pools/{pool}` as the admin.
    DeletePool {
        /// The pool.
        pool: String,
    },
    /// `PUT /pools/{pool}/claims/{claim}`.
    Claim {
        /// The pool.
        pool: String,
        /// The claim.
        claim: String,
        /// Who claims.
        owner: String,
        /// Its lifetime, if it asks for one.
        lifetime: Option<String>,
        /// Who else may use it.
        subjects: Vec<String>,
    },
    /// `PUT /claims/{claim}`: a claim by labels, to whichever pool carrying them serves it first. Its later
    /// requests name no pool (an empty `pool`), and go to `/claims/{claim}`.
    ClaimByLabels {
        /// The claim.
        claim: String,
        /// Who claims.
        owner: String,
        /// The labels its pool must carry.
        labels: std::collections::BTreeMap<String, String>,
        /// Its lifetime, if it asks for one.
        lifetime: Option<String>,
    },
    /// `PATCH /pools/{pool}/claims/{claim}`: a new lifetime, new subjects, or both.
    Change {
        /// The pool.
        pool: String,
        /// The claim.
        claim: String,
        /// Who asks: its owner, a subject, or someone the claim is not shared with.
        by: String,
        /// Its new lifetime.
        lifetime: Option<String>,
        /// Its new subjects.
        subjects: Option<Vec<String>>,
    },
    /// `DELETE /pools/{pool}/claims/{claim}`.
    Release {
        /// The pool.
        pool: String,
        /// The claim.
        claim: String,
        /// Who releases.
        owner: String,
    },
    /// `POST /pools/{pool}/claims/{claim}/hibernate` or `/resume`.
    Power {
        /// The pool.
        pool: String,
        /// The claim.
        claim: String,
        /// Who asks.
        owner: String,
        /// Hibernate (or resume).
        hibernate: bool,
    },
}

/// A claim's body as a claimant sends it: the fields it names, and no others.
fn claim_body(lifetime: Option<&String>, subjects: Option<&Vec<String>>) -> String {
    let mut body = serde_json::json!({});
    if let Some(l) = lifetime {
        body["lifetime"] = l.as_str().into();
    }
    if let Some(s) = subjects {
        body["subjects"] = s.clone().into();
    }
    body.to_string()
}

/// The path of claim `claim` of `pool`; of a claim by labels (no pool named), its own.
fn claim_path(pool: &str, claim: &str) -> String {
    if pool.is_empty() {
        format!("/claims/{claim}")
    } else {
        format!("/pools/{pool}/claims/{claim}")
    }
}

impl Request {
    /// The HTTP method, path, signer and body.
    fn http(&self) -> (&'static str, String, &str, String) {
        match self {
            Request::PutPool { pool, spec } => ("PUT", format!("/pools/{pool}"), ADMIN, spec.to_string()),
            Request::DeletePool { pool } => ("DELETE", format!("/pools/{pool}"), ADMIN, String::new()),
            Request::Claim { pool, claim, owner, lifetime, subjects } => {
                let body = claim_body(lifetime.as_ref(), Some(subjects).filter(|s| !s.is_empty()));
                ("PUT", claim_path(pool, claim), owner, body)
            }
            Request::ClaimByLabels { claim, owner, labels, lifetime } => {
                let mut body: Value = serde_json::from_str(&claim_body(lifetime.as_ref(), None)).unwrap_or_default();
                body["selector"] = serde_json::json!({ "matchLabels": labels });
                ("PUT", claim_path("", claim), owner, body.to_string())
            }
            Request::Change { pool, claim, by, lifetime, subjects } => {
                ("PATCH", claim_path(pool, claim), by, claim_body(lifetime.as_ref(), subjects.as_ref()))
            }
            Request::Release { pool, claim, owner } => ("DELETE", claim_path(pool, claim), owner, String::new()),
            Request::Power { pool, claim, owner, hibernate } => {
                let verb = if *hibernate { "hibernate" } else { "resume" };
                ("POST", format!("{}/{verb}", claim_path(pool, claim)), owner, String::new())
            }
        }
    }
}

/// An API answer the simulation received.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// When the request was made.
    pub at: Timestamp,
    /// The request.
    pub request: Request,
    /// The HTTP status.
    pub status: u16,
    /// The JSON body.
    pub body: Value,
}

/// What kind of invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A reconcile batch.
    Reconcile,
    /// A power batch.
    Power,
    /// A sweep.
    Sweep,
    /// An API request.
    Api,
}

enum Done {
    Batch(SqsEvent, SqsBatchResponse),
    Sweep,
    Api(Request, Timestamp, u16, Value),
}

struct Invocation {
    id: u64,
    kind: Kind,
    polls: u32,
    future: Pin<Box<dyn Future<Output = Done> + Send>>,
}

/// Counts of what ran.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Invocations started, by kind (reconcile, power, sweep, api).
    pub started: [u64; 4],
    /// Invocations killed.
    pub killed: u64,
    /// Polls (steps).
    pub polls: u64,
}

/// One simulated deployment.
pub struct Sim {
    /// The world the handlers act on.
    pub world: World,
    /// The handlers' dependencies.
    pub deps: Deps,
    /// The faults.
    pub hook: Arc<SimHook>,
    /// The clouds reached over HTTP: the fakes behind the real adapters.
    pub clouds: Arc<SimClouds>,
    /// Every API answer so far.
    pub answers: Vec<Answer>,
    /// What ran.
    pub stats: Stats,
    options: Options,
    rng: SplitMix,
    in_flight: Vec<Invocation>,
    next_id: u64,
    next_sweep: Timestamp,
    requests: Vec<(Timestamp, u64, Request)>,
    next_request: u64,
    /// What happened, invocation by invocation, when tracing.
    pub trace: Option<Vec<String>>,
    /// The clusters whose items were removed behind Apiary's back (pool, id): their end is not Apiary's to tell.
    pub forgotten: std::collections::BTreeSet<(String, String)>,
}

/// A poll that never finishes: an invocation waits on something the simulation does not drive.
const MAX_POLLS: u32 = 100_000;

impl Sim {
    /// A deployment starting at `start`.
    pub fn new(start: Timestamp, options: Options) -> Self {
        let hook = Arc::new(SimHook::new(options.seed, options.faults, options.interleave));
        let world = World::with_hook(start, hook.clone(), options.seed);
        let config = Config {
            max_recheck_seconds: options.max_recheck_seconds,
            full_sweep_every: options.full_sweep_every,
            // The fake clouds answer on loopback addresses, as on the local stack.
            url_policy: apiary_planner::validate::UrlPolicy { local: true, ..Default::default() },
            ..Config::named("apiary", &[ADMIN])
        };
        let mut deps = world.deps(config);
        let (store, time) = (world.store.clone(), world.time.clone());
        let installed: crate::clouds::Installed = Box::new(move |infra: &str| {
            let tables = store.tables();
            let at =
                tables.snapshots().into_iter().flat_map(|s| s.clusters).find(|c| c.infra_id == infra)?.installed_at?;
            (time.now() - at).to_std().ok()
        });
        let clouds = Arc::new(SimClouds::new(world.time.clone(), hook.clone(), installed));
        // The adapters' clients are built in process: nothing here can fail but a broken build.
        if let Ok(platforms) = clouds.platforms(&deps.platforms) {
            deps.platforms = Arc::new(platforms);
        }
        Self {
            world,
            deps,
            clouds,
            hook,
            answers: vec![],
            stats: Stats::default(),
            rng: SplitMix::new(options.seed),
            in_flight: vec![],
            next_id: 0,
            next_sweep: start,
            requests: vec![],
            next_request: 0,
            trace: None,
            forgotten: Default::default(),
            options,
        }
    }

    /// The current virtual time.
    pub fn now(&self) -> Timestamp {
        self.world.now()
    }

    /// Makes `request` at `at`.
    pub fn request(&mut self, at: Timestamp, request: Request) {
        self.next_request += 1;
        self.requests.push((at, self.next_request, request));
        self.requests.sort_by_key(|r| std::cmp::Reverse((r.0, r.1)));
    }

    /// Turns the faults off: from now on every call succeeds, every transition takes its usual time, and every
    /// harmed machine of the fake clouds behaves again.
    pub fn quiet(&mut self) {
        self.hook.set_active(false);
        self.clouds.heal();
    }

    /// Invocations in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    fn running(&self, kind: Kind) -> usize {
        self.in_flight.iter().filter(|i| i.kind == kind).count()
    }

    fn note(&mut self, what: impl FnOnce() -> String) {
        if let Some(t) = &mut self.trace {
            let now = self.world.now().format("%H:%M:%S%.3f");
            t.push(format!("{now} {}", what()));
        }
    }

    fn start(&mut self, kind: Kind, future: Pin<Box<dyn Future<Output = Done> + Send>>) {
        self.next_id += 1;
        let id = self.next_id;
        self.note(|| format!("#{id} {kind:?} starts"));
        self.stats.started[kind as usize] += 1;
        self.in_flight.push(Invocation { id: self.next_id, kind, polls: 0, future });
    }

    /// Removes one unclaimed, live cluster's item behind Apiary's back: its machines stay, with no cluster.
    fn forget_a_cluster(&mut self) {
        let tables = self.world.store.tables();
        let live: Vec<(String, String)> = tables
            .snapshots()
            .into_iter()
            .flat_map(|s| {
                let pool = s.pool.name.clone();
                s.clusters.into_iter().filter(|c| !c.deleting && c.claim.is_none()).map(move |c| (pool.clone(), c.id))
            })
            .collect();
        if live.is_empty() {
            return;
        }
        let (pool, cluster) = live[self.rng.below(live.len() as u64) as usize].clone();
        self.world.store.remove(&pool, &Key::Cluster(cluster.clone()));
        self.forgotten.insert((pool.clone(), cluster.clone()));
        self.hook.forgot();
        self.note(|| format!("forgot {pool}/{cluster} behind Apiary's back"));
    }

    /// Denies a pool's role, or gives it back: its cloud calls are refused meanwhile.
    fn toggle_a_role(&mut self) {
        let pools: Vec<String> = self.world.store.tables().snapshots().into_iter().map(|s| s.pool.name).collect();
        if pools.is_empty() {
            return;
        }
        let pool = pools[self.rng.below(pools.len() as u64) as usize].clone();
        let denied = self.hook.toggle_role(&pool);
        self.note(|| format!("the role of {pool} is {}", if denied { "denied" } else { "given back" }));
    }

    /// Starts every invocation that is due: the sweep, the client requests, and queue batches up to each
    /// function's concurrency.
    fn start_due(&mut self) {
        let now = self.now();
        if self.next_sweep <= now && self.running(Kind::Sweep) == 0 {
            self.next_sweep = now + self.options.sweep_every;
            let odds = self.hook.harm();
            self.clouds.harm(&mut self.rng, odds, odds);
            if self.hook.forget() > 0.0 && self.rng.chance(self.hook.forget()) {
                self.forget_a_cluster();
            }
            if self.hook.deny_role() > 0.0 && self.rng.chance(self.hook.deny_role()) {
                self.toggle_a_role();
            }
            let deps = self.deps.clone();
            self.start(
                Kind::Sweep,
                Box::pin(async move {
                    // A failed sweep is retried by the next one (the schedule's retries are off).
                    let _ = timeouts::run(&deps).await;
                    Done::Sweep
                }),
            );
        }
        while self.requests.last().is_some_and(|(at, _, _)| *at <= now) {
            let Some((_, _, request)) = self.requests.pop() else { break };
            let deps = self.deps.clone();
            self.start(
                Kind::Api,
                Box::pin(async move {
                    let (method, path, who, body) = request.http();
                    let req = claim_api::api_request(method, &path, Some(who), body.into_bytes());
                    let res = claim_api::handle(&deps, req).await;
                    let status = res.status().as_u16();
                    let text = match res.into_body() {
                        lambda_http::Body::Text(t) => t,
                        lambda_http::Body::Binary(b) => String::from_utf8_lossy(&b).into_owned(),
                        lambda_http::Body::Empty => String::new(),
                    };
                    Done::Api(request, now, status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
                }),
            );
        }
        for (kind, queue) in [(Kind::Reconcile, QueueName::Reconcile), (Kind::Power, QueueName::Power)] {
            while self.running(kind) < self.options.concurrency {
                let rng = &mut self.rng;
                let event = self.world.queue.receive(queue, 10, self.options.visibility, &mut |n| {
                    usize::try_from(rng.below(n as u64)).unwrap_or_default()
                });
                if event.records.is_empty() {
                    break;
                }
                let bodies: Vec<String> = event
                    .records
                    .iter()
                    .map(|r| {
                        format!("{}:{}", r.message_id.clone().unwrap_or_default(), r.body.clone().unwrap_or_default())
                    })
                    .collect();
                self.note(|| format!("{kind:?} batch {}", bodies.join(" ")));
                let deps = self.deps.clone();
                let future: Pin<Box<dyn Future<Output = Done> + Send>> = match kind {
                    Kind::Reconcile => Box::pin(async move {
                        let response = reconcile::handle(&deps, event.clone()).await;
                        Done::Batch(event, response)
                    }),
                    _ => Box::pin(async move {
                        let response = power::handle(&deps, event.clone()).await;
                        Done::Batch(event, response)
                    }),
                };
                self.start(kind, future);
            }
        }
    }

    /// When something next happens by itself: a message becomes deliverable, the sweep runs, a request is made.
    fn next_event(&self) -> Timestamp {
        let mut next = self.next_sweep;
        if let Some((at, _, _)) = self.requests.last() {
            next = next.min(*at);
        }
        if let Some(at) = self.world.queue.next_visible() {
            next = next.min(at);
        }
        next
    }

    /// One step: starts what is due, then polls one invocation in flight (chosen by the seed), or, when none is,
    /// moves time to the next event. `false` once time would pass `horizon`.
    pub fn step(&mut self, horizon: Timestamp) -> bool {
        self.start_due();
        if self.in_flight.is_empty() {
            let next = self.next_event();
            if next > horizon {
                self.world.time.set(horizon);
                return false;
            }
            self.world.time.set(next);
            return true;
        }
        // A call takes a few milliseconds.
        self.world.time.advance(TimeDelta::milliseconds(1 + self.rng.below(20) as i64));
        let i = usize::try_from(self.rng.below(self.in_flight.len() as u64)).unwrap_or_default();
        let id = self.in_flight[i].id;
        self.hook.enter_invocation(id);
        self.stats.polls += 1;
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        match self.in_flight[i].future.as_mut().poll(&mut cx) {
            Poll::Ready(done) => {
                self.in_flight.swap_remove(i);
                self.note(|| format!("#{id} done"));
                self.finish(done);
            }
            Poll::Pending if self.hook.take_killed(id) => {
                // Killed between two calls: what it wrote stands, what it held comes back after the visibility
                // timeout.
                self.in_flight.swap_remove(i);
                self.stats.killed += 1;
                self.note(|| format!("#{id} killed"));
            }
            Poll::Pending => {
                let inv = &mut self.in_flight[i];
                inv.polls += 1;
                assert!(
                    inv.polls < MAX_POLLS,
                    "a {:?} invocation never finishes: it waits on something outside the simulation",
                    inv.kind
                );
            }
        }
        true
    }

    fn finish(&mut self, done: Done) {
        match done {
            Done::Batch(event, response) => {
                let failed: Vec<&str> =
                    response.batch_item_failures.iter().map(|f| f.item_identifier.as_str()).collect();
                if !failed.is_empty() {
                    self.note(|| format!("failed messages {failed:?}"));
                }
                self.world.queue.settle(&event, &response)
            }
            Done::Sweep => {}
            Done::Api(request, at, status, body) => {
                self.note(|| format!("api {request:?} -> {status}"));
                self.answers.push(Answer { at, request, status, body })
            }
        }
    }

    /// Runs until `until`, calling `check` after every step (an invariant check; its error stops the run).
    pub fn run_until<E>(&mut self, until: Timestamp, mut check: impl FnMut(&Sim) -> Result<(), E>) -> Result<(), E> {
        while self.step(until) {
            check(self)?;
        }
        // Finish what is in flight at the horizon.
        while !self.in_flight.is_empty() {
            self.step(until);
            check(self)?;
        }
        Ok(())
    }

    /// Runs until `until` without checks.
    pub fn run(&mut self, until: Timestamp) {
        let _ = self.run_until(until, |_| Ok::<(), ()>(()));
    }

    /// Runs for `d` from now.
    pub fn run_for(&mut self, d: TimeDelta) {
        let until = self.now() + d;
        self.run(until);
    }
}
