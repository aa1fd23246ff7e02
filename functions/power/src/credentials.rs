//! What a message's calls said of the pool's credentials, and the pool's `AuthenticationFailure` condition that
//! records it.

use apiary_planner::Pool;
use apiary_ports::store::{Cond, Item, Write};
use apiary_ports::{on_conflict, retry};
use apiary_ports::{Deps, Error, Result};

/// What became of this invocation's calls with the pool's credentials.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum Credentials {
    /// No call was answered.
    #[default]
    Untried,
    /// A call was answered: the credentials were accepted.
    Accepted,
    /// The cloud refused them ([`Error::Credentials`]), for this reason.
    Refused(String),
}

impl Credentials {
    /// What two runs' answers said together: a refusal, else an acceptance.
    pub(crate) fn merge(self, other: Credentials) -> Credentials {
        match (self, other) {
            (refused @ Credentials::Refused(_), _) | (_, refused @ Credentials::Refused(_)) => refused,
            (Credentials::Accepted, _) | (_, Credentials::Accepted) => Credentials::Accepted,
            _ => Credentials::Untried,
        }
    }

    /// Notes what a call's `result` says of the credentials: a refusal stays noted for the invocation.
    pub(crate) fn saw<T>(&mut self, result: &Result<T>) {
        match result {
            Err(Error::Credentials(why)) => *self = Credentials::Refused(why.clone()),
            Ok(_) if *self == Credentials::Untried => *self = Credentials::Accepted,
            _ => {}
        }
    }
}

/// Puts what `creds` says on the pool's `AuthenticationFailure` condition, when it changes it: a write
/// conditional on the pool's revision, re-read when lost. A pool whose calls keep being refused, or keep
/// succeeding, is not written again. A write that fails is logged and left to the next call.
pub(crate) async fn record(deps: &Deps, pool: &Pool, creds: &Credentials) {
    let refused = match creds {
        Credentials::Untried => return,
        Credentials::Accepted => None,
        Credentials::Refused(why) => Some(why.as_str()),
    };
    let mut read = Some(pool.clone());
    let recorded = on_conflict!(retry::STEP, "the pool's authentication condition", async {
        let current = match read.take() {
            Some(p) => p,
            None => match deps.store.get_pool(&pool.name).await? {
                Some(p) => p,
                None => return Ok(false),
            },
        };
        let mut next = current.clone();
        if !next.status.authenticated(refused, deps.clock.now()) {
            return Ok(false);
        }
        next.rev = current.rev + 1;
        let write = Write::Put(Item::Pool(Box::new(next)), Cond::Rev(current.rev));
        deps.store.write(&current.name, vec![write]).await.map(|()| true)
    });
    match recorded {
        Ok(true) => tracing::info!(refused, "the pool's authentication condition changed"),
        Ok(false) => {}
        Err(e) => tracing::warn!(error = %e, "the pool's authentication condition could not be written"),
    }
}
