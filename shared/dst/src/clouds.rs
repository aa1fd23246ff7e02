//! The clouds reached over HTTP, in the simulation: the real GCP, Azure and vSphere adapters, their requests
//! answered in process by the fakes' models on the simulation's virtual clock.
//!
//! Every request passes through the fault hook first, as every port call does: it may yield to other
//! invocations, kill its invocation, come back as a 503 (which the adapters' client retries), or land and lose its
//! answer (so the client sends it again: the fakes see the duplicates the real APIs would). While faults are on,
//! machines also get stuck (a transition that never ends, a guest that never boots) or refuse every call, until
//! the faults stop.
//!
//! The clusters' API servers are the fake cluster API's, answered in process too: a pool with the Kubernetes
//! readiness check looks at its clusters' nodes and operators there, and its kubelets' certificates expire while
//! they are hibernated (seed 004), so a resume needs its nodes' certificate requests approved; every renewal also
//! posts the hostile requests that must stay pending.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use apiary_clouds::http::{Answer, Exchange, Http};
use apiary_fakeclouds::common::Clock;
use apiary_fakeclouds::kubelets::{Csr, Hostile};
use apiary_fakeclouds::server::{Request, Response};
use apiary_fakeclouds::{azure, cluster_api, gcp, notifications, vsphere};
use apiary_planner::machines::MachineState;
use apiary_ports::platform::Platforms;
use apiary_ports::Result;
use apiary_testkit::hook::{enter, Hook, Op};
use apiary_testkit::secrets::MemSecrets;
use apiary_testkit::time::{SplitMix, Time};
use serde_json::{json, Value};

/// The GCP project the simulated pools use.
pub const PROJECT: &str = "apiary-sim";
/// The Azure subscription the simulated pools use.
pub const SUBSCRIPTION: &str = "00000000-0000-0000-0000-00000000d57a";
/// The Azure tenant of the simulated service principal.
pub const TENANT: &str = "00000000-0000-0000-0000-00000000d57b";
/// The pools a workload may make (two to four of them, from the first); the clouds' secrets are tagged for each.
pub const POOLS: [&str; 4] = ["p0", "p1", "p2", "p3"];
const GCP_ARN: &str = "arn:aws:secretsmanager:us-east-1:123456789012:secret:sim/gcp";
const AZURE_ARN: &str = "arn:aws:secretsmanager:us-east-1:123456789012:secret:sim/azure";
const VSPHERE_ARN: &str = "arn:aws:secretsmanager:us-east-1:123456789012:secret:sim/vsphere";
const CLUSTER_API_ARN: &str = "arn:aws:secretsmanager:us-east-1:123456789012:secret:sim/cluster-api";
const NOTIFY_ARN: &str = "arn:aws:secretsmanager:us-east-1:123456789012:secret:sim/notify";
/// The notification receiver's signing key.
const NOTIFY_KEY: &str = "whsec_c2ltdWxhdGVkLW5vdGlmaWNhdGlvbi1rZXktMzI=";
/// How long the kubelets' first certificates last: a cluster hibernated then resumed more than this after its
/// install needs its nodes' certificate requests approved (24 hours on OpenShift; shorter here, so that the
/// two-hour chaos phase sees it often).
pub const FIRST_CERTIFICATES: Duration = Duration::from_secs(30 * 60);

fn addr(last: u8) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, last], 443))
}

/// One RSA key for every simulated service account: making one takes longer than a whole run.
fn service_account_key() -> &'static str {
    static KEY: OnceLock<String> = OnceLock::new();
    KEY.get_or_init(|| {
        use aws_lc_rs::encoding::AsDer;
        let pair = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).expect("an RSA key");
        let der = pair.as_der().expect("PKCS#8");
        pem::encode(&pem::Pem::new("PRIVATE KEY", der.as_ref().to_vec()))
    })
}

/// A machine of one of the fakes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// Which cloud.
    pub cloud: &'static str,
    /// Its name.
    pub name: String,
    /// The infraId of the cluster it belongs to.
    pub infra_id: String,
    /// Its state, as the adapter reads it.
    pub state: MachineState,
}

/// The three fakes, their credentials, and the faults done to their machines.
pub struct SimClouds {
    /// The fake Compute Engine.
    pub gcp: gcp::FakeGcp,
    /// The fake Azure.
    pub azure: azure::FakeAzure,
    /// The fake vCenter.
    pub vsphere: vsphere::FakeVsphere,
    /// The clusters' API servers.
    pub cluster_api: cluster_api::FakeClusterApi,
    /// The receiver of the pools' claim notifications, down now and then while the faults last.
    pub receiver: notifications::FakeReceiver,
    /// The reference OpenShift installer, installing on the fake Compute Engine.
    pub installer: crate::installer::SimInstaller,
    clock: Clock,
    secrets: Arc<MemSecrets>,
    hook: Arc<dyn Hook>,
    /// Machines made stuck or refusing, per cloud, to be healed when the faults stop.
    harmed: Mutex<Vec<(&'static str, String)>>,
    /// How long ago the cluster of an infraId was installed, as the table says.
    installed: Installed,
}

/// How long ago the cluster of an infraId was installed, if it was.
pub type Installed = Box<dyn Fn(&str) -> Option<Duration> + Send + Sync>;

impl SimClouds {
    /// The fakes on `time` (from its current instant), each request passing through `hook`; `installed` tells the
    /// cluster API when a cluster it first hears of was installed (its kubelets' certificates date from then).
    pub fn new(time: Arc<Time>, hook: Arc<dyn Hook>, installed: Installed) -> Self {
        let start = time.now();
        let since = move || (time.now() - start).to_std().unwrap_or_default();
        let clock = Clock::given(since);
        let epoch = u64::try_from(start.timestamp()).unwrap_or_default();
        let receiver = notifications::FakeReceiver::new(NOTIFY_KEY, clock.clone(), epoch, addr(6));
        let receiver_clock = clock.clone();
        let s = |n: u64| Duration::from_secs(n);
        let gcp = gcp::FakeGcp::new(gcp::Timings { boot: s(40), stop: s(20) }, clock.clone(), addr(2));
        gcp.add_template("apiary-node");
        gcp.set_page_size(50);
        let timings = azure::Timings { boot: s(40), stop: s(30), deploy: s(90), delete: s(60) };
        let azure = azure::FakeAzure::new(timings, clock.clone(), addr(3));
        azure.set_page_size(50);
        // A vSphere install takes one more look than the others (the clones are tagged once they exist): with 45 s
        // clones it is done at the second look, as the simulated EC2 launch of 90 s is, which the quiet phase's
        // bounds are derived from.
        let vsphere = vsphere::FakeVsphere::new(
            vsphere::Timings { clone: s(45), boot: s(30), shutdown: s(20) },
            clock.clone(),
            addr(4),
        );
        vsphere.add_template("rhcos");
        vsphere.add_folder("apiary");
        // Nothing here can fail but issuing the fake's own certificates, which a broken build would.
        let cluster_api = cluster_api::FakeClusterApi::new(Duration::ZERO, clock, epoch, addr(5))
            .unwrap_or_else(|e| panic!("the fake cluster API: {e}"));
        cluster_api.certificates_valid(FIRST_CERTIFICATES, Duration::from_secs(30 * 24 * 3600));
        cluster_api.hostile(&Hostile::ALL);
        cluster_api.page(50);
        let secrets = Arc::new(MemSecrets::default());
        let key = gcp
            .service_account_with("apiary@apiary-sim.iam.gserviceaccount.com", PROJECT, service_account_key())
            .unwrap_or_default();
        // Each secret is tagged for every pool a workload makes: the pools move between clouds as they change.
        secrets.put(GCP_ARN, &key, &POOLS);
        secrets.put(AZURE_ARN, &azure.app(TENANT, "apiary-sim"), &POOLS);
        secrets.put(VSPHERE_ARN, &vsphere.user("apiary@vsphere.local"), &POOLS);
        secrets.put(CLUSTER_API_ARN, cluster_api.token(), &POOLS);
        secrets.put(NOTIFY_ARN, NOTIFY_KEY, &POOLS);
        secrets.put(crate::installer::KEY_ARN, crate::installer::KEY, &POOLS);
        let installer =
            crate::installer::SimInstaller::new(receiver_clock.clone(), start, gcp.clone(), PROJECT, &POOLS);
        let harmed = Mutex::new(vec![]);
        Self {
            gcp,
            azure,
            vsphere,
            cluster_api,
            receiver,
            installer,
            clock: receiver_clock,
            secrets,
            hook,
            harmed,
            installed,
        }
    }

    /// `base` with the GCP, Azure and vSphere platforms, their requests answered by the fakes.
    pub fn platforms(self: &Arc<Self>, base: &Platforms) -> Result<Platforms> {
        let http = Http::in_process(Arc::new(Router(self.clone())))?;
        let endpoints = apiary_clouds::Endpoints {
            gcp: Some(self.gcp.endpoint()),
            azure: Some(self.azure.endpoint()),
            azure_authority: Some(self.azure.authority()),
        };
        apiary_clouds::with_http(base, http, self.secrets.clone(), endpoints)
    }

    /// The platform of a pool on `cloud` (`gcp`, `azure`, `vsphere`): `version` changes what shapes its clusters,
    /// never where they live.
    pub fn platform(cloud: &str, machines: u64, version: u64) -> Value {
        match cloud {
            "gcp" => {
                let zones = if version.is_multiple_of(2) {
                    json!(["europe-west1-b"])
                } else {
                    json!(["europe-west1-b", "europe-west1-c"])
                };
                json!({"gcp": {"project": PROJECT, "zones": zones, "instanceTemplate": "apiary-node", "machineCount": machines, "credentialsSecret": GCP_ARN}})
            }
            "azure" => json!({"azure": {
                "subscriptionId": SUBSCRIPTION,
                "tenantId": TENANT,
                "location": if version.is_multiple_of(2) { "westeurope" } else { "northeurope" },
                "template": {
                    "parameters": {"infraId": {"type": "string"}, "nodes": {"type": "int"}},
                    "resources": [{
                        "type": "Microsoft.Compute/virtualMachines",
                        "name": "[concat(parameters('infraId'), '-', copyIndex())]",
                        "copy": {"name": "nodes", "count": "[parameters('nodes')]"}
                    }]
                },
                "parameters": {"nodes": machines},
                "credentialsSecret": AZURE_ARN,
            }}),
            _ => json!({"vsphere": {
                "server": "127.0.0.4:443",
                "datacenter": "DC1",
                "template": "rhcos",
                "folder": "apiary",
                "machineCount": machines,
                "credentialsSecret": VSPHERE_ARN,
                "shutdownGracePeriod": if version.is_multiple_of(2) { "2m" } else { "3m" },
            }}),
        }
    }

    /// The Kubernetes readiness check of a pool whose clusters' API servers are the fake's: nodes Ready, their
    /// certificate requests approved, operators settled.
    pub fn readiness() -> Value {
        json!({"kubernetes": {"credentials": CLUSTER_API_ARN, "server": format!("https://{}/{{infraId}}", addr(5))}})
    }

    /// The `notify` webhook of a pool whose claims the simulation's receiver hears.
    pub fn notify() -> Value {
        json!([{"url": format!("https://{}/notifications", addr(6)), "secret": NOTIFY_ARN}])
    }

    /// Every certificate request the clusters' kubelets (and the hostile requesters beside them) made, with the
    /// infraId of its cluster.
    pub fn csrs(&self) -> Vec<(String, Csr)> {
        self.cluster_api.every_csr()
    }

    /// Every machine of the three fakes, with the infraId it belongs to (Apiary names machines `<infraId>-<n>`
    /// and Azure resource groups `<infraId>-rg`).
    pub fn machines(&self) -> Vec<Machine> {
        let infra = |name: &str| name.rsplit_once('-').map_or(name, |(i, _)| i).to_owned();
        let gcp = self.gcp.instances(PROJECT).into_iter().map(|(_, name, status)| Machine {
            cloud: "gcp",
            infra_id: infra(&name),
            state: apiary_clouds::gcp::state(&status),
            name,
        });
        let azure = self.azure.vms(SUBSCRIPTION).into_iter().map(|(rg, name, power)| Machine {
            cloud: "azure",
            infra_id: rg.trim_end_matches("-rg").to_owned(),
            state: apiary_clouds::azure::state(&power, false),
            name,
        });
        let vsphere = self.vsphere.vms().into_iter().map(|(_, name, power)| Machine {
            cloud: "vsphere",
            infra_id: infra(&name),
            state: apiary_clouds::vsphere::state(&power),
            name,
        });
        gcp.chain(azure).chain(vsphere).collect()
    }

    /// Now and then, a machine of a fake gets stuck or starts refusing every call: `rng` decides, `stuck` and
    /// `refuse` are the odds of each at this look.
    pub fn harm(&self, rng: &mut SplitMix, stuck: f64, refuse: f64) {
        // While the faults last, the notification receiver is down one ten-minute window in three (by the clock,
        // not `rng`, whose draws every seed's workload follows).
        self.installer.jobs.faults(stuck > 0.0);
        if stuck > 0.0 {
            match (self.clock.now().as_secs() / 600) % 3 {
                1 => self.receiver.down(),
                _ => self.receiver.up(),
            }
        }
        for (odds, stick) in [(stuck, true), (refuse, false)] {
            if !rng.chance(odds) {
                continue;
            }
            let machines = self.machines();
            if machines.is_empty() {
                continue;
            }
            let m = &machines[rng.below(machines.len() as u64) as usize];
            match (m.cloud, stick) {
                ("gcp", true) => self.gcp.stick(&m.name),
                ("gcp", false) => self.gcp.refuse(&m.name),
                ("azure", true) => self.azure.stick(&m.name),
                ("azure", false) => self.azure.refuse(&m.name),
                (_, true) => self.vsphere.stick(&m.name),
                (_, false) => self.vsphere.refuse(&m.name),
            }
            self.harmed.lock().unwrap_or_else(|e| e.into_inner()).push((m.cloud, m.name.clone()));
        }
    }

    /// Every harmed machine behaves again, and the receiver is up.
    pub fn heal(&self) {
        self.receiver.up();
        self.installer.jobs.faults(false);
        for (cloud, name) in self.harmed.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            match cloud {
                "gcp" => self.gcp.comply(&name),
                "azure" => self.azure.comply(&name),
                _ => self.vsphere.comply(&name),
            }
        }
    }

    /// The fake `request` is addressed to.
    fn answer(&self, request: Request, host: &str) -> Response {
        let to = |a: SocketAddr| host == a.to_string();
        if to(addr(2)) {
            self.gcp.handle(request)
        } else if to(addr(3)) {
            self.azure.handle(request)
        } else if to(addr(4)) {
            self.vsphere.handle(request)
        } else if to(addr(6)) {
            self.receiver.handle(&request)
        } else if to(addr(5)) {
            // Served under /{infraId}: a cluster first heard of is one the pool installed, and maybe hibernated
            // at once, so first looked at only on a resume.
            let infra = request.path.split('/').find(|p| !p.is_empty()).unwrap_or_default().to_owned();
            if !self.cluster_api.knows(&infra) {
                if let Some(ago) = (self.installed)(&infra) {
                    self.cluster_api.installed(&infra, ago);
                }
            }
            self.cluster_api.handle(request)
        } else {
            Response::json(502, &json!({"error": format!("no fake at {host}")}))
        }
    }
}

/// The adapters' exchange: requests to the fakes, through the hook.
struct Router(Arc<SimClouds>);

impl Exchange for Router {
    fn exchange(
        &self,
        request: reqwest::Request,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::result::Result<Answer, String>> + Send>> {
        let clouds = self.0.clone();
        Box::pin(async move {
            let op = if request.method() == reqwest::Method::GET { Op::CloudRead } else { Op::CloudWrite };
            let url = request.url().clone();
            let host = format!("{}:{}", url.host_str().unwrap_or_default(), url.port_or_known_default().unwrap_or(443));
            let hook = clouds.hook.clone();
            if let Err(e) = enter(hook.as_ref(), op).await {
                // A throttle or an outage: what the service answers, retried by the client.
                let body = json!({"error": {"code": 503, "message": e.to_string()}});
                return Ok(answer_of(Response::json(503, &body)));
            }
            let mut headers: Vec<(String, String)> = request
                .headers()
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or_default().to_owned()))
                .collect();
            headers.push(("host".into(), host.clone()));
            let body = request.body().and_then(|b| b.as_bytes()).map(bytes::Bytes::copy_from_slice).unwrap_or_default();
            let fake_request = Request::new(
                request.method().as_str(),
                url.as_str(),
                headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                body,
            );
            let response = match host == addr(7).to_string() {
                true => installer_answer(&clouds.installer, &url, &fake_request).await,
                false => clouds.answer(fake_request, &host),
            };
            if let Some(lost) = op.changes_state().then(|| hook.after(op)).flatten() {
                return Err(format!("the answer was lost after the request landed: {lost}"));
            }
            Ok(answer_of(response))
        })
    }
}

/// The installer's answer to `request`, as its function URL gives it.
async fn installer_answer(
    installer: &crate::installer::SimInstaller,
    url: &reqwest::Url,
    request: &Request,
) -> Response {
    let mut builder = http::Request::builder().method(request.method.as_str()).uri(url.as_str());
    for (k, v) in &request.headers {
        builder = builder.header(k.as_str(), v.as_str());
    }
    let Ok(request) = builder.body(request.body.clone()) else {
        return Response::json(400, &json!({"message": "not a request"}));
    };
    let answer = installer.handle(request).await;
    Response { status: answer.status().as_u16(), headers: vec![], body: answer.body().to_vec() }
}

fn answer_of(r: Response) -> Answer {
    let mut headers = reqwest::header::HeaderMap::new();
    for (k, v) in &r.headers {
        if let (Ok(k), Ok(v)) =
            (reqwest::header::HeaderName::from_bytes(k.as_bytes()), reqwest::header::HeaderValue::from_str(v))
        {
            headers.append(k, v);
        }
    }
    Answer {
        status: reqwest::StatusCode::from_u16(r.status).unwrap_or(reqwest::StatusCode::INTERNAL_SERVER_ERROR),
        headers,
        body: bytes::Bytes::from(r.body),
    }
}
