//! One HTTP client for every cloud API: built once per process, on the TLS stack the AWS SDK already compiles
//! (rustls with aws-lc), bounded like the AWS calls, retrying what a cloud asks to be retried.
//!
//! Bounds: 3 s to connect, 10 s an attempt, 25 s in all (the AWS calls' bounds, within the functions' 60-second
//! timeout). Retried: 429 and 5xx answers, connection failures and attempts that time out, after the answer's
//! `Retry-After` when it gives one that fits the budget, else after a doubling pause. Every other answer, 4xx
//! included, is the caller's to read. A call that runs out of budget is a retryable [`Error`]: its message goes
//! back to the queue and is tried again later.
//!
//! A guarded client ([`Http::guarded`], what the functions use) calls only where the stack's
//! [`UrlPolicy`] lets a pool's URLs reach: every request's URL is checked before it is sent (scheme, credentials, an
//! address written as the host), every name is resolved by a resolver that drops the addresses the policy refuses
//! (so a name that points at the metadata service, or is re-pointed there later, connects nowhere), and a redirect
//! is followed only to a URL the policy allows, at most [`MAX_REDIRECTS`] times.
//!
//! A client may instead answer its requests in this process ([`Http::in_process`]): the whole-system simulation
//! runs the real adapters against the fake clouds that way, on its virtual clock, with no socket and no timer
//! (a retry follows at once; at most [`IN_PROCESS_ATTEMPTS`] attempts).

use std::time::Duration;

use std::sync::Arc;

use apiary_planner::validate::UrlPolicy;
use apiary_ports::{Error, Result};
use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::{Client, RequestBuilder, StatusCode};
use tokio::time::Instant;

/// Longest wait for a connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Longest one attempt may take.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a call may take, retries included.
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(25);
/// First pause before a retry without `Retry-After`; it doubles with each.
const FIRST_PAUSE: Duration = Duration::from_millis(200);
/// Attempts of a call answered in process, where no time passes between them.
pub const IN_PROCESS_ATTEMPTS: u32 = 5;
/// Redirects a guarded client follows, each to a URL its policy allows.
pub const MAX_REDIRECTS: usize = 5;

/// Answers requests in this process, as a simulation's fake clouds do.
pub trait Exchange: Send + Sync {
    /// The answer to `request`; `Err` when none came (a dropped connection, a lost answer): it is retried.
    fn exchange(
        &self,
        request: reqwest::Request,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::result::Result<Answer, String>> + Send>>;
}

/// Where requests go.
#[derive(Clone)]
enum Transport {
    /// Over the network, each attempt bounded in time.
    Network,
    /// To an exchange in this process.
    InProcess(std::sync::Arc<dyn Exchange>),
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Transport::Network => "Network",
            Transport::InProcess(_) => "InProcess",
        })
    }
}

/// What one attempt came to.
enum Attempt {
    /// An answer not to be retried.
    Done(Answer),
    /// Why to try again, and after how long when the answer said.
    Retry(String, Option<Duration>),
}

/// An answer that is not to be retried: its status, headers and body.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The status.
    pub status: StatusCode,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: bytes::Bytes,
}

impl Answer {
    /// The body as `T`; a body that does not decode is a retryable error (a proxy's page, a truncated answer).
    pub fn json<T: serde::de::DeserializeOwned>(&self, op: &'static str) -> Result<T> {
        serde_json::from_slice(&self.body).map_err(|e| {
            Error::service(op, format!("answer ({}) does not decode: {e}: {}", self.status, self.text()), true)
        })
    }

    /// The body as a short text for an error message: control characters and runs of white space made one space,
    /// cut at [`EXCERPT`] characters. What a server answered never reaches a condition whole.
    pub fn text(&self) -> String {
        excerpt(&String::from_utf8_lossy(&self.body))
    }

    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        self.status.is_success()
    }
}

/// Longest excerpt of an answer's body an error message carries.
pub const EXCERPT: usize = 256;

/// `text` as one short line: control characters and runs of white space become one space, cut at [`EXCERPT`]
/// characters.
pub fn excerpt(text: &str) -> String {
    let mut out = String::new();
    let mut count = 0;
    for word in text.split(|c: char| c.is_whitespace() || c.is_control()).filter(|w| !w.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
            count += 1;
        }
        for c in word.chars() {
            if count >= EXCERPT {
                out.push('…');
                return out;
            }
            out.push(c);
            count += 1;
        }
    }
    out
}

/// The shared client.
#[derive(Debug, Clone)]
pub struct Http {
    client: Client,
    budget: Duration,
    transport: Transport,
    /// What a request may reach; `None` for a client that calls anything (tests, the simulation).
    guard: Option<Arc<UrlPolicy>>,
}

impl Http {
    /// A client trusting the system's roots and `extra_roots_pem` (PEM certificates, e.g. a vCenter's CA), calling
    /// anything (tests and tools; the functions use [`Http::guarded`]).
    pub fn new(extra_roots_pem: Option<&str>) -> Result<Self> {
        Self::with_tls(extra_roots_pem, None)
    }

    /// A client that calls only where `policy` lets a pool's URLs reach.
    pub fn guarded(policy: UrlPolicy) -> Result<Self> {
        Self::build(None, None, Some(Arc::new(policy)))
    }

    /// [`Http::new`], presenting `identity` (a client certificate with its key, PEM) to servers that ask for one.
    pub fn with_tls(extra_roots_pem: Option<&str>, identity: Option<&Identity>) -> Result<Self> {
        Self::build(extra_roots_pem, identity, None)
    }

    /// Whether this client may call `url`, or why not.
    pub fn check_url(&self, url: &str) -> std::result::Result<(), String> {
        match &self.guard {
            Some(policy) => policy.check_url(url),
            None => Ok(()),
        }
    }

    fn build(
        extra_roots_pem: Option<&str>,
        identity: Option<&Identity>,
        guard: Option<Arc<UrlPolicy>>,
    ) -> Result<Self> {
        let mut roots = rustls::RootCertStore::empty();
        // A system without a readable store still reaches the fakes over plain HTTP, and a pool's CA bundle.
        let native = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(native.certs);
        if let Some(pem) = extra_roots_pem {
            for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(pem.as_bytes()) {
                let cert: rustls::pki_types::CertificateDer<'static> =
                    cert.map_err(|e| Error::Config(format!("CA bundle: {e}")))?;
                roots.add(cert).map_err(|e| Error::Config(format!("CA bundle: {e}")))?;
            }
        }
        let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Config(format!("TLS: {e}")))?
            .with_root_certificates(roots);
        let tls = match identity {
            None => tls.with_no_client_auth(),
            Some(id) => {
                use rustls::pki_types::pem::PemObject;
                let chain = rustls::pki_types::CertificateDer::pem_slice_iter(id.certificate.as_bytes())
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(|e| Error::Config(format!("client certificate: {e}")))?;
                let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(id.key.as_bytes())
                    .map_err(|e| Error::Config(format!("client key: {e}")))?;
                tls.with_client_auth_cert(chain, key).map_err(|e| Error::Config(format!("client certificate: {e}")))?
            }
        };
        let mut builder = Client::builder()
            .use_preconfigured_tls(tls)
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(ATTEMPT_TIMEOUT)
            .user_agent(concat!("apiary/", env!("CARGO_PKG_VERSION")));
        if let Some(policy) = &guard {
            let redirects = policy.clone();
            builder = builder.dns_resolver(Arc::new(GuardedResolver(policy.clone()))).redirect(
                reqwest::redirect::Policy::custom(move |attempt| {
                    if attempt.previous().len() >= MAX_REDIRECTS {
                        return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
                    }
                    match redirects.check_url(attempt.url().as_str()) {
                        Ok(()) => attempt.follow(),
                        Err(why) => {
                            let to = attempt.url().to_string();
                            attempt.error(format!("refused to follow the redirect to {to}: {why}"))
                        }
                    }
                }),
            );
        }
        let client = builder.build().map_err(|e| Error::Config(format!("HTTP client: {e}")))?;
        Ok(Self { client, budget: OPERATION_TIMEOUT, transport: Transport::Network, guard })
    }

    /// A client whose requests `exchange` answers in this process.
    pub fn in_process(exchange: std::sync::Arc<dyn Exchange>) -> Result<Self> {
        Ok(Self { transport: Transport::InProcess(exchange), ..Self::new(None)? })
    }

    /// The same client with a shorter total budget (tests).
    pub fn with_budget(mut self, budget: Duration) -> Self {
        self.budget = budget;
        self
    }

    /// This client with `other`'s total budget.
    pub fn with_budget_of(self, other: &Http) -> Self {
        self.with_budget(other.budget)
    }

    /// The underlying client, to build requests with.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Sends the request `build` makes (once per attempt) and answers the first answer not to be retried.
    pub async fn send(&self, op: &'static str, build: impl Fn(&Client) -> RequestBuilder) -> Result<Answer> {
        let deadline = Instant::now() + self.budget;
        let mut pause = FIRST_PAUSE;
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            apiary_ports::calls::count(op);
            let why = match self.attempt(op, &build, deadline).await? {
                Attempt::Done(answer) => return Ok(answer),
                Attempt::Retry(why, after) => {
                    pause = after.unwrap_or(pause);
                    why
                }
            };
            let out_of_budget = match self.transport {
                Transport::Network => pause >= deadline.saturating_duration_since(Instant::now()),
                Transport::InProcess(_) => attempts >= IN_PROCESS_ATTEMPTS,
            };
            if out_of_budget {
                return Err(Error::service(op, format!("{why} (after {attempts} attempts)"), true));
            }
            if let Transport::Network = self.transport {
                tokio::time::sleep(pause).await;
            }
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    }

    /// Sends the request `build` makes once, within the budget, and answers whatever the server answered, a 429
    /// or a 5xx included: for a caller whose every HTTP request is an attempt of its own, told and scheduled by
    /// the caller (a notification's). No answer (a refused connection, the budget spent) is a retryable error.
    pub async fn send_once(&self, op: &'static str, build: impl Fn(&Client) -> RequestBuilder) -> Result<Answer> {
        apiary_ports::calls::count(op);
        match self.exchange(op, &build, Instant::now() + self.budget).await? {
            Ok(answer) => Ok(answer),
            Err(why) => Err(Error::service(op, why, true)),
        }
    }

    /// One attempt of `build`'s request.
    async fn attempt(
        &self,
        op: &'static str,
        build: &impl Fn(&Client) -> RequestBuilder,
        deadline: Instant,
    ) -> Result<Attempt> {
        let answer = match self.exchange(op, build, deadline).await? {
            Ok(answer) => answer,
            Err(why) => return Ok(Attempt::Retry(why, None)),
        };
        if answer.status == StatusCode::TOO_MANY_REQUESTS || answer.status.is_server_error() {
            let why = format!("{}: {}", answer.status, answer.text());
            return Ok(Attempt::Retry(why, retry_after(&answer.headers)));
        }
        Ok(Attempt::Done(answer))
    }

    /// One exchange of `build`'s request: the server's answer, or why there was none (worth trying again); an
    /// error for what trying again cannot mend.
    async fn exchange(
        &self,
        op: &'static str,
        build: &impl Fn(&Client) -> RequestBuilder,
        deadline: Instant,
    ) -> Result<std::result::Result<Answer, String>> {
        let answer = match &self.transport {
            Transport::InProcess(exchange) => {
                let request = build(&self.client).build().map_err(|e| Error::service(op, error_chain(&e), false))?;
                match exchange.exchange(request).await {
                    Ok(answer) => answer,
                    Err(why) => return Ok(Err(why)),
                }
            }
            Transport::Network => {
                let request = build(&self.client).build().map_err(|e| Error::service(op, error_chain(&e), false))?;
                if let Err(why) = self.check_url(request.url().as_str()) {
                    // Trying again cannot make the URL allowed.
                    return Err(Error::service(op, format!("refused to call {}: {why}", request.url()), false));
                }
                let left = deadline.saturating_duration_since(Instant::now());
                match tokio::time::timeout(left, self.client.execute(request)).await {
                    Err(_) => return Ok(Err("no answer within the call's budget".to_owned())),
                    Ok(Err(e)) if untrusted(&e) => {
                        // Trying again cannot make a certificate trusted.
                        let why = format!("the server's certificate is not trusted ({}); give its CA", error_chain(&e));
                        return Err(Error::service(op, why, false));
                    }
                    Ok(Err(e)) if e.is_timeout() || e.is_connect() || e.is_request() => {
                        return Ok(Err(error_chain(&e)))
                    }
                    Ok(Err(e)) => return Err(Error::service(op, error_chain(&e), false)),
                    Ok(Ok(response)) => {
                        let status = response.status();
                        let headers = response.headers().clone();
                        let body = match response.bytes().await {
                            Ok(body) => body,
                            Err(e) => bytes::Bytes::from(format!("(body lost: {})", error_chain(&e))),
                        };
                        Answer { status, headers, body }
                    }
                }
            }
        };
        Ok(Ok(answer))
    }
}

impl Http {
    /// Sends the request `build` makes with the credential `credential` gives (a token, a session); when the
    /// answer is 401, `forget` drops what is cached, and the request is sent once more with a fresh credential.
    pub async fn send_with<C, CF>(
        &self,
        op: &'static str,
        credential: C,
        forget: impl Fn(),
        build: impl Fn(&Client, &str) -> RequestBuilder,
    ) -> Result<Answer>
    where
        C: Fn() -> CF,
        CF: std::future::Future<Output = Result<String>>,
    {
        let mut renewed = false;
        loop {
            let held = credential().await?;
            let answer = self.send(op, |c| build(c, &held)).await?;
            if answer.status != StatusCode::UNAUTHORIZED || renewed {
                return Ok(answer);
            }
            tracing::info!(op, "credential refused, renewing it");
            forget();
            renewed = true;
        }
    }
}

/// `Retry-After` in seconds (the HTTP-date form is rare from cloud APIs and falls back to the doubling pause).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?;
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// Whether `e` is TLS refusing the server's certificate.
fn untrusted(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = vec![e];
    while let Some(s) = next.pop() {
        if let Some(rustls::Error::InvalidCertificate(_)) = s.downcast_ref::<rustls::Error>() {
            return true;
        }
        // An io::Error shows the error it wraps through `get_ref`, not as its source.
        if let Some(inner) = s.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
            next.push(inner);
        }
        next.extend(s.source());
    }
    false
}

/// An error with its causes, for a log line (reqwest's own message omits them).
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Percent-encodes `text` for a URL path segment or a query value.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A client certificate and its private key, PEM (a kubeconfig's `client-certificate-data` and
/// `client-key-data`). Its `Debug` shows neither.
#[derive(Clone, PartialEq, Eq)]
pub struct Identity {
    /// The certificate (and its chain).
    pub certificate: String,
    /// The private key.
    pub key: String,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Identity(…)")
    }
}

/// Resolves names as the system does, keeping only the addresses the policy allows.
struct GuardedResolver(Arc<UrlPolicy>);

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.0.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found: Vec<std::net::SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let addrs: reqwest::dns::Addrs = Box::new(reachable(&policy, &host, found)?.into_iter());
            Ok(addrs)
        })
    }
}

/// Of the addresses `host` resolved to, those `policy` allows; none is an error naming why.
fn reachable(
    policy: &UrlPolicy,
    host: &str,
    found: Vec<std::net::SocketAddr>,
) -> std::result::Result<Vec<std::net::SocketAddr>, String> {
    let (allowed, refused): (Vec<_>, Vec<_>) = found.into_iter().partition(|a| policy.check_address(a.ip()).is_ok());
    if allowed.is_empty() {
        let why: Vec<String> = refused.iter().filter_map(|a| policy.check_address(a.ip()).err()).take(3).collect();
        return Err(format!("{host} resolves to no address a pool may reach ({})", why.join("; ")));
    }
    Ok(allowed)
}

/// Clients kept at most: a pool of clusters each with its own kubeconfig makes one per cluster.
const MAX_CLIENTS: usize = 256;

/// Clients that trust a pool's CA bundle besides the system's roots (a vCenter's, a cluster API's), and present a
/// client certificate when given one: one per bundle and identity, built on first use and kept for the warm
/// process (at most [`MAX_CLIENTS`]).
pub struct Bundles {
    base: Http,
    by_digest: std::sync::Mutex<std::collections::HashMap<[u8; 32], Http>>,
}

impl Bundles {
    /// Clients like `base`, with `base`'s budget.
    pub fn new(base: Http) -> Self {
        Self { base, by_digest: std::sync::Mutex::new(std::collections::HashMap::new()) }
    }

    /// `base` itself without a bundle, else the client trusting `pem` too.
    pub fn client(&self, pem: Option<&str>) -> Result<Http> {
        self.client_with(pem, None)
    }

    /// `base` itself without a bundle or an identity, else the client trusting `pem` too and presenting
    /// `identity`.
    pub fn client_with(&self, pem: Option<&str>, identity: Option<&Identity>) -> Result<Http> {
        if pem.is_none() && identity.is_none() {
            return Ok(self.base.clone());
        }
        use sha2::Digest;
        let mut digest = sha2::Sha256::new();
        for part in [pem, identity.map(|i| i.certificate.as_str()), identity.map(|i| i.key.as_str())] {
            digest.update(part.unwrap_or_default().as_bytes());
            digest.update([0]);
        }
        let digest: [u8; 32] = digest.finalize().into();
        let mut clients = self.by_digest.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(http) = clients.get(&digest) {
            return Ok(http.clone());
        }
        // Answered where the base's requests are (in process, in the simulation), guarded as the base is.
        let http =
            Http { transport: self.base.transport.clone(), ..Http::build(pem, identity, self.base.guard.clone())? }
                .with_budget_of(&self.base);
        if clients.len() >= MAX_CLIENTS {
            clients.clear();
        }
        clients.insert(digest, http.clone());
        Ok(http)
    }
}

/// Longest one look's request may take, and again its answer.
pub(crate) const LOOK: Duration = Duration::from_secs(10);

/// Sends `request` for `url` once, bounded by [`LOOK`]: its status and body, or why nothing answered (the
/// cluster is unreachable). The readiness checks look this way: one attempt per look, never retried within it.
/// A client answered in process ([`Http::in_process`]) makes its one exchange there.
pub(crate) async fn look_once(
    http: &Http,
    url: &str,
    request: reqwest::RequestBuilder,
) -> std::result::Result<(u16, bytes::Bytes), String> {
    if let Transport::InProcess(exchange) = &http.transport {
        // One exchange, as the network's one attempt; the simulation's clock bounds nothing here.
        let request = request.build().map_err(|e| format!("{url}: {}", error_chain(&e)))?;
        return exchange
            .exchange(request)
            .await
            .map(|a| (a.status.as_u16(), a.body))
            .map_err(|e| format!("{url}: {e}"));
    }
    if let Err(why) = http.check_url(url) {
        return Err(format!("{url}: refused: {why}"));
    }
    let response = match tokio::time::timeout(LOOK, request.send()).await {
        Err(_) => return Err(format!("{url}: no answer within {LOOK:?}")),
        Ok(Err(e)) => return Err(format!("{url}: {}", error_chain(&e))),
        Ok(Ok(response)) => response,
    };
    let status = response.status().as_u16();
    match tokio::time::timeout(LOOK, response.bytes()).await {
        Ok(Ok(body)) => Ok((status, body)),
        Err(_) => Err(format!("{url}: the answer did not end within {LOOK:?}")),
        Ok(Err(e)) => Err(format!("{url}: {}", error_chain(&e))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert(RETRY_AFTER, "3".parse().expect("header"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(3)));
        h.insert(RETRY_AFTER, "Wed, 21 Oct 2015 07:28:00 GMT".parse().expect("header"));
        assert_eq!(retry_after(&h), None);
    }

    /// Answers every request 200 in process, keeping its URL.
    struct Echo(std::sync::Mutex<Vec<String>>);

    impl Exchange for Echo {
        fn exchange(
            &self,
            request: reqwest::Request,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::result::Result<Answer, String>> + Send>> {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push(request.url().to_string());
            Box::pin(async {
                Ok(Answer { status: StatusCode::OK, headers: HeaderMap::new(), body: bytes::Bytes::new() })
            })
        }
    }

    #[tokio::test]
    async fn a_client_for_a_ca_bundle_answers_in_process_when_its_base_does() {
        let echo = std::sync::Arc::new(Echo(std::sync::Mutex::new(Vec::new())));
        let bundles = Bundles::new(Http::in_process(echo.clone()).expect("client"));
        let ca = apiary_fakeclouds::tls::authority("Test CA", &["localhost"]).expect("a CA").ca_pem;
        let http = bundles.client(Some(&ca)).expect("client");
        let answer = http.send("test.get", |c| c.get("https://vcenter.invalid/api/session")).await.expect("answered");
        assert_eq!(answer.status, StatusCode::OK);
        let seen = echo.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert_eq!(seen, ["https://vcenter.invalid/api/session"], "the simulation's exchange answered it");
    }

    /// The readiness checks' one look goes where the client's requests go: in process it is answered by the
    /// exchange, with no timer (the simulation polls it by hand, without a runtime).
    #[test]
    fn a_look_answers_in_process_when_its_client_does() {
        let echo = std::sync::Arc::new(Echo(std::sync::Mutex::new(Vec::new())));
        let http = Http::in_process(echo.clone()).expect("client");
        let url = "https://127.0.0.5/infra/api/v1/nodes";
        let answer = futures::executor::block_on(look_once(&http, url, http.client().get(url)));
        assert_eq!(answer.map(|(status, _)| status), Ok(200));
        let seen = echo.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        assert_eq!(seen, [url], "the simulation's exchange answered it");
    }

    #[test]
    fn a_name_that_resolves_to_the_metadata_service_connects_nowhere() {
        let policy = UrlPolicy::default();
        let at = |ip: &str| std::net::SocketAddr::new(ip.parse().expect("an address"), 443);
        // What a lookup of a name an attacker controls may give, in its IPv4 and IPv6 spellings.
        let found = vec![at("169.254.169.254"), at("::ffff:169.254.169.254"), at("fd00:ec2::254"), at("127.0.0.1")];
        let why = reachable(&policy, "metadata.example.com", found).expect_err("nothing reachable");
        assert!(why.contains("metadata.example.com") && why.contains("169.254.169.254"), "{why}");
        let mixed = vec![at("10.0.0.5"), at("93.184.215.14")];
        assert_eq!(reachable(&policy, "www.example.com", mixed), Ok(vec![at("93.184.215.14")]), "only the public one");
    }

    #[tokio::test]
    async fn a_guarded_client_refuses_a_forbidden_url_without_sending_it() {
        let http = Http::guarded(UrlPolicy::default()).expect("client");
        for url in ["https://169.254.169.254/latest/meta-data/", "http://installer.example.com/", "https://[::1]:9/"] {
            let e = http.send("test.get", |c| c.get(url)).await.expect_err(url);
            assert!(!e.is_retryable(), "{url}: trying again cannot mend it");
            assert!(e.to_string().contains("refused to call"), "{url}: {e}");
        }
    }

    /// A server on loopback that answers every request with a redirect to `location`.
    async fn redirecting(location: &'static str) -> std::net::SocketAddr {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let addr = listener.local_addr().expect("its address");
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut buf = [0u8; 1024];
                let _ = socket.read(&mut buf).await;
                let answer = format!("HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n");
                let _ = socket.write_all(answer.as_bytes()).await;
            }
        });
        addr
    }

    #[tokio::test]
    async fn a_redirect_to_the_metadata_service_is_not_followed() {
        // The local stack's policy (loopback allowed), so that the test's server can be reached at all.
        let http = Http::guarded(UrlPolicy { local: true, ..UrlPolicy::default() })
            .expect("client")
            .with_budget(Duration::from_secs(2));
        let addr = redirecting("http://169.254.169.254/latest/meta-data/iam/security-credentials/").await;
        let e = http.send("test.get", |c| c.get(format!("http://{addr}/readyz"))).await.expect_err("refused");
        assert!(e.to_string().contains("refused to follow the redirect"), "{e}");
    }

    #[test]
    fn an_answers_body_reaches_a_message_as_one_short_line() {
        let body = format!("<html>\n<body>\tsecret\u{7}page {}</body>", "x".repeat(1000));
        let text = excerpt(&body);
        assert!(text.starts_with("<html> <body> secret page xxx"), "{text}");
        assert_eq!(text.chars().count(), EXCERPT + 1, "cut, with an ellipsis");
        assert!(!text.chars().any(char::is_control));
    }

    #[test]
    fn escape_keeps_unreserved_characters() {
        assert_eq!(escape("labels.a-b = \"owned\""), "labels.a-b%20%3D%20%22owned%22");
    }
}
