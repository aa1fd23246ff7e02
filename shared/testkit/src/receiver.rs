//! A receiver of a pool's claim notifications, in memory: the [`Notifier`] port answered as a webhook would,
//! every post recorded, with answers that fail on demand (a receiver down for a while, or one that refuses).

use std::sync::{Arc, Mutex};

use apiary_planner::notify::NotifyHook;
use apiary_ports::platform::Notifier;
use apiary_ports::Result;
use async_trait::async_trait;
use serde_json::Value;

use crate::hook::{enter, leave, Hook, Op};

/// One post the receiver answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Post {
    /// The pool whose hook it was.
    pub pool: String,
    /// The hook's URL.
    pub url: String,
    /// Its `webhook-id`.
    pub id: String,
    /// Its body.
    pub body: Value,
    /// What the receiver answered.
    pub status: u16,
}

#[derive(Default)]
struct State {
    posts: Vec<Post>,
    /// Posts still to be answered with this status, before the receiver answers 204 again.
    failing: Vec<u16>,
    /// Answer every post with this status (a receiver that is down).
    down: Option<u16>,
}

/// The receiver.
pub struct Receiver {
    state: Mutex<State>,
    hook: Arc<dyn Hook>,
}

impl Receiver {
    /// A receiver answering 204, its calls passing through `hook`.
    pub fn new(hook: Arc<dyn Hook>) -> Self {
        Self { state: Mutex::new(State::default()), hook }
    }

    /// Every post so far, in order.
    pub fn posts(&self) -> Vec<Post> {
        self.lock().posts.clone()
    }

    /// The next `n` posts are answered `status`.
    pub fn fail_next(&self, n: usize, status: u16) {
        self.lock().failing.extend(std::iter::repeat_n(status, n));
    }

    /// Every post is answered `status` until [`Receiver::up`].
    pub fn down(&self, status: u16) {
        self.lock().down = Some(status);
    }

    /// Posts are answered 204 again.
    pub fn up(&self) {
        self.lock().down = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl Notifier for Receiver {
    async fn post(&self, pool: &str, hook: &NotifyHook, id: &str, _timestamp: i64, body: &[u8]) -> Result<u16> {
        enter(self.hook.as_ref(), Op::CloudWrite).await?;
        let status = {
            let mut state = self.lock();
            let status = match state.down {
                Some(status) => status,
                None if !state.failing.is_empty() => state.failing.remove(0),
                None => 204,
            };
            let body = serde_json::from_slice(body).unwrap_or(Value::Null);
            state.posts.push(Post { pool: pool.to_owned(), url: hook.url.clone(), id: id.to_owned(), body, status });
            status
        };
        leave(self.hook.as_ref(), Op::CloudWrite, Ok(status))
    }
}
