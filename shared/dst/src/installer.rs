//! The reference OpenShift installer (`apiary-installer`) in the simulation: its own service, answered in process
//! at [`URL`] on the simulation's clock, its records, accepted requests and install directories in memory, and
//! its jobs ([`SimJobs`]) played out on the virtual clock as openshift-install's would: an install launches its
//! machines in the fake Compute Engine part way through and writes metadata.json and the credentials when it
//! ends; a destroy removes every machine the cluster's installs launched. While the faults last, jobs fail, hang
//! until their timeout, or are stopped after their machines were launched; Apiary's requests to the installer go
//! through the fault hook as every cloud call does (delayed, their answers lost and the requests sent again).
//!
//! What must hold, checked by [`crate::invariants`]: no install starts for a cluster after the installer accepted
//! its removal; never two jobs at once for one cluster, nor one job started twice; and once quiet, every cluster
//! whose removal was accepted ends with nothing left: no machine, no stored credential, no job running, its
//! record a tombstone.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apiary_clouds::secrets::SecretCache;
use apiary_fakeclouds::common::Clock;
use apiary_fakeclouds::gcp::FakeGcp;
use apiary_installer::memory::{MemoryDirs, MemoryPools, MemoryRecords, MemoryReplays, MemorySecrets};
use apiary_installer::model::{Phase, PoolSettings};
use apiary_installer::ports::{Dirs, JobKind, JobSpec, JobState, Jobs};
use apiary_installer::service::Installer;
use apiary_ports::Result;
use serde_json::{json, Value};

/// Where Apiary reaches the installer.
pub const URL: &str = "https://127.0.0.7/apiary";
/// The installer's signing key, as the pools' `provisioner.webhook.secret` holds it.
pub const KEY: &str = "whsec_c2ltdWxhdGVkLXJlZmVyZW5jZS1pbnN0YWxsZXIta2V5";
/// The ARN of that secret, in the simulation's Secrets Manager.
pub const KEY_ARN: &str = "arn:aws:secretsmanager:us-east-1:123456789012:secret:sim/installer";
/// How many machines an install launches (a pool on the installer names as many).
pub const MACHINES: u64 = 3;
/// The zone the installs launch in (every simulated GCP pool's zones include it).
const ZONE: &str = "europe-west1-b";

/// The install-config template every pool of the installer renders.
const TEMPLATE: &str = "\
apiVersion: v1
metadata:
  name: {clusterName}
baseDomain: {baseDomain}
controlPlane:
  name: master
  replicas: 3
compute:
- name: worker
  replicas: 2
platform:
  none: {}
";

/// The provisioner of a pool whose clusters the installer installs.
pub fn provisioner() -> Value {
    json!({"webhook": {"url": URL, "secret": KEY_ARN}})
}

/// The label openshift-install puts on a cluster's machines, which the pool's GCP platform finds them by.
fn label(infra_id: &str) -> String {
    format!("kubernetes-io-cluster-{infra_id}")
}

/// The installer, its stores, and what the simulation saw of it.
pub struct SimInstaller {
    /// The service, as its function runs it.
    pub service: Installer,
    /// Its records.
    pub records: Arc<MemoryRecords>,
    /// The credentials it stored.
    pub vault: Arc<MemorySecrets>,
    /// Its jobs.
    pub jobs: Arc<SimJobs>,
    /// Each cluster whose removal the installer accepted (answered a `DELETE` 202 or 404), and how many jobs had
    /// started by then.
    removed: Mutex<BTreeMap<String, usize>>,
    /// Requests to come again, delayed.
    delayed: Mutex<Vec<Copy>>,
}

/// A request kept to be sent again at `at`, or first then if it was `held`.
struct Copy {
    at: Duration,
    held: bool,
    method: http::Method,
    uri: http::Uri,
    headers: http::HeaderMap,
    body: bytes::Bytes,
}

impl Copy {
    /// `request`, to come again one to four minutes after `now` (drawn from what it is, so a seed replays).
    fn of(request: &http::Request<bytes::Bytes>, now: Duration) -> Self {
        let id = request.headers().get("webhook-id").and_then(|v| v.to_str().ok()).unwrap_or_default();
        let draw = u64::from_str_radix(&hash(&format!("{id}/{}", now.as_millis()))[..8], 16).unwrap_or_default();
        Self {
            at: now + Duration::from_secs(60 + draw % 180),
            held: draw.is_multiple_of(10),
            method: request.method().clone(),
            uri: request.uri().clone(),
            headers: request.headers().clone(),
            body: request.body().clone(),
        }
    }

    fn request(&self) -> Option<http::Request<bytes::Bytes>> {
        let mut request = http::Request::builder().method(self.method.clone()).uri(self.uri.clone());
        *request.headers_mut()? = self.headers.clone();
        request.body(self.body.clone()).ok()
    }
}

impl SimInstaller {
    /// The installer of `pools` on `clock`, which read zero at `epoch`, its jobs launching machines in `gcp`'s
    /// `project`.
    pub fn new(
        clock: Clock,
        epoch: chrono::DateTime<chrono::Utc>,
        gcp: FakeGcp,
        project: &'static str,
        pools: &[&str],
    ) -> Self {
        let vault = Arc::new(MemorySecrets::default());
        let pull = vault.add("sim/pull-secret", r#"{"auths":{"quay.io":{"auth":"c2ltOnB1bGw="}}}"#, pools);
        let settings = Arc::new(MemoryPools::default());
        for pool in pools {
            settings.put(
                pool,
                PoolSettings {
                    release_image: "quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64".into(),
                    install_config: TEMPLATE.into(),
                    pull_secret: pull.clone(),
                    ssh_key: None,
                    manifests: Vec::new(),
                    credentials: None,
                    install_timeout: Some("30m".into()),
                    role_arn: None,
                },
            );
        }
        let (records, dirs) = (Arc::new(MemoryRecords::default()), Arc::new(MemoryDirs::default()));
        let jobs = Arc::new(SimJobs::new(clock.clone(), gcp, project, dirs.clone()));
        let service = Installer {
            pools: settings,
            records: records.clone(),
            replays: Arc::new(MemoryReplays::default()),
            dirs,
            jobs: jobs.clone(),
            vault: vault.clone(),
            secrets: Arc::new(SecretCache::new(vault.clone())),
            keys: vec![KEY.to_owned()],
            clock: Arc::new(SimTime { clock, epoch }),
        };
        Self { service, records, vault, jobs, removed: Mutex::default(), delayed: Mutex::default() }
    }

    /// Answers one request, as its function URL does, noting each removal it accepted. While the faults last,
    /// each request also comes again one to four minutes later (within its signature's five minutes), as a
    /// proxy's retry or a replay would, and one in ten is held that long before it arrives at all (its sender told
    /// 504, as a gateway that gave up waiting tells it): the requests due are answered first, their answers lost.
    pub async fn handle(&self, request: http::Request<bytes::Bytes>) -> http::Response<bytes::Bytes> {
        let now = self.jobs.clock.now();
        let due: Vec<Copy> = {
            let mut delayed = self.delayed.lock().unwrap_or_else(|e| e.into_inner());
            let (due, later) = std::mem::take(&mut *delayed).into_iter().partition(|c| c.at <= now);
            *delayed = later;
            due
        };
        for copy in due {
            if let Some(request) = copy.request() {
                self.answer(request).await;
            }
        }
        if self.jobs.faulty.load(std::sync::atomic::Ordering::Relaxed) {
            let copy = Copy::of(&request, now);
            let held = copy.held;
            self.delayed.lock().unwrap_or_else(|e| e.into_inner()).push(copy);
            if held {
                let mut answer = http::Response::new(bytes::Bytes::from_static(b"{\"message\":\"timed out\"}"));
                *answer.status_mut() = http::StatusCode::GATEWAY_TIMEOUT;
                return answer;
            }
        }
        self.answer(request).await
    }

    async fn answer(&self, request: http::Request<bytes::Bytes>) -> http::Response<bytes::Bytes> {
        let removal = (request.method() == http::Method::DELETE)
            .then(|| request.uri().path().rsplit('/').next().unwrap_or_default().to_owned());
        let answer = self.service.handle(request).await;
        if let Some(id) = removal.filter(|_| matches!(answer.status().as_u16(), 202 | 404)) {
            let started = self.jobs.started();
            self.removed.lock().unwrap_or_else(|e| e.into_inner()).entry(id).or_insert(started);
        }
        answer
    }

    /// How many clusters' removals the installer accepted.
    pub fn removals(&self) -> usize {
        self.removed.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Each cluster whose removal the installer accepted.
    pub fn removed(&self) -> Vec<String> {
        self.removed.lock().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect()
    }

    /// What must hold of the jobs at every step: none started twice or beside another of its cluster
    /// (`Err((invariant, detail))`), and no install started after its cluster's removal was accepted.
    pub fn jobs_kept(&self) -> std::result::Result<(), (&'static str, String)> {
        if let Some(what) = self.jobs.broken().first() {
            return Err(("never two jobs for one attempt", what.clone()));
        }
        let removed = self.removed.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for (cluster, job, order) in self.jobs.installs() {
            if removed.get(&cluster).is_some_and(|before| order >= *before) {
                let detail = format!("install {job} started after the installer accepted {cluster}'s removal");
                return Err(("no install after a removal was accepted", detail));
            }
        }
        Ok(())
    }

    /// What is left of cluster `id`, whose removal was accepted: nothing, or what remains, said.
    pub fn left_of(&self, id: &str) -> Vec<String> {
        let mut left = Vec::new();
        if let Some(r) = self.records.all().get(id).filter(|r| r.phase != Phase::Removed) {
            left.push(format!("its record is {:?}", r.phase));
        }
        for infra in self.jobs.infra_ids(id) {
            let machines = self.jobs.gcp.labelled(self.jobs.project, &label(&infra), "owned");
            if !machines.is_empty() {
                left.push(format!("{} machines of {infra}", machines.len()));
            }
        }
        let suffix = format!("/{id}/");
        let stored: Vec<String> = self
            .vault
            .arns()
            .into_iter()
            .filter(|a| a.contains("secret:apiary-installer/") && a.contains(&suffix))
            .collect();
        if !stored.is_empty() {
            left.push(format!("its secrets {stored:?}"));
        }
        if let Some(job) = self.jobs.running(id) {
            left.push(format!("job {job} still running"));
        }
        left
    }
}

/// The simulation's time, as the installer reads it.
struct SimTime {
    clock: Clock,
    epoch: chrono::DateTime<chrono::Utc>,
}

#[async_trait::async_trait]
impl apiary_ports::clock::Clock for SimTime {
    fn now(&self) -> apiary_planner::Timestamp {
        self.epoch + chrono::TimeDelta::from_std(self.clock.now()).unwrap_or_default()
    }
    fn seed(&self) -> u64 {
        0
    }
    async fn sleep(&self, _: std::time::Duration) {}
}

/// How a job ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Exit 0 after its time.
    Succeeds,
    /// A non-zero exit after its time (a bootstrap that timed out, a destroy that hit a dependency).
    Fails,
    /// Never ends by itself: stopped at its timeout, or by the installer.
    Hangs,
}

/// One job, as the runner keeps it.
#[derive(Debug, Clone)]
struct Job {
    spec: JobSpec,
    /// How many jobs had started before it.
    order: usize,
    started: Duration,
    takes: Duration,
    ending: Ending,
    /// The infraId an install launches its machines under, once it has.
    launched: Option<String>,
    state: JobState,
}

/// Jobs on the virtual clock: each plays out when the installer next looks at any job.
pub struct SimJobs {
    clock: Clock,
    gcp: FakeGcp,
    project: &'static str,
    dirs: Arc<MemoryDirs>,
    /// While the faults last, jobs may fail or hang.
    faulty: std::sync::atomic::AtomicBool,
    jobs: Mutex<BTreeMap<String, Job>>,
    /// Each cluster's infraIds, every one an install of it launched machines under.
    infra: Mutex<BTreeMap<String, BTreeSet<String>>>,
    /// What went wrong that must never: a job started twice, two at once for a cluster.
    broken: Mutex<Vec<String>>,
}

impl SimJobs {
    fn new(clock: Clock, gcp: FakeGcp, project: &'static str, dirs: Arc<MemoryDirs>) -> Self {
        Self {
            clock,
            gcp,
            project,
            dirs,
            faulty: Default::default(),
            jobs: Mutex::default(),
            infra: Mutex::default(),
            broken: Mutex::default(),
        }
    }

    /// Whether jobs started from now on may fail or hang.
    pub fn faults(&self, on: bool) {
        self.faulty.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Every start the runner refused to count as one: a job id started twice, or a job started while another of
    /// its cluster ran.
    pub fn broken(&self) -> Vec<String> {
        self.broken.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Every install job started, as (cluster, job id, how many jobs had started before it).
    pub fn installs(&self) -> Vec<(String, String, usize)> {
        let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.iter()
            .filter(|(_, j)| j.spec.kind == JobKind::Install)
            .map(|(id, j)| (j.spec.cluster.clone(), id.clone(), j.order))
            .collect()
    }

    /// How many jobs have started.
    pub fn started(&self) -> usize {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// The job of cluster `id` still running, if one is.
    pub fn running(&self, id: &str) -> Option<String> {
        let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.iter().find(|(_, j)| j.spec.cluster == id && j.state == JobState::Running).map(|(k, _)| k.clone())
    }

    /// The infraIds cluster `id`'s installs launched machines under.
    pub fn infra_ids(&self, id: &str) -> Vec<String> {
        let infra = self.infra.lock().unwrap_or_else(|e| e.into_inner());
        infra.get(id).map(|s| s.iter().cloned().collect()).unwrap_or_default()
    }

    /// Plays every job out to now: an install writes metadata.json and launches its machines 40 % of the way
    /// through (openshift-install writes it before it makes anything, so that a destroy finds what it made) and,
    /// succeeding, writes the credentials; a destroy that succeeds removes every machine of its cluster.
    async fn advance(&self) {
        let now = self.clock.now();
        let (mut finished, mut launched) = (Vec::new(), Vec::new());
        {
            let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
            for (id, job) in jobs.iter_mut().filter(|(_, j)| j.state == JobState::Running) {
                let at = now.saturating_sub(job.started);
                if job.spec.kind == JobKind::Install && job.launched.is_none() && at >= job.takes.mul_f64(0.4) {
                    let infra = format!("{}-{}", job.spec.cluster, &hash(id)[..5]);
                    let names: Vec<String> = (0..MACHINES).map(|i| format!("{infra}-{i}")).collect();
                    self.gcp.launch(self.project, ZONE, &names, &BTreeMap::from([(label(&infra), "owned".into())]));
                    let mut all = self.infra.lock().unwrap_or_else(|e| e.into_inner());
                    all.entry(job.spec.cluster.clone()).or_default().insert(infra.clone());
                    launched.push((job.spec.cluster.clone(), infra.clone()));
                    job.launched = Some(infra);
                }
                job.state = match job.ending {
                    _ if at >= job.spec.timeout => JobState::Failed("timed out".into()),
                    Ending::Hangs => continue,
                    _ if at < job.takes => continue,
                    Ending::Fails => JobState::Failed(format!("{} cluster exited with status 4", job.verb())),
                    Ending::Succeeds => JobState::Succeeded,
                };
                finished.push(job.clone());
            }
        }
        let dirs = self.dirs.as_ref();
        for (cluster, infra) in launched {
            let metadata = json!({"clusterName": cluster, "clusterID": hash(&infra), "infraID": infra});
            let _ = Dirs::write(dirs, &cluster, "metadata.json", metadata.to_string().as_bytes()).await;
        }
        // A failed install leaves openshift-install's last words in its log: a line of one of the failure classes,
        // the same for the same job, so every class (and its retry or not) is played out.
        for job in finished.iter().filter(|j| j.spec.kind == JobKind::Install && j.state != JobState::Succeeded) {
            let line = FAILURES[job.order % FAILURES.len()];
            let _ = Dirs::write(dirs, &job.spec.cluster, ".openshift_install.log", line.as_bytes()).await;
        }
        for job in finished.into_iter().filter(|j| j.state == JobState::Succeeded) {
            let cluster = job.spec.cluster.as_str();
            match (job.spec.kind, &job.launched) {
                (JobKind::Install, Some(_)) => {
                    let kubeconfig = format!(
                        "apiVersion: v1\nclusters:\n- cluster:\n    server: https://api.{cluster}.sim:6443\n  name: c\n\
                         contexts:\n- context:\n    cluster: c\n    user: admin\n  name: admin\n\
                         current-context: admin\nkind: Config\nusers:\n- name: admin\n  user:\n    token: sim\n"
                    );
                    let _ = Dirs::write(dirs, cluster, "auth/kubeconfig", kubeconfig.as_bytes()).await;
                    let _ = Dirs::write(dirs, cluster, "auth/kubeadmin-password", b"sim-password").await;
                }
                (JobKind::Destroy, _) => {
                    for infra in self.infra_ids(cluster) {
                        self.gcp.remove_labelled(self.project, &label(&infra), "owned");
                    }
                }
                _ => {}
            }
        }
    }
}

impl Job {
    fn verb(&self) -> &'static str {
        match self.spec.kind {
            JobKind::Install => "create",
            JobKind::Destroy => "destroy",
        }
    }
}

/// What a failed install's log ends with, one line for each class of failure the planner knows
/// ([`apiary_planner::failure::classify`]), as openshift-install writes them.
pub const FAILURES: [&str; 7] = [
    "level=error msg=Error: creating EC2 Instance: InsufficientInstanceCapacity: We currently do not have sufficient m6i.xlarge capacity in the Availability Zone you requested",
    "level=fatal msg=failed to fetch Cluster: failed to generate asset \"Platform Quota Check\": error(MissingQuota): compute.googleapis.com/cpus is not available in europe-west1 because the required number of resources (24) is more than remaining quota of 8",
    "level=fatal msg=failed to fetch Cluster: failed to generate asset \"Platform Permissions Check\": validate AWS credentials: current credentials insufficient for performing cluster installation",
    "level=error msg=Error: no matching Route53Zone found",
    "level=error msg=Bootstrap failed to complete: timed out waiting for the condition\nlevel=fatal msg=Bootstrap failed to complete",
    "level=fatal msg=failed to fetch Master Machines: failed to load asset \"Install Config\": controlPlane.replicas: Invalid value: 2",
    "level=error msg=Error: Provider produced inconsistent result after apply",
];

/// A short hex digest of `text` (FNV-1a): the same job always plays out the same way in a seed.
fn hash(text: &str) -> String {
    let h = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("{h:016x}")
}

#[async_trait::async_trait]
impl Jobs for SimJobs {
    async fn start(&self, spec: &JobSpec) -> Result<String> {
        self.advance().await;
        let id = format!("{}.{}.{}", spec.cluster, spec.kind.name(), spec.run);
        let draw = u64::from_str_radix(&hash(&id)[8..], 16).unwrap_or_default();
        let faulty = self.faulty.load(std::sync::atomic::Ordering::Relaxed);
        // Minutes, not openshift-install's forty: the simulation's bounds on serving a claim hold an install of the
        // other clouds' few minutes.
        let (ending, minutes) = match (spec.kind, faulty, draw % 100) {
            (JobKind::Install, true, 0..=14) => (Ending::Fails, 1 + draw % 4),
            (JobKind::Install, true, 15..=24) => (Ending::Hangs, 0),
            (JobKind::Install, _, _) => (Ending::Succeeds, 2 + draw % 4),
            (JobKind::Destroy, true, 0..=19) => (Ending::Fails, 1 + draw % 2),
            (JobKind::Destroy, _, _) => (Ending::Succeeds, 1 + draw % 2),
        };
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        let mut broken = self.broken.lock().unwrap_or_else(|e| e.into_inner());
        if jobs.contains_key(&id) {
            broken.push(format!("job {id} started twice"));
        }
        if let Some((other, _)) =
            jobs.iter().find(|(_, j)| j.spec.cluster == spec.cluster && j.state == JobState::Running)
        {
            broken.push(format!("job {id} started while {other} of the same cluster ran"));
        }
        let job = Job {
            spec: spec.clone(),
            order: jobs.len(),
            started: self.clock.now(),
            takes: Duration::from_secs(60 * minutes),
            ending,
            launched: None,
            state: JobState::Running,
        };
        jobs.insert(id.clone(), job);
        Ok(id)
    }

    async fn state(&self, id: &str) -> Result<JobState> {
        self.advance().await;
        let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        Ok(jobs.get(id).map_or_else(|| JobState::Failed("no such job".into()), |j| j.state.clone()))
    }

    async fn stop(&self, id: &str) -> Result<()> {
        self.advance().await;
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(job) = jobs.get_mut(id).filter(|j| j.state == JobState::Running) {
            // Stopped where it stood: what an install launched stays for the destroy to remove.
            job.state = JobState::Failed(format!("{} cluster was stopped", job.verb()));
        }
        Ok(())
    }
}
