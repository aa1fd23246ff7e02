//! The fault hook: every in-memory port call asks it first, so a simulation decides, call by call, whether the
//! call goes through, waits for other invocations to run, fails, or never returns (its invocation was killed).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use apiary_ports::{Error, Result};
use chrono::TimeDelta;

/// A port call, as the hook sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// A table read (Query, GetItem).
    Read,
    /// A table write (PutItem, DeleteItem, TransactWriteItems).
    Write,
    /// A message sent to a queue.
    Send,
    /// A look at a cluster's machines (DescribeInstances).
    Describe,
    /// A start or stop of machines.
    Change,
    /// A cluster's provisioning (RunInstances).
    Provision,
    /// A termination of machines.
    Terminate,
    /// A schedule sync.
    Schedules,
    /// A read of a cloud's REST API (a GET).
    CloudRead,
    /// A change through a cloud's REST API (any other method).
    CloudWrite,
}

impl Op {
    /// Whether the call changes state (so "it landed but the answer was lost" is possible).
    pub fn changes_state(self) -> bool {
        matches!(
            self,
            Op::Write | Op::Send | Op::Change | Op::Provision | Op::Terminate | Op::Schedules | Op::CloudWrite
        )
    }
}

/// What happens to a call before it runs.
#[derive(Debug)]
pub enum Gate {
    /// It runs at once.
    Proceed,
    /// It runs after the invocation yields once (others may run in between).
    Yield,
    /// It fails with this error and changes nothing.
    Fail(Error),
    /// It never returns: the invocation making it is killed here.
    Kill,
}

/// A machine transition, for its duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transition {
    /// Launch to running.
    Launch,
    /// Start to running.
    Start,
    /// Stop to stopped.
    Stop,
    /// Terminate to terminated.
    Terminate,
}

/// A change a machine may refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Change {
    /// Start.
    Start,
    /// Stop.
    Stop,
    /// Terminate.
    Terminate,
}

/// Decides the fate of each port call and shapes the cloud. Every method has the fault-free answer as default.
pub trait Hook: Send + Sync {
    /// Before a call of `op`.
    fn before(&self, op: Op) -> Gate {
        let _ = op;
        Gate::Proceed
    }
    /// After a call of `op` that changed state: `Some` turns its success into that error (the call landed; its
    /// answer was lost, as when a request times out after the service acted).
    fn after(&self, op: Op) -> Option<Error> {
        let _ = op;
        None
    }
    /// How long a machine transition takes, given the cloud's usual time; `None`: it never completes.
    fn transition(&self, kind: Transition, usual: TimeDelta) -> Option<TimeDelta> {
        let _ = kind;
        Some(usual)
    }
    /// Whether the cloud refuses `change` on `machine`; the refusal's message.
    fn refuses(&self, machine: &str, change: Change) -> Option<String> {
        let _ = (machine, change);
        None
    }
    /// Whether the cloud refuses `pool`'s credentials now (its role cannot be assumed); the refusal's message.
    fn credentials(&self, pool: &str) -> Option<String> {
        let _ = pool;
        None
    }
    /// Whether a standard queue delivers this receive of a message twice.
    fn duplicate(&self) -> bool {
        false
    }
    /// How much later than asked a message being sent becomes deliverable (network and poller lag).
    fn send_delay(&self) -> TimeDelta {
        TimeDelta::zero()
    }
}

/// No faults: every call goes through at once, transitions take their usual time.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoFaults;

impl Hook for NoFaults {}

/// Refuses calls of one kind as a service does for a moment, past the SDK's own retries (a throttled partition, a
/// queue that did not answer): retryable, nothing changed. Unarmed, every call goes through; [`Refuse::first`]
/// refuses the next `n` calls of its kind, [`Refuse::nth`] only the `n`-th from now.
#[derive(Debug)]
pub struct Refuse {
    op: Op,
    skip: std::sync::atomic::AtomicU32,
    refuse: std::sync::atomic::AtomicU32,
}

impl Refuse {
    /// Unarmed, for calls of `op`.
    pub fn of(op: Op) -> std::sync::Arc<Self> {
        std::sync::Arc::new(Self { op, skip: 0.into(), refuse: 0.into() })
    }

    /// Refuses the next `n` calls.
    pub fn first(&self, n: u32) {
        self.arm(0, n);
    }

    /// Refuses the `n`-th call from now (the first is 1), and no other.
    pub fn nth(&self, n: u32) {
        self.arm(n.saturating_sub(1), u32::from(n > 0));
    }

    fn arm(&self, skip: u32, refuse: u32) {
        use std::sync::atomic::Ordering::SeqCst;
        self.skip.store(skip, SeqCst);
        self.refuse.store(refuse, SeqCst);
    }
}

impl Hook for Refuse {
    fn before(&self, op: Op) -> Gate {
        use std::sync::atomic::Ordering::SeqCst;
        let less = |n: &std::sync::atomic::AtomicU32| n.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1)).is_ok();
        if op != self.op || less(&self.skip) || !less(&self.refuse) {
            return Gate::Proceed;
        }
        let call = match op {
            Op::Read => "dynamodb:Query",
            Op::Write => "dynamodb:TransactWriteItems",
            Op::Send => "sqs:SendMessage",
            _ => "the cloud's API",
        };
        Gate::Fail(Error::service(call, "ThrottlingException: Rate exceeded", true))
    }
}

/// Passes `op` through `hook`: returns once the call may run, or with the error it must fail with; never
/// returns when the hook kills the invocation.
pub async fn enter(hook: &dyn Hook, op: Op) -> Result<()> {
    match hook.before(op) {
        Gate::Proceed => Ok(()),
        Gate::Yield => {
            YieldOnce(false).await;
            Ok(())
        }
        Gate::Fail(e) => Err(e),
        Gate::Kill => std::future::pending().await,
    }
}

/// The answer to a call of `op` that ran: `result`, unless the hook loses it.
pub fn leave<T>(hook: &dyn Hook, op: Op, result: Result<T>) -> Result<T> {
    match result {
        Ok(v) => match hook.after(op) {
            Some(e) if op.changes_state() => Err(e),
            _ => Ok(v),
        },
        Err(e) => Err(e),
    }
}

/// Pending once (asking to be polled again at once), then ready.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuse_refuses_the_calls_it_is_armed_for_and_no_others() {
        let refuse = Refuse::of(Op::Read);
        let refused = |n: usize| -> Vec<bool> {
            (0..n).map(|_| matches!(refuse.before(Op::Read), Gate::Fail(e) if e.is_retryable())).collect()
        };
        assert_eq!(refused(2), [false, false], "unarmed");
        refuse.first(2);
        assert!(matches!(refuse.before(Op::Write), Gate::Proceed), "another kind of call");
        assert_eq!(refused(3), [true, true, false]);
        refuse.nth(3);
        assert_eq!(refused(4), [false, false, true, false]);
    }
}
