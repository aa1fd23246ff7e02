//! The system tests' harness: a fresh stack per test in the emulator `make test` starts, the four functions
//! running in this process as `apiary-local` runs them, and helpers to drive the HTTP API and look at EC2.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apiary_aws::sdk_ec2::types::Filter;
use apiary_aws::SdkConfig;
use apiary_local::{Options, Running, PRINCIPAL_HEADER};
use apiary_planner::power::tick::Tick;
use apiary_planner::{Claim, Cluster, Pool, Snapshot, Timestamp};
use apiary_ports::store::{Item, Key, Store, Write};
use apiary_ports::{Config, Deps};
use serde_json::{json, Value};

/// The emulator's account.
pub const ADMIN: &str = "arn:aws:iam::123456789012:user/admin";
/// A claimant.
pub const ALICE: &str = "arn:aws:iam::123456789012:user/alice";
/// Another claimant.
pub const BOB: &str = "arn:aws:iam::123456789012:user/bob";

static STACKS: AtomicU32 = AtomicU32::new(0);

const NO_EMULATOR: &str = "the system tests need the moto AWS emulator: run them with `make test` (which installs \
and starts it), or start it with `make emulator` and export AWS_ENDPOINT_URL=http://127.0.0.1:5055 \
AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1";

/// One deployed stack with the functions running against it.
pub struct Stack {
    /// The CloudFormation stack's name.
    pub name: String,
    pub deps: Deps,
    pub base: String,
    pub http: reqwest::Client,
    pub ec2: apiary_aws::sdk_ec2::Client,
    /// Where the functions write their CloudWatch metrics (EMF, one JSON document per line).
    pub metrics_file: std::path::PathBuf,
    /// The fake clouds, on a stack started by [`clouds_stack`].
    pub clouds: Option<apiary_local::clouds::DemoClouds>,
    /// Every cluster the functions wrote, in order.
    pub journal: Arc<Journal>,
    /// On a stack started by [`member_stack`]: the role in [`MEMBER_ACCOUNT`] that its pools may name.
    pub member_role: Option<String>,
    running: Option<Running>,
    /// The four functions as they run: each as its role in the stack.
    functions: apiary_local::Functions,
    sdk: SdkConfig,
}

/// The second emulated account of [`member_stack`].
pub const MEMBER_ACCOUNT: &str = "210987654321";

/// A stack that allows AWS pools in [`MEMBER_ACCOUNT`], where `infra/member-account.yaml` is deployed with a role
/// ([`Stack::member_role`]) trusting the stack's power role for `pools` (their ExternalIds) and no other.
pub async fn member_stack(pools: &[&str]) -> Stack {
    let options = Options {
        listen: "127.0.0.1:0".parse().expect("address"),
        sweep_every: Duration::from_secs(1),
        power_consumers: 1,
        reconcile_consumers: 1,
    };
    stack_deployed(options, false, &["--member-account", MEMBER_ACCOUNT, "--member-pools", &pools.join(",")]).await
}

/// Deploys `infra/template.yaml` as a new stack and starts the functions on it.
pub async fn stack() -> Stack {
    stack_with(Options {
        listen: "127.0.0.1:0".parse().expect("address"),
        sweep_every: Duration::from_secs(1),
        power_consumers: 1,
        reconcile_consumers: 1,
    })
    .await
}

/// A stack whose power function also drives a fake Compute Engine, Azure and vCenter (machines boot in 2 s and
/// stop in 1 s), with their credentials in the emulator's Secrets Manager.
pub async fn clouds_stack() -> Stack {
    stack_on(
        Options {
            listen: "127.0.0.1:0".parse().expect("address"),
            sweep_every: Duration::from_secs(1),
            power_consumers: 1,
            reconcile_consumers: 1,
        },
        true,
    )
    .await
}

/// Deploys a new stack and starts the functions on it as `options` say.
pub async fn stack_with(options: Options) -> Stack {
    stack_on(options, false).await
}

async fn stack_on(options: Options, with_clouds: bool) -> Stack {
    stack_deployed(options, with_clouds, &[]).await
}

async fn stack_deployed(options: Options, with_clouds: bool, deploy_args: &[&str]) -> Stack {
    let endpoint =
        std::env::var("AWS_ENDPOINT_URL").unwrap_or_else(|_| panic!("AWS_ENDPOINT_URL is not set: {NO_EMULATOR}"));
    let hostport = endpoint.trim_start_matches("http://").trim_end_matches('/').to_owned();
    if std::net::TcpStream::connect(&hostport).is_err() {
        panic!("nothing listens at {endpoint}: {NO_EMULATOR}");
    }
    // Every line the functions log, at the most the stack's LogLevel allows, kept for the scan for leaked secrets.
    let copy = apiary_fakeclouds::canary::log_file("system-tests")
        .and_then(|path| std::fs::OpenOptions::new().create(true).append(true).open(path).ok());
    apiary_aws::logging::init_with_copy("tests", copy);
    // Where cargo runs the test from, not where it was built: a shared build cache may hold another checkout's path.
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")), std::path::PathBuf::from);
    let root = dir.join("..");
    let python = std::env::var("APIARY_PYTHON").unwrap_or_else(|_| root.join(".venv/bin/python").display().to_string());
    let name = format!("sys{}-{}", std::process::id(), STACKS.fetch_add(1, Ordering::Relaxed));
    let env_file = std::env::temp_dir().join(format!("{name}.env"));
    let metrics_file = std::env::temp_dir().join(format!("{name}.metrics"));
    let metrics = format!("file:{}", metrics_file.display());
    let out = std::process::Command::new(&python)
        .arg(root.join("infra/deploy_local.py"))
        .args([
            &name,
            &env_file.display().to_string(),
            "--admins",
            ADMIN,
            "--max-recheck-seconds",
            "1",
            "--metrics",
            &metrics,
            "--full-sweep-seconds",
            "3",
        ])
        .args(deploy_args)
        .output()
        .unwrap_or_else(|e| panic!("running {python}: {e}: {NO_EMULATOR}"));
    assert!(out.status.success(), "deploying the stack failed: {}", String::from_utf8_lossy(&out.stderr));
    let settings: HashMap<String, String> = std::fs::read_to_string(&env_file)
        .expect("stack settings")
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect();
    let config = Config::from_lookup(|k| settings.get(k).cloned()).expect("stack settings");
    let sdk = apiary_aws::config::load_sdk_config().await;
    let mut endpoints = apiary_clouds::Endpoints::default();
    let clouds = match with_clouds {
        true => {
            // The cloud tests' pools, `p` and `w`, may use every demo secret; any other pool is another team's.
            let grants = apiary_local::clouds::Grants::every(&["p", "w"]);
            let demo = apiary_local::clouds::DemoClouds::start(
                &sdk,
                &name,
                Duration::from_secs(2),
                Duration::from_secs(1),
                &grants,
            )
            .await
            .expect("fake clouds");
            endpoints = demo.endpoints();
            Some(demo)
        }
        false => None,
    };
    // The tests' own view: the operator's credentials, every cloud.
    let deps = apiary_local::clouds::with_clouds(apiary_aws::deps(config.clone(), &sdk), &sdk, endpoints.clone())
        .expect("clouds");
    let journal = Arc::new(Journal { store: deps.store.clone(), clusters: Arc::default() });
    // The functions, each as a session of its role in the stack, every cluster they write kept in the journal.
    let mut functions = apiary_local::Functions::as_roles(&config, &sdk, &|k| settings.get(k).cloned(), |deps, sdk| {
        apiary_local::clouds::with_clouds(deps, sdk, endpoints).map_err(anyhow::Error::from)
    })
    .await
    .expect("the functions' roles");
    for f in [&mut functions.claim_api, &mut functions.reconcile, &mut functions.power, &mut functions.timeouts] {
        f.deps.store = Arc::new(Journal { store: f.deps.store.clone(), clusters: journal.clusters.clone() });
    }
    let running =
        apiary_local::start_functions(bind(&options).await, functions.clone(), &options).expect("local runtime");
    Stack {
        name,
        base: format!("http://{}", running.addr),
        deps,
        // The clouds' client: reqwest on the AWS SDK's TLS stack (rustls with aws-lc), as the functions build it.
        http: apiary_clouds::http::Http::new(None).expect("HTTP client").client().clone(),
        ec2: apiary_aws::sdk_ec2::Client::new(&sdk),
        metrics_file,
        clouds,
        journal,
        member_role: settings.get("APIARY_MEMBER_ROLE_ARN").cloned(),
        running: Some(running),
        functions,
        sdk,
    }
}

async fn bind(options: &Options) -> tokio::net::TcpListener {
    tokio::net::TcpListener::bind(options.listen).await.expect("the API's address")
}

/// A pool on the emulator's EC2: `size` clusters of two instances, `running` kept Running.
pub fn aws_pool(size: i64, running: i64) -> Value {
    json!({
        "size": size,
        "runningCount": running,
        "platform": {"aws": {
            "region": "us-east-1",
            "imageId": "ami-0123456789abcdef0",
            "instanceType": "t3.medium",
            "machineCount": 2
        }}
    })
}

/// The table as the functions see it, keeping every cluster item they write: a state the pool leaves at once (a
/// broken cluster is deleted within a reconcile) is seen in the journal even when no look through the API could.
pub struct Journal {
    store: Arc<dyn Store>,
    clusters: Arc<Mutex<Vec<Cluster>>>,
}

impl Journal {
    /// The versions of cluster `id` written so far, oldest first.
    pub fn cluster(&self, id: &str) -> Vec<Cluster> {
        let clusters = self.clusters.lock().expect("journal");
        clusters.iter().filter(|c| c.id == id).cloned().collect()
    }
}

#[async_trait::async_trait]
impl Store for Journal {
    async fn read_pool(&self, pool: &str) -> apiary_ports::Result<Option<Snapshot>> {
        self.store.read_pool(pool).await
    }

    async fn read_pool_and_tick(&self, pool: &str) -> apiary_ports::Result<Option<(Snapshot, Option<Tick>)>> {
        self.store.read_pool_and_tick(pool).await
    }

    async fn get(&self, pool: &str, key: &Key) -> apiary_ports::Result<Option<Item>> {
        self.store.get(pool, key).await
    }

    async fn get_many(&self, pool: &str, keys: &[Key]) -> apiary_ports::Result<Vec<Item>> {
        self.store.get_many(pool, keys).await
    }

    async fn get_many_strongly(&self, pool: &str, keys: &[Key]) -> apiary_ports::Result<Vec<Item>> {
        self.store.get_many_strongly(pool, keys).await
    }

    async fn spares(&self, pool: &str, from: u16, limit: usize) -> apiary_ports::Result<Vec<String>> {
        self.store.spares(pool, from, limit).await
    }

    async fn ahead(&self, pool: &str, claim: &Claim, limit: usize) -> apiary_ports::Result<Vec<String>> {
        self.store.ahead(pool, claim, limit).await
    }

    async fn moving(&self, pool: &str) -> apiary_ports::Result<Vec<String>> {
        self.store.moving(pool).await
    }

    async fn list_pools(&self) -> apiary_ports::Result<Vec<Pool>> {
        self.store.list_pools().await
    }

    async fn labelled(&self, key: &str, value: &str) -> apiary_ports::Result<Vec<String>> {
        self.store.labelled(key, value).await
    }

    async fn get_pools(&self, pools: &[String]) -> apiary_ports::Result<Vec<Pool>> {
        self.store.get_pools(pools).await
    }

    async fn write(&self, pool: &str, writes: Vec<Write>) -> apiary_ports::Result<()> {
        let clusters: Vec<Cluster> = writes
            .iter()
            .filter_map(|w| match w {
                Write::Put(Item::Cluster(c), _) => Some((**c).clone()),
                _ => None,
            })
            .collect();
        self.store.write(pool, writes).await?;
        self.clusters.lock().expect("journal").extend(clusters);
        Ok(())
    }

    async fn last_full_sweep(&self) -> apiary_ports::Result<Option<Timestamp>> {
        self.store.last_full_sweep().await
    }

    async fn trail_between(
        &self,
        pool: &str,
        shard: u8,
        after: &str,
        until: &str,
        limit: usize,
    ) -> apiary_ports::Result<Vec<(String, apiary_planner::events::Event)>> {
        self.store.trail_between(pool, shard, after, until, limit).await
    }

    async fn events(
        &self,
        pool: &str,
        query: &apiary_ports::store::EventQuery,
    ) -> apiary_ports::Result<apiary_ports::store::EventPage> {
        self.store.events(pool, query).await
    }

    async fn record_full_sweep(&self, previous: Option<Timestamp>, at: Timestamp) -> apiary_ports::Result<()> {
        self.store.record_full_sweep(previous, at).await
    }
}

impl Stack {
    /// The metric documents written so far.
    pub fn metrics(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.metrics_file)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("metric line {l:?}: {e}")))
            .collect()
    }

    /// The four functions' dependencies as they run, each as its role (a look made as the power function makes
    /// it: `functions().power.deps`).
    pub fn functions(&self) -> &apiary_local::Functions {
        &self.functions
    }

    /// Stops the functions.
    /// Keeps what the stack told for the scan for leaked secrets (every pool's trail, the reference OpenShift
    /// installer's job output), then stops the functions.
    pub async fn stop(mut self) {
        if apiary_fakeclouds::canary::dir().is_some() && self.running.is_some() {
            self.keep_trails().await;
        }
        if let Some(openshift) = self.clouds.as_ref().map(|c| c.openshift.root.join("jobs")) {
            apiary_fakeclouds::canary::keep_files("jobs", &self.name, &openshift);
        }
        if let Some(r) = self.running.take() {
            r.stop().await;
        }
    }

    /// Every event of every pool's trail, kept as the scan's `trail`.
    async fn keep_trails(&self) {
        let (_, pools) = self.call("GET", "/pools", ADMIN, None).await;
        let names = pools["pools"].as_array().into_iter().flatten().filter_map(|p| p["name"].as_str());
        for pool in names.map(str::to_owned).collect::<Vec<_>>() {
            let mut page = String::new();
            // A test's trail is a few hundred events at most; the bound only stops a page that never ends.
            for _ in 0..50 {
                let path = format!("/pools/{pool}/events?limit=200{page}");
                let (status, events) = self.call("GET", &path, ADMIN, None).await;
                if status != 200 {
                    break;
                }
                apiary_fakeclouds::canary::keep("trail", &self.name, &events["events"].to_string());
                match events["nextPage"].as_str() {
                    Some(next) => page = format!("&page={next}"),
                    None => break,
                }
            }
        }
    }

    /// A consumer of the queue at `url`, as the functions' event source mappings are (for tests of the queues
    /// alone, once the functions are halted).
    pub fn poller(&self, url: &str) -> apiary_aws::queue::Poller {
        apiary_aws::queue::Poller::new(&self.sdk, url)
    }

    /// Stops the functions but keeps the stack, for tests of the adapters alone.
    pub async fn halt(&mut self) {
        if let Some(r) = self.running.take() {
            r.stop().await;
        }
    }

    /// Restarts the functions as `options` say (the API on a new address).
    pub async fn restart(&mut self, options: Options) {
        if let Some(r) = self.running.take() {
            r.stop().await;
        }
        let running = apiary_local::start_functions(bind(&options).await, self.functions.clone(), &options)
            .expect("local runtime");
        self.base = format!("http://{}", running.addr);
        self.running = Some(running);
    }

    /// Sends a request as `who`; returns the status and the JSON body.
    pub async fn call(&self, method: &str, path: &str, who: &str, body: Option<&str>) -> (u16, Value) {
        self.try_call(method, path, who, body).await.expect("request")
    }

    /// As [`Stack::call`], but `None` when no answer came within API Gateway's 29 s.
    #[allow(dead_code)] // Only the burst benchmark counts unanswered requests.
    pub async fn try_call(
        &self,
        method: &str,
        path: &str,
        who: &str,
        body: Option<&str>,
    ) -> Result<(u16, Value), reqwest::Error> {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        // As long as API Gateway would wait (29 s), not the clouds' 10 s per attempt: twenty claims at once on the
        // emulator, which serializes its requests, can take longer than that on a loaded machine.
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .header(PRINCIPAL_HEADER, who)
            .timeout(Duration::from_secs(29));
        if let Some(b) = body {
            req = req.header("content-type", "application/json").body(b.to_owned());
        }
        let res = req.send().await?;
        let status = res.status().as_u16();
        let text = res.text().await?;
        if status >= 400 {
            apiary_fakeclouds::canary::keep("errors", &self.name, &format!("{method} {path} {status} {text}"));
        }
        Ok((status, serde_json::from_str(&text).unwrap_or(Value::String(text))))
    }

    /// Creates (or replaces) a pool as the admin.
    /// A receiver of claim notifications (a pool's `notify` webhook) on 127.0.0.1, its signing key stored in the
    /// emulator's Secrets Manager tagged for `pools`: the receiver and the key's ARN.
    pub async fn notify_receiver(&self, pools: &[&str]) -> (apiary_fakeclouds::notifications::FakeReceiver, String) {
        let key = apiary_fakeclouds::webhook::new_key();
        let receiver = apiary_fakeclouds::notifications::FakeReceiver::start(&key).await.expect("receiver");
        let pools: Vec<String> = pools.iter().map(|p| (*p).to_owned()).collect();
        let secrets = apiary_aws::secrets::SecretsManager::new(&self.sdk);
        let arn = secrets.create(&format!("{}-notify", self.name), &key, &pools).await.expect("the receiver's key");
        (receiver, arn)
    }

    pub async fn put_pool(&self, pool: &str, spec: &Value) {
        let (status, body) = self.call("PUT", &format!("/pools/{pool}"), ADMIN, Some(&spec.to_string())).await;
        assert!(status == 200 || status == 201, "PUT pool {pool}: {status} {body}");
    }

    /// The message of the pool's `AuthenticationFailure` condition, once it is True.
    pub async fn authentication_failure(&self, pool: &str) -> String {
        self.until(&format!("pool {pool} says its credentials were refused"), Duration::from_secs(60), || async {
            let p = self.pool(pool).await;
            let c =
                p["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "AuthenticationFailure")?.clone();
            (c["status"] == "True").then(|| c["message"].as_str().unwrap_or_default().to_owned())
        })
        .await
    }

    /// The pool's clusters, oldest first.
    pub async fn clusters(&self, pool: &str) -> Vec<Value> {
        let (status, body) = self.call("GET", &format!("/pools/{pool}/clusters"), ADMIN, None).await;
        assert_eq!(status, 200, "{body}");
        body["clusters"].as_array().cloned().unwrap_or_default()
    }

    /// The pool item.
    pub async fn pool(&self, pool: &str) -> Value {
        self.call("GET", &format!("/pools/{pool}"), ADMIN, None).await.1
    }

    /// States of the instances tagged as `infra_id`'s machines (terminated ones included).
    pub async fn instances(&self, infra_id: &str) -> Vec<(String, String)> {
        let out = self
            .ec2
            .describe_instances()
            .filters(Filter::builder().name(format!("tag:kubernetes.io/cluster/{infra_id}")).values("owned").build())
            .send()
            .await
            .expect("DescribeInstances");
        let mut v: Vec<(String, String)> = out
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .map(|i| {
                (
                    i.instance_id().unwrap_or_default().to_owned(),
                    i.state().and_then(|s| s.name()).map(|n| n.as_str().to_owned()).unwrap_or_default(),
                )
            })
            .collect();
        v.sort();
        v
    }

    /// An EC2 client in `account`, entered as its administrators would (OrganizationAccountAccessRole), to look at
    /// what is there without Apiary's own code.
    pub async fn ec2_in(&self, account: &str) -> apiary_aws::sdk_ec2::Client {
        let sts = apiary_aws::sdk_sts::Client::new(&self.sdk);
        let out = sts
            .assume_role()
            .role_arn(format!("arn:aws:iam::{account}:role/OrganizationAccountAccessRole"))
            .role_session_name("system-test")
            .send()
            .await
            .expect("entering the account");
        let c = out.credentials().expect("credentials");
        let credentials = apiary_aws::sdk_sts::config::Credentials::new(
            c.access_key_id(),
            c.secret_access_key(),
            Some(c.session_token().to_owned()),
            None,
            "system-test",
        );
        let conf = apiary_aws::sdk_ec2::config::Builder::from(&self.sdk).credentials_provider(credentials).build();
        apiary_aws::sdk_ec2::Client::from_conf(conf)
    }

    /// The instances tagged `apiary:pool = pool` that `ec2` sees, with their owner account.
    pub async fn pool_instances(&self, ec2: &apiary_aws::sdk_ec2::Client, pool: &str) -> Vec<(String, String)> {
        let out = ec2
            .describe_instances()
            .filters(Filter::builder().name("tag:apiary:pool").values(pool).build())
            .send()
            .await
            .expect("DescribeInstances");
        out.reservations()
            .iter()
            .flat_map(|r| r.instances().iter().map(|i| (r.owner_id().unwrap_or_default().to_owned(), i)))
            .map(|(owner, i)| (i.instance_id().unwrap_or_default().to_owned(), owner))
            .collect()
    }

    /// Whether every instance of the cluster is in `state` (and it has some).
    pub async fn machines_are(&self, cluster: &Value, state: &str) -> bool {
        let infra = cluster["infraId"].as_str().expect("infraId");
        let i = self.instances(infra).await;
        !i.is_empty() && i.iter().all(|(_, s)| s == state)
    }

    /// Waits until `check` gives `Some`, polling every 200 ms; fails the test after `timeout` naming `what`.
    pub async fn until<T, F, Fut>(&self, what: &str, timeout: Duration, mut check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(v) = check().await {
                return v;
            }
            assert!(tokio::time::Instant::now() < deadline, "timed out after {timeout:?} waiting until {what}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until the functions have written cluster `id` broken; that version of it (the pool may have deleted it
    /// since).
    pub async fn written_broken(&self, id: &Value) -> Cluster {
        let id = id.as_str().expect("cluster id");
        self.until(&format!("cluster {id} is marked broken"), Duration::from_secs(60), || async {
            self.journal.cluster(id).into_iter().find(Cluster::is_broken)
        })
        .await
    }

    /// Waits until the pool has exactly `size` installed, settled clusters, `running` of them Running.
    pub async fn converged(&self, pool: &str, size: usize, running: usize) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let c = self.clusters(pool).await;
            let settled = c.iter().all(|c| {
                matches!(c["powerState"].as_str(), Some("Running" | "Hibernating")) && c["deleting"].is_null()
            });
            let up = c.iter().filter(|c| c["powerState"] == "Running").count();
            if c.len() == size && settled && up == running {
                return c;
            }
            if tokio::time::Instant::now() > deadline {
                let seen: Vec<String> = c
                    .iter()
                    .map(|c| {
                        format!("{} {} want {} {}", c["id"], c["powerState"], c["specPowerState"], c["conditions"])
                    })
                    .collect();
                panic!("pool {pool} did not converge to {size} clusters, {running} Running; saw:\n{}", seen.join("\n"));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}
