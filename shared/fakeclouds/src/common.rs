//! What every fake shares: the time its machines move on, the tokens it issues, the faults it injects and the
//! log of what it was asked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::server::{Request, Response};

/// The time a fake's machines move on, as the time since it started: the wall clock plus what a test added
/// ([`Clock::advance`]), or a time its owner provides (a simulation's virtual clock).
#[derive(Clone)]
pub struct Clock(Arc<ClockInner>);

struct ClockInner {
    source: Source,
    offset: Mutex<Duration>,
}

enum Source {
    Wall(Instant),
    Given(Box<dyn Fn() -> Duration + Send + Sync>),
}

impl Clock {
    /// The wall clock, from now.
    pub fn wall() -> Self {
        Self::of(Source::Wall(Instant::now()))
    }

    /// The time `now` answers (it must never go back).
    pub fn given(now: impl Fn() -> Duration + Send + Sync + 'static) -> Self {
        Self::of(Source::Given(Box::new(now)))
    }

    fn of(source: Source) -> Self {
        Self(Arc::new(ClockInner { source, offset: Mutex::new(Duration::ZERO) }))
    }

    /// The time since the fake started.
    pub fn now(&self) -> Duration {
        let base = match &self.0.source {
            Source::Wall(start) => start.elapsed(),
            Source::Given(now) => now(),
        };
        base + *self.0.offset.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves the clock on by `by`.
    pub fn advance(&self, by: Duration) {
        *self.0.offset.lock().unwrap_or_else(|e| e.into_inner()) += by;
    }
}

/// Bearer tokens (or sessions) a fake issued, each valid until a time of its [`Clock`].
#[derive(Debug, Default)]
pub struct Tokens {
    valid_until: HashMap<String, Duration>,
    issued: u64,
}

impl Tokens {
    /// A new token `prefix-N`, valid for `ttl` from `now`.
    pub fn issue(&mut self, prefix: &str, now: Duration, ttl: Duration) -> String {
        self.issued += 1;
        let token = format!("{prefix}-{}", self.issued);
        self.valid_until.insert(token.clone(), now + ttl);
        token
    }

    /// Whether `token` is live at `now`.
    pub fn valid(&self, token: &str, now: Duration) -> bool {
        self.valid_until.get(token).is_some_and(|until| *until > now)
    }

    /// Ends `token` (a logout).
    pub fn end(&mut self, token: &str) {
        self.valid_until.remove(token);
    }

    /// Ends every token (they expired).
    pub fn expire_all(&mut self) {
        self.valid_until.clear();
    }

    /// How many were issued so far.
    pub fn issued(&self) -> u64 {
        self.issued
    }
}

/// Calls answered with a throttle or an outage instead of being served.
#[derive(Debug, Default)]
pub struct Faults {
    /// The next this many calls are throttled (429).
    pub throttle: u32,
    /// The next this many calls find the service unavailable (503).
    pub unavailable: u32,
}

impl Faults {
    /// The fault the next call meets, if any: `throttled` or `unavailable` makes the cloud's answer.
    pub fn take(&mut self, throttled: impl Fn() -> Response, unavailable: impl Fn() -> Response) -> Option<Response> {
        if self.throttle > 0 {
            self.throttle -= 1;
            return Some(throttled());
        }
        if self.unavailable > 0 {
            self.unavailable -= 1;
            return Some(unavailable());
        }
        None
    }
}

/// The log of requests, as `METHOD path`, for tests that assert what was asked.
#[derive(Debug, Default)]
pub struct Log(Vec<String>);

impl Log {
    /// Logs `req` (with `extra` appended when given).
    pub fn push(&mut self, req: &Request, extra: Option<String>) {
        let mut line = format!("{} {}", req.method, req.path);
        if let Some(extra) = extra {
            line.push(' ');
            line.push_str(&extra);
        }
        self.0.push(line);
    }

    /// The lines so far, clearing the log.
    pub fn take(&mut self) -> Vec<String> {
        std::mem::take(&mut self.0)
    }
}

/// One request and its answer, as they went over the wire: what a conformance check holds against the vendor's
/// description of the API.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Exchange {
    /// `GET`, `POST`, …
    pub method: String,
    /// The path, percent-decoded.
    pub path: String,
    /// The query's pairs, decoded, in order.
    pub query: Vec<(String, String)>,
    /// The request's body as JSON: a form's fields as an object (`null` when it has none or is neither).
    pub request: serde_json::Value,
    /// The answer's status.
    pub status: u16,
    /// The answer's body as JSON (`null` when it is not JSON).
    pub response: serde_json::Value,
    /// The answer's headers, names in lower case (an asynchronous operation's `azure-asyncoperation`, …).
    pub headers: Vec<(String, String)>,
}

impl Exchange {
    /// `req` answered with `res`.
    pub fn of(req: &Request, res: &Response) -> Self {
        Self {
            method: req.method.clone(),
            path: req.path.clone(),
            query: req.query.clone(),
            request: match req.headers.get("content-type") {
                Some(t) if t.starts_with("application/x-www-form-urlencoded") => {
                    req.form().into_iter().map(|(k, v)| (k, serde_json::Value::String(v))).collect()
                }
                _ => req.json(),
            },
            status: res.status,
            response: serde_json::from_slice(&res.body).unwrap_or(serde_json::Value::Null),
            headers: res.headers.iter().map(|(k, v)| (k.to_ascii_lowercase(), v.clone())).collect(),
        }
    }
}

/// What went over a fake's wire, once it records ([`Wire::record`]).
#[derive(Debug, Default)]
pub struct Wire(Option<Vec<Exchange>>);

impl Wire {
    /// Records every exchange from now on.
    pub fn record(&mut self) {
        self.0.get_or_insert_with(Vec::new);
    }

    /// The exchanges recorded so far, cleared.
    pub fn take(&mut self) -> Vec<Exchange> {
        self.0.as_mut().map(std::mem::take).unwrap_or_default()
    }
}

/// `answer`'s answer to `req`, the exchange kept in the [`Wire`] `wire` picks from the state when it records: one
/// recording of what went over the wire for every fake.
pub fn recorded<S>(
    state: &Mutex<S>,
    wire: fn(&mut S) -> &mut Wire,
    req: Request,
    answer: impl FnOnce(&Mutex<S>, Request) -> Response,
) -> Response {
    let lock = || state.lock().unwrap_or_else(|e| e.into_inner());
    if wire(&mut lock()).0.is_none() {
        return answer(state, req);
    }
    let sent = req.clone();
    let res = answer(state, req);
    if let Some(w) = wire(&mut lock()).0.as_mut() {
        w.push(Exchange::of(&sent, &res));
    }
    res
}

/// For a fake run in its own process (`src/bin`): prints `hello` as one JSON line, then reads commands from standard
/// input, one a line (`verb argument`), until it closes, answering each `ok` on standard output. `act` takes the
/// verb and its argument and says whether it knew the verb (an unknown one is said on standard error).
pub async fn take_commands(
    hello: &serde_json::Value,
    act: impl Fn(&str, &str) -> bool + Send + 'static,
) -> std::io::Result<()> {
    use std::io::{BufRead, Write};
    writeln!(std::io::stdout(), "{hello}")?;
    let commands = tokio::task::spawn_blocking(move || {
        for line in std::io::stdin().lock().lines() {
            let line = line?;
            let (verb, arg) = line.split_once(' ').unwrap_or((line.as_str(), ""));
            if !act(verb, arg.trim()) {
                writeln!(std::io::stderr(), "no command {verb:?}")?;
            }
            let mut out = std::io::stdout();
            writeln!(out, "ok")?;
            out.flush()?;
        }
        Ok::<(), std::io::Error>(())
    });
    commands.await.map_err(std::io::Error::other)?
}

/// The bearer token of `req`, or "" when it has none.
pub fn bearer(req: &Request) -> &str {
    req.headers.get("authorization").and_then(|h| h.strip_prefix("Bearer ")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_clock_is_read_and_advanced() {
        let clock = Clock::given(|| Duration::from_secs(7));
        assert_eq!(clock.now(), Duration::from_secs(7));
        clock.advance(Duration::from_secs(3));
        assert_eq!(clock.now(), Duration::from_secs(10));
    }

    #[test]
    fn tokens_expire_and_end() {
        let mut t = Tokens::default();
        let a = t.issue("tok", Duration::ZERO, Duration::from_secs(10));
        assert!(t.valid(&a, Duration::from_secs(9)));
        assert!(!t.valid(&a, Duration::from_secs(10)));
        let b = t.issue("tok", Duration::ZERO, Duration::from_secs(10));
        t.end(&b);
        assert!(!t.valid(&b, Duration::ZERO));
        assert_eq!(t.issued(), 2);
    }
}
