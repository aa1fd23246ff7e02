//! The claim API as the command line reaches it: where it is (`--api`, `APIARY_API` or a stack's `ApiUrl`
//! output), who is calling (requests signed with the caller's AWS credentials, or the local stack's identity
//! header), and its answers turned into values or one-line failures.

use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use aws_config::BehaviorVersion;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_credential_types::Credentials;
use serde_json::Value;
use tokio::sync::Mutex;

use crate::error::{Exit, Failure, Result};
use crate::sign;

/// The header that names the caller to the local stack (`make run`), where API Gateway's IAM authorization is
/// played by the local process.
pub const LOCAL_PRINCIPAL_HEADER: &str = "x-apiary-principal";
/// Longest one request may take: a waiting `GET` of a claim holds for up to 25 s, API Gateway for 29 s.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(40);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Tries of a request the service could not answer (429, 502, 503, 504, no connection); every request the
/// command line makes is idempotent.
const ATTEMPTS: u32 = 4;

/// Where the API is and who calls it, as the options and environment say.
#[derive(Debug, Clone, Default)]
pub struct Target {
    /// `--api` / `APIARY_API`.
    pub api: Option<String>,
    /// `--stack` / `APIARY_STACK`: a CloudFormation stack whose `ApiUrl` output is the API.
    pub stack: Option<String>,
    /// `--as` / `APIARY_PRINCIPAL`: the caller's ARN, for a local API only.
    pub principal: Option<String>,
    /// `--region`: overrides the AWS configuration's region.
    pub region: Option<String>,
    /// `--auth`: how requests say who is calling.
    pub auth: AuthMode,
}

/// `--auth`: how requests say who is calling.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum AuthMode {
    /// The local identity header for a loopback address, SigV4 otherwise.
    #[default]
    Auto,
    /// SigV4 with the caller's AWS credentials (an API Gateway reached through a tunnel on a loopback address).
    Sigv4,
    /// The local stack's identity header (`--as`).
    Local,
}

/// How requests say who is calling.
enum Auth {
    /// The local stack's identity header.
    Local { principal: String },
    /// SigV4 with the caller's AWS credentials (refreshed as they near their expiry), for the service the URL
    /// names ([`sign::service_of`]).
    Signed {
        provider: SharedCredentialsProvider,
        region: String,
        service: &'static str,
        current: Mutex<Option<Credentials>>,
    },
}

/// A connection to the claim API.
pub struct Api {
    base: String,
    http: reqwest::Client,
    auth: Auth,
}

/// An error answer of the API: `{error, message, fields?}` (API Gateway's own: `{message}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: u16,
    /// The error's message.
    pub message: String,
    /// `(field, message)` for each field a 400 names.
    pub fields: Vec<(String, String)>,
}

impl ApiError {
    /// The answer's error, from its status and JSON body.
    pub fn from_answer(status: u16, body: &Value) -> Self {
        let message = body
            .get("message")
            .or_else(|| body.get("Message"))
            .and_then(Value::as_str)
            .map_or_else(|| format!("HTTP {status}"), str::to_owned);
        let fields = body
            .get("fields")
            .and_then(Value::as_array)
            .map(|fs| {
                fs.iter()
                    .filter_map(|f| {
                        Some((f.get("field")?.as_str()?.to_owned(), f.get("message")?.as_str()?.to_owned()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self { status, message, fields }
    }

    /// The exit code for this status.
    pub fn exit(&self) -> Exit {
        match self.status {
            400 | 405 | 413 | 422 => Exit::Usage,
            401 | 403 => Exit::Forbidden,
            404 => Exit::NotFound,
            409 => Exit::Conflict,
            _ => Exit::Failure,
        }
    }
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Self {
        let mut f = Failure::new(e.exit(), e.message.clone());
        if e.status == 403 && e.message.contains("signature") {
            f.message.push_str(" (check the clock and the region the credentials sign for)");
        }
        if e.fields.len() > 1 {
            f.message = format!("{} fields refused", e.fields.len());
            f.details = e.fields.iter().map(|(k, m)| format!("{k}: {m}")).collect();
        }
        f
    }
}

impl Api {
    /// Resolves `target` and prepares the caller's identity.
    pub async fn connect(target: &Target) -> Result<Self> {
        // The AWS configuration is loaded only when needed: a local API needs none.
        let mut config = None;
        let url = match (&target.api, &target.stack) {
            (Some(api), _) => api.clone(),
            (None, Some(stack)) => {
                let loaded = aws_configuration(target).await;
                let url = stack_api_url(&loaded, stack).await?;
                config = Some(loaded);
                url
            }
            (None, None) => {
                return Err(Failure::usage(
                    "say where the API is: --api URL (or APIARY_API), or --stack NAME (or APIARY_STACK)",
                ))
            }
        };
        let parsed = reqwest::Url::parse(&url).map_err(|e| Failure::usage(format!("--api {url}: {e}")))?;
        if !matches!(parsed.scheme(), "https" | "http") {
            return Err(Failure::usage(format!("--api {url}: want an http(s) URL")));
        }
        let local = match target.auth {
            AuthMode::Auto => is_loopback(&parsed),
            AuthMode::Sigv4 => false,
            AuthMode::Local => true,
        };
        let auth =
            match (local, &target.principal) {
                (true, Some(principal)) => Auth::Local { principal: principal.clone() },
                (true, None) => {
                    return Err(Failure::usage(format!(
                        "{url} is a local API, which names its caller by the {LOCAL_PRINCIPAL_HEADER} header: pass \
                     --as ARN (or set APIARY_PRINCIPAL); --auth sigv4 signs instead"
                    )))
                }
                (false, Some(_)) => return Err(Failure::usage(
                    "--as names the caller of a local API only; on AWS the caller is whoever the AWS credentials are",
                )),
                (false, None) => {
                    let config = match config {
                        Some(c) => c,
                        None => aws_configuration(target).await,
                    };
                    let region = sign::region_of(&url)
                        .or_else(|| target.region.clone())
                        .or_else(|| config.region().map(ToString::to_string))
                        .ok_or_else(|| Failure::usage("no AWS region: pass --region or set AWS_REGION"))?;
                    let provider = config.credentials_provider().ok_or_else(no_credentials)?;
                    Auth::Signed { provider, region, service: sign::service_of(&url), current: Mutex::new(None) }
                }
            };
        Ok(Self { base: url.trim_end_matches('/').to_owned(), http: http_client()?, auth })
    }

    /// Where the API is and how requests say who is calling (`apiary endpoint`).
    pub fn describe(&self) -> String {
        match &self.auth {
            Auth::Local { principal } => format!(
                "{}\nlocal API: the caller is {principal}, named by the {LOCAL_PRINCIPAL_HEADER} header (unsigned)",
                self.base
            ),
            Auth::Signed { region, service, .. } => {
                format!("{}\nsigned with the caller's AWS credentials (SigV4, {service}, {region})", self.base)
            }
        }
    }

    /// A note for standard error when the API is the local one: it is not signed, and who the caller is.
    pub fn local_note(&self) -> Option<String> {
        match &self.auth {
            Auth::Local { principal } => Some(format!(
                "apiary: local API {}, as {principal} ({LOCAL_PRINCIPAL_HEADER} header, unsigned)",
                self.base
            )),
            Auth::Signed { .. } => None,
        }
    }

    /// Sends `method path` with `body`; the status and JSON body of the answer, errors included. Retries what
    /// the service could not answer.
    pub async fn send(&self, method: &str, path: &str, body: Option<&Value>) -> Result<(u16, Value)> {
        let url = format!("{}{path}", self.base);
        let body = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let mut wait = Duration::from_secs(1);
        for attempt in 1..=ATTEMPTS {
            let last = attempt == ATTEMPTS;
            match self.send_once(method, &url, &body).await {
                Ok((status, _)) if matches!(status, 429 | 502 | 503 | 504) && !last => {}
                Ok(answer) => return Ok(answer),
                Err(e) if e.is_connect() || e.is_timeout() => {
                    if last {
                        return Err(Failure::other(format!("{method} {url}: {}", reqwest_reason(&e))));
                    }
                }
                Err(SendError::Failed(f)) => return Err(f),
                Err(e) => return Err(Failure::other(format!("{method} {url}: {}", reqwest_reason(&e)))),
            }
            tokio::time::sleep(wait).await;
            wait *= 2;
        }
        Err(Failure::other(format!("{method} {url}: no answer")))
    }

    /// [`Api::send`], with an error answer as a failure.
    pub async fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<(u16, Value)> {
        let (status, value) = self.send(method, path, body).await?;
        if status >= 400 {
            return Err(ApiError::from_answer(status, &value).into());
        }
        Ok((status, value))
    }

    async fn send_once(&self, method: &str, url: &str, body: &[u8]) -> std::result::Result<(u16, Value), SendError> {
        let method_ = reqwest::Method::from_bytes(method.as_bytes()).map_err(|_| SendError::Other("method".into()))?;
        let mut request = self.http.request(method_, url).header("accept", "application/json");
        match &self.auth {
            Auth::Local { principal } => request = request.header(LOCAL_PRINCIPAL_HEADER, principal),
            Auth::Signed { provider, region, service, current } => {
                let credentials = credentials(provider, current).await.map_err(SendError::Failed)?;
                let signed =
                    sign::signature_headers(method, url, body, &credentials, region, service, SystemTime::now())
                        .map_err(SendError::Failed)?;
                for (k, v) in signed {
                    request = request.header(k, v);
                }
            }
        }
        if !body.is_empty() {
            request = request.header("content-type", "application/json").body(body.to_vec());
        }
        let response = request.send().await.map_err(SendError::Http)?;
        let status = response.status().as_u16();
        let bytes = response.bytes().await.map_err(SendError::Http)?;
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or_else(|_| {
                let text = String::from_utf8_lossy(&bytes);
                serde_json::json!({ "message": format!("HTTP {status}: {}", text.chars().take(200).collect::<String>()) })
            })
        };
        Ok((status, value))
    }
}

enum SendError {
    Http(reqwest::Error),
    Failed(Failure),
    Other(String),
}

impl SendError {
    fn is_connect(&self) -> bool {
        matches!(self, SendError::Http(e) if e.is_connect())
    }

    fn is_timeout(&self) -> bool {
        matches!(self, SendError::Http(e) if e.is_timeout())
    }
}

impl From<SendError> for Failure {
    fn from(e: SendError) -> Self {
        match e {
            SendError::Failed(f) => f,
            other => Failure::other(reqwest_reason(&other)),
        }
    }
}

/// Why a request got no answer, in one line (the error's chain of causes, without the URL it repeats).
fn reqwest_reason(e: &SendError) -> String {
    let e = match e {
        SendError::Http(e) => e,
        SendError::Failed(f) => return f.message.clone(),
        SendError::Other(m) => return m.clone(),
    };
    let reason = if e.is_timeout() {
        "no answer in time".to_owned()
    } else if e.is_connect() {
        "cannot connect".to_owned()
    } else {
        "request failed".to_owned()
    };
    with_causes(reason, e)
}

/// `head`, then each cause in `e`'s chain below it, each said once (hyper and the OS often repeat what the level
/// above said).
fn with_causes(mut head: String, e: &dyn std::error::Error) -> String {
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !head.contains(&text) {
            head.push_str(&format!(": {text}"));
        }
        source = s.source();
    }
    head
}

/// The caller's credentials, fetched again when they expire within five minutes.
async fn credentials(
    provider: &SharedCredentialsProvider,
    current: &Mutex<Option<Credentials>>,
) -> Result<Credentials> {
    let mut current = current.lock().await;
    let fresh =
        current.as_ref().is_some_and(|c| c.expiry().is_none_or(|at| at > SystemTime::now() + Duration::from_secs(300)));
    if !fresh {
        let c = provider.provide_credentials().await.map_err(|e| {
            let why = with_causes(e.to_string(), &e);
            if why.contains("no credentials found") {
                no_credentials()
            } else {
                // An expired SSO session, a refused role: the provider's first line says which.
                Failure::new(Exit::Forbidden, format!("AWS credentials: {}", why.lines().next().unwrap_or("")))
            }
        })?;
        *current = Some(c);
    }
    current.clone().ok_or_else(no_credentials)
}

fn no_credentials() -> Failure {
    Failure::new(
        Exit::Forbidden,
        "no AWS credentials found (environment, profiles, web identity, container or instance role): set \
         AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
    )
}

/// The caller's AWS configuration (credentials and region from the environment, profiles, SSO or the instance).
pub async fn aws_configuration(target: &Target) -> aws_config::SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    if let Some(region) = &target.region {
        loader = loader.region(aws_config::Region::new(region.clone()));
    }
    loader.load().await
}

/// The `ApiUrl` output of CloudFormation stack `stack`.
async fn stack_api_url(config: &aws_config::SdkConfig, stack: &str) -> Result<String> {
    let cfn = aws_sdk_cloudformation::Client::new(config);
    stack_output(&cfn, stack, "ApiUrl").await?.ok_or_else(|| {
        Failure::new(Exit::NotFound, format!("stack {stack} has no ApiUrl output: is it an Apiary stack?"))
    })
}

/// CloudFormation stack `stack` as DescribeStacks gives it; a stack that does not exist is 404, credentials
/// refused 403.
pub async fn describe_stack(
    cfn: &aws_sdk_cloudformation::Client,
    stack: &str,
) -> Result<aws_sdk_cloudformation::types::Stack> {
    let answer = cfn.describe_stacks().stack_name(stack).send().await.map_err(|e| {
        let text = aws_sdk_cloudformation::error::DisplayErrorContext(&e).to_string();
        if text.contains("does not exist") {
            Failure::new(Exit::NotFound, format!("stack {stack} does not exist in this account and region"))
        } else if text.contains("credentials") || text.contains("AccessDenied") {
            Failure::new(Exit::Forbidden, format!("reading stack {stack}: {}", text.lines().next().unwrap_or("")))
        } else {
            Failure::other(format!("reading stack {stack}: {}", text.lines().next().unwrap_or("")))
        }
    })?;
    answer
        .stacks()
        .first()
        .cloned()
        .ok_or_else(|| Failure::new(Exit::NotFound, format!("stack {stack} does not exist in this account and region")))
}

/// Output `key` of CloudFormation stack `stack` (`None` when the stack has no such output); a stack that does not
/// exist is 404, credentials refused 403.
pub async fn stack_output(cfn: &aws_sdk_cloudformation::Client, stack: &str, key: &str) -> Result<Option<String>> {
    let found = describe_stack(cfn, stack).await?;
    Ok(found.outputs().iter().find(|o| o.output_key() == Some(key)).and_then(|o| o.output_value()).map(str::to_owned))
}

fn is_loopback(url: &reqwest::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        None => false,
    }
}

/// An HTTPS client on rustls (aws-lc, as the AWS SDK's), trusting the system's roots.
fn http_client() -> Result<reqwest::Client> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Failure::other(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(ATTEMPT_TIMEOUT)
        .user_agent(concat!("apiary-cli/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| Failure::other(format!("HTTP client: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_become_one_line_and_their_exit_code() {
        let one = ApiError::from_answer(
            400,
            &serde_json::json!({"error": "InvalidRequest", "message": "size: must be at least 0",
                "fields": [{"field": "size", "message": "must be at least 0"}]}),
        );
        assert_eq!(one.fields, [("size".to_owned(), "must be at least 0".to_owned())]);
        let f = Failure::from(one);
        assert_eq!((f.exit, f.message.as_str()), (Exit::Usage, "size: must be at least 0"));
        let gateway = ApiError::from_answer(
            403,
            &serde_json::json!({"message": "The request signature we calculated does not match the signature you provided."}),
        );
        let f = Failure::from(gateway);
        assert_eq!(f.exit, Exit::Forbidden);
        assert!(f.message.contains("region"), "{}", f.message);
        for (status, exit) in
            [(404, Exit::NotFound), (409, Exit::Conflict), (503, Exit::Failure), (401, Exit::Forbidden)]
        {
            assert_eq!(Failure::from(ApiError::from_answer(status, &Value::Null)).exit, exit, "{status}");
        }
    }

    #[test]
    fn only_loopback_addresses_are_local() {
        for (url, local) in [
            ("http://127.0.0.1:8080", true),
            ("http://localhost:8080/", true),
            ("http://[::1]:8080", true),
            ("https://x.execute-api.us-east-1.amazonaws.com/v1", false),
            ("http://10.0.0.1", false),
        ] {
            assert_eq!(is_loopback(&reqwest::Url::parse(url).expect("url")), local, "{url}");
        }
    }
}
