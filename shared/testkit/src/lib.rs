//! In-memory ports with the real services' semantics, for unit tests of the functions and for the whole-system
//! simulation (`apiary-dst`).
//!
//! - [`MemStore`](store::MemStore): DynamoDB's conditions ([`Cond::holds`](apiary_ports::store::Cond::holds)),
//!   all-or-nothing transactions, a lost condition as `Error::Conflict`, items over 400 KB refused.
//! - [`MemQueue`](queue::MemQueue): SQS's at-least-once delivery: per-message delays, visibility timeouts,
//!   redelivery of what a handler did not delete, a dead-letter queue after [`queue::MAX_RECEIVES`] receives,
//!   FIFO order and one batch in flight per message group on the reconcile queue.
//! - [`Cloud`](cloud::Cloud): machines with EC2's states and transition rules, client tokens, timed transitions,
//!   per-machine refusals; the `aws` platform's actuator and provisioner.
//! - [`Receiver`](receiver::Receiver): a pool's claim notifications received, answering as told.
//! - [`MemSchedules`](schedules::MemSchedules) and [`VirtualClock`](time::VirtualClock) on shared virtual
//!   [`Time`](time::Time); [`MemSecrets`](secrets::MemSecrets).
//!
//! [`events`] builds the events Lambda hands the functions from AWS's own sample documents.
//!
//! Every port call passes through a [`Hook`](hook::Hook) first. The default lets everything through at once; a
//! simulation's hook yields (so concurrent invocations interleave between any two calls), fails calls, kills
//! the invocation, and shapes the cloud's timings and refusals. [`World`] builds all of it and the
//! [`Deps`](apiary_ports::Deps) the handlers take.

pub mod cloud;
pub mod events;
pub mod fixtures;
pub mod hook;
pub mod queue;
pub mod receiver;
pub mod schedules;
pub mod secrets;
pub mod store;
pub mod time;

use std::sync::Arc;

use apiary_planner::Timestamp;
use apiary_ports::metrics::{Memory, Metrics, Sink};
use apiary_ports::platform::Platforms;
use apiary_ports::{Config, Deps};

use crate::cloud::Cloud;
use crate::hook::{Hook, NoFaults};
use crate::queue::MemQueue;
use crate::receiver::Receiver;
use crate::schedules::MemSchedules;
use crate::store::MemStore;
use crate::time::{Time, VirtualClock};

/// A principal allowed to manage pools in tests.
pub const ADMIN: &str = "arn:aws:iam::123456789012:user/admin";

/// One in-memory world: the table, the queues, the cloud, the schedules and the clock, sharing one virtual time
/// and one hook.
#[derive(Clone)]
pub struct World {
    /// The virtual time every part reads.
    pub time: Arc<Time>,
    /// The table.
    pub store: Arc<MemStore>,
    /// The queues.
    pub queue: Arc<MemQueue>,
    /// The cloud (the `aws` platform).
    pub cloud: Arc<Cloud>,
    /// The scheduler.
    pub schedules: Arc<MemSchedules>,
    /// What pools' `notify` webhooks receive.
    pub receiver: Arc<Receiver>,
    /// The clock handlers read.
    pub clock: Arc<VirtualClock>,
    /// The metrics handlers wrote.
    pub metrics: Memory,
    /// Secrets Manager (the claim API reads claimed clusters' credentials from it).
    pub secrets: Arc<secrets::MemSecrets>,
}

impl World {
    /// A world at `start` where every call goes through at once.
    pub fn new(start: Timestamp) -> Self {
        Self::with_hook(start, Arc::new(NoFaults), 1)
    }

    /// A world at `start` whose calls pass through `hook`; `seed` draws the clock's seeds.
    pub fn with_hook(start: Timestamp, hook: Arc<dyn Hook>, seed: u64) -> Self {
        let time = Arc::new(Time::new(start));
        Self {
            store: Arc::new(MemStore::new(hook.clone())),
            queue: Arc::new(MemQueue::new(time.clone(), hook.clone())),
            cloud: Arc::new(Cloud::new(time.clone(), hook.clone())),
            receiver: Arc::new(Receiver::new(hook.clone())),
            schedules: Arc::new(MemSchedules::new(hook)),
            clock: Arc::new(VirtualClock::new(time.clone(), seed)),
            metrics: Memory::default(),
            secrets: Arc::default(),
            time,
        }
    }

    /// The handlers' dependencies on this world, for a deployment `config` describes (its metrics sink is this
    /// world's memory). The cloud drives `aws` pools.
    pub fn deps(&self, config: Config) -> Deps {
        let config = Config { metrics: Sink::Memory(self.metrics.clone()), ..config };
        Deps {
            store: self.store.clone(),
            queue: self.queue.clone(),
            platforms: Arc::new(Platforms::new().with("aws", self.cloud.clone()).with_notifier(self.receiver.clone())),
            schedules: self.schedules.clone(),
            metrics: Arc::new(Metrics {
                stack: config.stack.clone(),
                sink: config.metrics.clone(),
                monitoring: config.monitoring,
            }),
            clock: self.clock.clone(),
            secrets: self.secrets.clone(),
            config: Arc::new(config),
        }
    }

    /// [`Self::deps`] for a stack named `apiary` whose admin is [`ADMIN`], re-checking clusters at most every
    /// `max_recheck_seconds`.
    pub fn default_deps(&self, max_recheck_seconds: u32) -> Deps {
        self.deps(Config { max_recheck_seconds, ..Config::named("apiary", &[ADMIN]) })
    }

    /// The current virtual time.
    pub fn now(&self) -> Timestamp {
        self.time.now()
    }
}
