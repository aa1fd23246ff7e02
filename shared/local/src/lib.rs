//! Apiary's four functions in one local process, wired as Lambda wires them.
//!
//! - The claim API served over HTTP on a local address. API Gateway's IAM authorization is played by the
//!   `x-apiary-principal` header: its value becomes the caller's ARN in the request context, exactly where API
//!   Gateway puts the signer's ARN. (Only for local use: nothing checks a signature.)
//! - Long-polling consumers of the reconcile and power queues, handing batches to the handlers as `SqsEvent`s
//!   and deleting all but the reported batch item failures, as an event source mapping does.
//! - The sweep on a timer, as the sweep schedule would invoke it (full passes every `APIARY_FULL_SWEEP_SECONDS`).
//!
//! Settings come from the environment, exactly as the stack passes them to the Lambda functions. Each function runs
//! as a session of its own role ([`Functions::as_roles`]), as Lambda runs it: against the emulator, every call is
//! then authorized by that role's policies.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use apiary_aws::queue::Poller;
use apiary_aws::SdkConfig;
use apiary_ports::Deps;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

pub mod clouds;
pub mod openshift;
pub mod status;

/// The header that names the caller locally.
pub const PRINCIPAL_HEADER: &str = "x-apiary-principal";

/// How the local process runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where the API listens (port 0: any free port).
    pub listen: SocketAddr,
    /// Time between two sweeps.
    pub sweep_every: Duration,
    /// Concurrent consumers of the power queue. The power handler works on a batch's messages concurrently.
    pub power_consumers: usize,
    /// Concurrent consumers of the reconcile queue. Default 1: it keeps one pool to one reconcile at a time, which
    /// the emulator's FIFO queue does not enforce across concurrent receives as SQS does.
    pub reconcile_consumers: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            sweep_every: Duration::from_secs(60),
            power_consumers: 1,
            reconcile_consumers: 1,
        }
    }
}

/// The running process: its API address and its tasks (stopped when dropped).
pub struct Running {
    /// The API's address.
    pub addr: SocketAddr,
    tasks: JoinSet<()>,
}

impl Running {
    /// Stops every task.
    pub async fn stop(mut self) {
        self.tasks.shutdown().await;
    }
}

/// One function as Lambda runs it: its dependencies, and the SDK configuration its event source mapping receives
/// with (both carrying the function's own identity when started by [`Functions::as_roles`]).
#[derive(Clone)]
pub struct Function {
    /// The adapters the handler is given.
    pub deps: Deps,
    /// The SDK configuration of the queue consumer that feeds the handler (Lambda's event source mapping receives
    /// and deletes with the function's role).
    pub sdk: SdkConfig,
}

/// The four functions.
#[derive(Clone)]
pub struct Functions {
    /// The claim API.
    pub claim_api: Function,
    /// The reconcile.
    pub reconcile: Function,
    /// The power function.
    pub power: Function,
    /// The sweep.
    pub timeouts: Function,
}

/// The settings naming each function's role (`infra/deploy_local.py` writes them), by function.
pub const ROLE_SETTINGS: [(&str, &str); 4] = [
    ("claim-api", "APIARY_LOCAL_CLAIM_API_ROLE_ARN"),
    ("reconcile", "APIARY_LOCAL_RECONCILE_ROLE_ARN"),
    ("power", "APIARY_LOCAL_POWER_ROLE_ARN"),
    ("timeouts", "APIARY_LOCAL_TIMEOUTS_ROLE_ARN"),
];

impl Functions {
    /// All four with the same adapters and identity (tests of the handlers alone, benchmarks).
    pub fn shared(deps: Deps, sdk: &SdkConfig) -> Self {
        let f = Function { deps, sdk: sdk.clone() };
        Functions { claim_api: f.clone(), reconcile: f.clone(), power: f.clone(), timeouts: f }
    }

    /// Each function as a session of its own role (`roles`: the role ARN of each function by the names of
    /// [`ROLE_SETTINGS`]), as Lambda runs it: the adapters each function's `main` builds (the power function's
    /// with the clouds reached over HTTP, `power_platforms`), from `sdk` with that role's credentials. The session
    /// is named after the function, as Lambda names it.
    pub async fn as_roles(
        config: &apiary_ports::Config,
        sdk: &SdkConfig,
        roles: &dyn Fn(&str) -> Option<String>,
        power_platforms: impl FnOnce(Deps, &SdkConfig) -> anyhow::Result<Deps>,
    ) -> anyhow::Result<Self> {
        let mut sdks = vec![];
        for (function, setting) in ROLE_SETTINGS {
            let role = roles(setting).ok_or_else(|| anyhow::anyhow!("{setting} is not set: the role of {function}"))?;
            sdks.push(apiary_aws::assume(sdk, &role, &format!("{}-{function}", config.stack)).await);
        }
        let of = |i: usize| Function { deps: apiary_aws::deps(config.clone(), &sdks[i]), sdk: sdks[i].clone() };
        let power = Function { deps: power_platforms(of(2).deps, &sdks[2])?, sdk: sdks[2].clone() };
        Ok(Functions { claim_api: of(0), reconcile: of(1), power, timeouts: of(3) })
    }
}

/// Starts the API on `options.listen`, the queue consumers (receiving through `sdk`) and the sweep, all four
/// functions with `deps`.
pub async fn start(deps: Deps, sdk: &SdkConfig, options: &Options) -> std::io::Result<Running> {
    start_functions(TcpListener::bind(options.listen).await?, Functions::shared(deps, sdk), options)
}

/// Starts the API on a listener already bound (so that nothing started in between can take its port), the queue
/// consumers and the sweep, each function as `functions` gives it; `options.listen` is not read.
pub fn start_functions(listener: TcpListener, functions: Functions, options: &Options) -> std::io::Result<Running> {
    let addr = listener.local_addr()?;
    let mut tasks = JoinSet::new();
    tasks.spawn(serve(listener, functions.claim_api.deps));
    for _ in 0..options.reconcile_consumers {
        let Function { deps, sdk } = functions.reconcile.clone();
        let poller = Poller::new(&sdk, &deps.config.reconcile_queue_url);
        tasks.spawn(consume("reconcile", poller, move |event| {
            let deps = deps.clone();
            async move { reconcile::handle(&deps, event).await }
        }));
    }
    for _ in 0..options.power_consumers {
        let Function { deps, sdk } = functions.power.clone();
        let poller = Poller::new(&sdk, &deps.config.power_queue_url);
        tasks.spawn(consume("power", poller, move |event| {
            let deps = deps.clone();
            async move { power::handle(&deps, event).await }
        }));
    }
    let every = options.sweep_every;
    let deps = functions.timeouts.deps;
    tasks.spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            // Full or not is the sweep's own decision, from the last full pass it recorded.
            if let Err(e) = timeouts::run(&deps).await {
                tracing::warn!(error = %e, "sweep failed");
            }
        }
    });
    Ok(Running { addr, tasks })
}

async fn consume<F, Fut>(name: &'static str, poller: Poller, handler: F)
where
    F: Fn(aws_lambda_events::event::sqs::SqsEvent) -> Fut,
    Fut: std::future::Future<Output = aws_lambda_events::event::sqs::SqsBatchResponse>,
{
    loop {
        match poller.receive(10, Duration::from_secs(5)).await {
            Ok(event) if event.records.is_empty() => {}
            Ok(event) => {
                let response = handler(event.clone()).await;
                if let Err(e) = poller.settle(&event, &response).await {
                    tracing::warn!(queue = name, error = %e, "could not delete handled messages");
                }
            }
            Err(e) => {
                tracing::warn!(queue = name, error = %e, "receive failed");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

async fn serve(listener: TcpListener, deps: Deps) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                continue;
            }
        };
        let deps = deps.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                let deps = deps.clone();
                async move { Ok::<_, Infallible>(call_api(&deps, req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

/// Turns an HTTP request into the event API Gateway would send, runs the claim API on it, and turns its answer
/// back into HTTP.
async fn call_api(deps: &Deps, req: hyper::Request<Incoming>) -> hyper::Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let bytes = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let principal = parts.headers.get(PRINCIPAL_HEADER).and_then(|v| v.to_str().ok());
    let uri = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let request = claim_api::api_request(parts.method.as_str(), uri, principal, bytes.to_vec());
    let response = claim_api::handle(deps, request).await;
    let (parts, body) = response.into_parts();
    let bytes = match body {
        lambda_http::Body::Empty => Bytes::new(),
        lambda_http::Body::Text(t) => Bytes::from(t),
        lambda_http::Body::Binary(b) => Bytes::from(b),
    };
    hyper::Response::from_parts(parts, Full::new(bytes))
}
