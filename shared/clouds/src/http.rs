//! One HTTP client for every cloud API: built once per process, on the TLS stack the AWS SDK already compiles
//! (rustls with aws-lc), bounded like the AWS calls, retrying what a cloud asks to be retried.
//!
//! Bounds: 3 s to connect, 10 s an attempt, 25 s in all (the AWS calls' bounds, within the functions' 60-second
//! timeout). Retried: 429 and 5xx answers, connection failures and attempts that time out, after the answer's
//! `Retry-After` when it gives one that fits the budget, else after a doubling pause. Every other answer, 4xx
//! included, is the caller's to read. A call that runs out of budget is a retryable [`Error`]: its message goes
//! back to the queue and is tried again later.
//!
//! A client may instead answer its requests in this process ([`Http::in_process`]): the whole-system simulation
//! runs the real adapters against the fake clouds that way, on its virtual clock, with no socket and no timer
//! (a retry follows at once; at most [`IN_PROCESS_ATTEMPTS`] attempts).

use std::time::Duration;

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

    /// The body as text for an error message, cut at 512 bytes.
    pub fn text(&self) -> String {
        let text = String::from_utf8_lossy(&self.body);
        let cut: String = text.chars().take(512).collect();
        cut
    }

    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        self.status.is_success()
    }
}

/// The shared client.
#[derive(Debug, Clone)]
pub struct Http {
    client: Client,
    budget: Duration,
    transport: Transport,
}

impl Http {
    /// A client trusting the system's roots and `extra_roots_pem` (PEM certificates, e.g. a vCenter's CA).
    pub fn new(extra_roots_pem: Option<&str>) -> Result<Self> {
        Self::with_tls(extra_roots_pem, None)
    }

    /// [`Http::new`], presenting `identity` (a client certificate with its key, PEM) to servers that ask for one.
    pub fn with_tls(extra_roots_pem: Option<&str>, identity: Option<&Identity>) -> Result<Self> {
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
        let client = Client::builder()
            .use_preconfigured_tls(tls)
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(ATTEMPT_TIMEOUT)
            .user_agent(concat!("apiary/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Error::Config(format!("HTTP client: {e}")))?;
        Ok(Self { client, budget: OPERATION_TIMEOUT, transport: Transport::Network })
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

    /// One attempt of `build`'s request.
    async fn attempt(
        &self,
        op: &'static str,
        build: &impl Fn(&Client) -> RequestBuilder,
        deadline: Instant,
    ) -> Result<Attempt> {
        let answer = match &self.transport {
            Transport::InProcess(exchange) => {
                let request = build(&self.client).build().map_err(|e| Error::service(op, error_chain(&e), false))?;
                match exchange.exchange(request).await {
                    Ok(answer) => answer,
                    Err(why) => return Ok(Attempt::Retry(why, None)),
                }
            }
            Transport::Network => {
                let left = deadline.saturating_duration_since(Instant::now());
                match tokio::time::timeout(left, build(&self.client).send()).await {
                    Err(_) => return Ok(Attempt::Retry("no answer within the call's budget".to_owned(), None)),
                    Ok(Err(e)) if untrusted(&e) => {
                        // Trying again cannot make a certificate trusted.
                        let why = format!("the server's certificate is not trusted ({}); give its CA", error_chain(&e));
                        return Err(Error::service(op, why, false));
                    }
                    Ok(Err(e)) if e.is_timeout() || e.is_connect() || e.is_request() => {
                        return Ok(Attempt::Retry(error_chain(&e), None))
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
        if answer.status == StatusCode::TOO_MANY_REQUESTS || answer.status.is_server_error() {
            let why = format!("{}: {}", answer.status, answer.text());
            return Ok(Attempt::Retry(why, retry_after(&answer.headers)));
        }
        Ok(Attempt::Done(answer))
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
        // Answered where the base's requests are: in process, in the simulation.
        let http = Http { transport: self.base.transport.clone(), ..Http::with_tls(pem, identity)? }
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
pub(crate) async fn look_once(
    url: &str,
    request: reqwest::RequestBuilder,
) -> std::result::Result<(u16, bytes::Bytes), String> {
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

    #[test]
    fn escape_keeps_unreserved_characters() {
        assert_eq!(escape("labels.a-b = \"owned\""), "labels.a-b%20%3D%20%22owned%22");
    }
}
