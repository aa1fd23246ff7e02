//! The webhook contract (`shared/clouds/provisioner.openapi.json`), answered by running openshift-install.
//!
//! - `PUT …/clusters/{id}`: a new attempt renders the pool's template (the one it names by reference, checked
//!   against its pin, or its settings' own) for the cluster, checks it against
//!   openshift-install's schema (a `400` naming the field if it does not fit), writes `install-config.yaml` to the
//!   cluster's install directory, with the pool's extra manifests rendered and checked beside it
//!   ([`crate::manifests`]), and starts `openshift-install create cluster` as a job. The same attempt again is a
//!   look.
//! - `GET …/clusters/{id}`: moves the cluster on from its job's state and answers where it stands. A finished
//!   install's `metadata.json` gives the infraId, its kubeconfig and kubeadmin password become secrets tagged for
//!   the pool, and the answer is `Ready` with the outputs. A failed install's resources are destroyed before the
//!   attempt is answered `Failed` with the log's excerpt, so the next attempt starts clean.
//! - `DELETE …/clusters/{id}`: stops an install under way, runs `openshift-install destroy cluster` (again, until
//!   it succeeds), then removes the secrets, the directory and the record: `404` from then on.
//! - `GET …/clusters?pool=`: every cluster the installer holds for the pool.
//!
//! Every request must carry a valid Standard Webhooks signature, and its `webhook-id` must name what the request
//! does as Apiary's client writes it (`<cluster>.PutCluster.<attempt>` for a `PUT` of that cluster and attempt,
//! `<cluster>.GetCluster.<n>`, `<cluster>.DeleteCluster.<n>`, `<pool>.list.<timestamp>`): the signature covers the id
//! and the body, so a look's signature (an empty body) cannot be replayed as another cluster's removal. An id
//! accepted once is remembered while its signature may be replayed ([`Replays`]); the same id for another
//! request is refused. Both refusals are `401`, with nothing done. Every record write is conditional on the revision
//! read; a lost condition re-reads and answers from what the other writer left. A failure of the installer's own
//! stores or runner is a `503`, which Apiary retries.

use std::collections::BTreeMap;
use std::sync::Arc;

use apiary_clouds::secrets::SecretCache;
use apiary_clouds::webhook::{ClusterAnswer, InstallRequest};
use apiary_ports::{Error, Result};
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};

use crate::admission::{bound, digest, listed_pool, verified, REPLAY_SECONDS};
use crate::manifests::Manifest;
use crate::model::{Phase, Record, DESTROY_TIMEOUT};
use crate::outputs::{excerpt, files, kubeconfig_server, Metadata};
use crate::ports::{Dirs, JobKind, JobSpec, JobState, Jobs, Pools, Records, Replays, Vault};

/// How many transitions one request takes a cluster through at most (a finished job, its outputs, the answer).
const STEPS: usize = 4;
/// What the answer suggests while an install runs.
const LOOK_AGAIN_SECONDS: u64 = 30;

/// The installer, over its ports.
#[derive(Clone)]
pub struct Installer {
    /// Each pool's settings.
    pub pools: Arc<dyn Pools>,
    /// The records.
    pub records: Arc<dyn Records>,
    /// The signed requests accepted, while their signatures may be replayed.
    pub replays: Arc<dyn Replays>,
    /// The install directories.
    pub dirs: Arc<dyn Dirs>,
    /// Where jobs run.
    pub jobs: Arc<dyn Jobs>,
    /// Where the clusters' credentials are stored.
    pub vault: Arc<dyn Vault>,
    /// The pull secrets and SSH keys, read for a pool only if tagged for it.
    pub secrets: Arc<SecretCache>,
    /// The signing keys (`whsec_…`) a request may be signed with (more than one during a rotation).
    pub keys: Vec<String>,
    /// The time, for a signature's tolerance and the replays' expiry (the system's; the simulation's in it).
    pub clock: Arc<dyn apiary_ports::clock::Clock>,
}

/// An answer: status and JSON body.
type Answer = (StatusCode, Value);

fn message(status: StatusCode, text: impl Into<String>) -> Answer {
    (status, json!({ "message": text.into() }))
}

impl Installer {
    /// Answers one request of the contract.
    pub async fn handle(&self, req: Request<Bytes>) -> Response<Bytes> {
        let (status, body) = match self.admitted(&req).await {
            Ok(Err(why)) => message(StatusCode::UNAUTHORIZED, why),
            Ok(Ok(())) => self.route(&req).await.unwrap_or_else(|e| {
                tracing::warn!(error = %e, path = req.uri().path(), "the installer could not answer");
                message(StatusCode::SERVICE_UNAVAILABLE, format!("the installer could not answer: {e}"))
            }),
            Err(e) => {
                tracing::warn!(error = %e, "the installer could not remember a request");
                message(StatusCode::SERVICE_UNAVAILABLE, format!("the installer could not answer: {e}"))
            }
        };
        let mut response = Response::new(Bytes::from(body.to_string()));
        *response.status_mut() = status;
        response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
        response
    }

    /// Whether `req` may be answered: signed with a key of the installer's, its id naming what it does, and not a
    /// replay of an id accepted for another request. `Err` when the replays cannot be read (a `503`).
    async fn admitted(&self, req: &Request<Bytes>) -> Result<std::result::Result<(), String>> {
        let now = self.clock.now().timestamp();
        if let Err(why) = verified(&self.keys, req, now).and_then(|()| bound(req)) {
            return Ok(Err(why));
        }
        let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or_default();
        let id = header("webhook-id");
        let timestamp: i64 = header("webhook-timestamp").parse().unwrap_or_default();
        // The signature is good five minutes either side of its timestamp: remembered past that, and a minute more.
        let expires = timestamp.max(now) + REPLAY_SECONDS;
        Ok(match self.replays.accept(id, &digest(req), now, expires).await? {
            true => Ok(()),
            false => Err(format!("webhook-id {id:?} was accepted before for another request: a replay")),
        })
    }

    async fn route(&self, req: &Request<Bytes>) -> Result<Answer> {
        let segments: Vec<&str> = req.uri().path().split('/').filter(|s| !s.is_empty()).collect();
        match (req.method(), segments.as_slice()) {
            (&Method::GET, [.., "clusters"]) => self.list(listed_pool(req)).await,
            (_, [.., "clusters", id]) if !valid_id(id) => Ok(message(
                StatusCode::BAD_REQUEST,
                "id: a cluster's id is 1 to 128 letters, digits, '.', '_' and '-', not starting with '.'",
            )),
            (method, [.., "clusters", id]) => {
                let id = (*id).to_owned();
                match *method {
                    Method::PUT => self.put(&id, req.body()).await,
                    Method::GET => self.get(&id).await,
                    Method::DELETE => self.delete(&id).await,
                    _ => Ok(message(StatusCode::METHOD_NOT_ALLOWED, format!("{method} is not allowed"))),
                }
            }
            _ => Ok(message(StatusCode::NOT_FOUND, format!("no route {}", req.uri().path()))),
        }
    }

    async fn list(&self, pool: &str) -> Result<Answer> {
        if pool.is_empty() {
            return Ok(message(StatusCode::BAD_REQUEST, "pool: the query names no pool (?pool=<name>)"));
        }
        if let Err(why) = pool_name(pool) {
            return Ok(message(StatusCode::BAD_REQUEST, why));
        }
        let clusters: Vec<Value> = self
            .records
            .list(pool)
            .await?
            .iter()
            .filter(|r| r.phase != Phase::Removed)
            .map(|r| json!({"id": r.id, "state": r.phase.state()}))
            .collect();
        Ok((StatusCode::OK, json!({ "clusters": clusters })))
    }

    async fn put(&self, id: &str, body: &[u8]) -> Result<Answer> {
        let req: InstallRequest = match serde_json::from_slice(body) {
            Ok(req) => req,
            Err(e) => return Ok(refused(0, format!("the install request: {e}"))),
        };
        if req.cluster_id != id {
            return Ok(refused(req.attempt, format!("clusterId: {:?} is not the path's {id:?}", req.cluster_id)));
        }
        if let Err(why) = pool_name(&req.pool) {
            return Ok(refused(req.attempt, why));
        }
        for _ in 0..STEPS {
            let existing = self.records.get(id).await?;
            match existing {
                // A removal is final: no attempt installs while it runs, and none it covered installs after.
                Some(r) if r.phase == Phase::Destroying => {
                    return Ok(refused(req.attempt, format!("cluster {id} is being removed (attempt {})", r.attempt)));
                }
                Some(r) if r.phase == Phase::Removed && req.attempt <= r.attempt => {
                    let why = format!(
                        "cluster {id} was removed at attempt {}: attempt {} cannot install",
                        r.attempt, req.attempt
                    );
                    return Ok(refused(req.attempt, why));
                }
                Some(r) if r.phase != Phase::Removed && r.attempt >= req.attempt => return self.look(r).await,
                existing => match self.begin(&req, existing).await? {
                    Begun::Answered(answer) => return Ok(answer),
                    Begun::Reread => continue,
                },
            }
        }
        Err(Error::Conflict(format!("cluster {id}: its record kept changing under the install request")))
    }

    async fn get(&self, id: &str) -> Result<Answer> {
        match self.records.get(id).await? {
            None => Ok(message(StatusCode::NOT_FOUND, format!("no cluster {id}"))),
            Some(r) if r.phase == Phase::Removed => Ok(gone(id)),
            Some(r) => self.look(r).await,
        }
    }

    async fn delete(&self, id: &str) -> Result<Answer> {
        for _ in 0..STEPS {
            let Some(mut r) = self.records.get(id).await? else {
                return Ok(message(StatusCode::NOT_FOUND, format!("no cluster {id}")));
            };
            if r.phase == Phase::Removed {
                return Ok(gone(id));
            }
            if r.phase != Phase::Destroying {
                let expected = r.revision;
                match r.phase {
                    Phase::Installing => {
                        if let Some(job) = r.job.take() {
                            self.jobs.stop(&job).await?;
                            r.stopping = Some(job);
                        }
                    }
                    // Its destroy (or the stop before it) serves the removal.
                    Phase::CleaningUp => {}
                    Phase::Ready | Phase::Failed | Phase::Destroying | Phase::Removed => r.job = None,
                }
                r.phase = Phase::Destroying;
                r.reinstall = false;
                if !self.write(&mut r, Some(expected)).await? {
                    continue;
                }
            }
            return self.look(r).await;
        }
        Err(Error::Conflict(format!("cluster {id}: its record kept changing under the removal")))
    }

    /// Starts attempt `req.attempt`: over nothing, a failed attempt, or one Apiary gave up on (whose resources
    /// are destroyed first).
    async fn begin(&self, req: &InstallRequest, existing: Option<Record>) -> Result<Begun> {
        let expected = existing.as_ref().map(|r| r.revision);
        let Some(settings) = self.pools.settings(&req.pool).await? else {
            return Ok(Begun::Answered(refused(
                req.attempt,
                format!("pool {:?} has no settings at the installer (pools/{}.json)", req.pool, req.pool),
            )));
        };
        let timeout = match settings.timeout() {
            Ok(timeout) => timeout,
            Err(why) => return Ok(Begun::Answered(refused(req.attempt, format!("pools/{}.json: {why}", req.pool)))),
        };
        let config = match self.install_config(req, &settings).await? {
            Ok(config) => config,
            Err(why) => return Ok(Begun::Answered(refused(req.attempt, why))),
        };
        // The pool's release when it names one, else the installer's settings'.
        if let Some(Err(why)) = req.release.as_deref().map(apiary_planner::validate::check_image_ref) {
            return Ok(Begun::Answered(refused(req.attempt, format!("release: {why}"))));
        }
        let release = req.release.clone().unwrap_or_else(|| settings.release_image.clone());
        let mut record = Record {
            id: req.cluster_id.clone(),
            pool: req.pool.clone(),
            cluster_name: req.cluster_name.clone(),
            domain: config.domain,
            attempt: req.attempt,
            release_image: release.clone(),
            install_timeout: timeout.as_secs(),
            role_arn: settings.role_arn.clone(),
            platform: Some(config.platform.clone()),
            phase: Phase::Installing,
            job: None,
            stopping: None,
            runs: existing.as_ref().map_or(0, |r| r.runs),
            reinstall: false,
            infra_id: None,
            outputs: BTreeMap::new(),
            secrets: existing.as_ref().map(|r| r.secrets.clone()).unwrap_or_default(),
            message: None,
            revision: 0,
        };
        // What an earlier attempt left running or standing is destroyed before this one installs.
        if let Some(old) = existing.filter(|r| matches!(r.phase, Phase::Installing | Phase::CleaningUp | Phase::Ready))
        {
            record.phase = Phase::CleaningUp;
            record.reinstall = true;
            // The old attempt's destroy, kept; or its install, stopped first.
            (record.job, record.stopping) = match old.phase {
                Phase::CleaningUp => (old.job.clone(), old.stopping.clone()),
                _ => (None, old.job.clone()),
            };
            // It is destroyed with the release it was installed from, in the account it was installed in.
            record.release_image = old.release_image.clone();
            record.role_arn = old.role_arn.clone();
            if let (Phase::Installing, Some(job)) = (old.phase, &record.stopping) {
                self.jobs.stop(job).await?;
            }
            // The new attempt's install-config waits beside the old directory's; it is put in place once the
            // clean-up is done.
            self.dirs.write(&record.id, NEXT_INSTALL_CONFIG, config.text.as_bytes()).await?;
            self.dirs.write(&record.id, NEXT_PULL_SECRET, config.pull.as_bytes()).await?;
            self.dirs.write(&record.id, NEXT_RELEASE, release.as_bytes()).await?;
            self.dirs.write(&record.id, NEXT_MANIFESTS, &serde_json::to_vec(&config.manifests)?).await?;
            if !self.write(&mut record, expected).await? {
                return Ok(Begun::Reread);
            }
            return Ok(Begun::Answered(self.look(record).await?));
        }
        self.dirs.clear(&record.id).await?;
        self.dirs.write(&record.id, files::INSTALL_CONFIG, config.text.as_bytes()).await?;
        self.dirs.write(&record.id, files::PULL_SECRET, config.pull.as_bytes()).await?;
        self.place(&record.id, &config.manifests).await?;
        if !self.write(&mut record, expected).await? {
            return Ok(Begun::Reread);
        }
        Ok(Begun::Answered(self.look(record).await?))
    }

    /// Writes the pool's manifests where the install job takes them from.
    async fn place(&self, id: &str, manifests: &[Manifest]) -> Result<()> {
        for manifest in manifests {
            self.dirs.write(id, &manifest.waiting(), manifest.text.as_bytes()).await?;
        }
        Ok(())
    }

    /// Moves `r` on as far as its jobs allow, and answers where it stands.
    async fn look(&self, mut r: Record) -> Result<Answer> {
        for _ in 0..STEPS {
            let expected = r.revision;
            let moved = match self.step(&mut r).await? {
                Step::Stay => return Ok(answer(&r)),
                Step::Gone => {
                    // The record stays as the removal's tombstone.
                    r.phase = Phase::Removed;
                    r.job = None;
                    r.stopping = None;
                    r.outputs.clear();
                    r.infra_id = None;
                    r.message = None;
                    return Ok(if self.write(&mut r, Some(expected)).await? {
                        gone(&r.id)
                    } else {
                        self.reread(&r.id).await?
                    });
                }
                Step::Moved => self.write(&mut r, Some(expected)).await?,
            };
            if !moved {
                return self.reread(&r.id).await;
            }
        }
        Ok(answer(&r))
    }

    async fn reread(&self, id: &str) -> Result<Answer> {
        Ok(match self.records.get(id).await? {
            Some(r) => answer(&r),
            None => message(StatusCode::NOT_FOUND, format!("cluster {id} is gone")),
        })
    }

    /// One transition of `r`, if its jobs allow one.
    async fn step(&self, r: &mut Record) -> Result<Step> {
        if let Some(stopping) = r.stopping.clone() {
            if self.jobs.state(&stopping).await? == JobState::Running {
                return Ok(Step::Stay);
            }
            r.stopping = None;
            return Ok(Step::Moved);
        }
        match r.phase {
            Phase::Ready | Phase::Failed | Phase::Removed => Ok(Step::Stay),
            Phase::Installing => self.installing(r).await,
            Phase::CleaningUp => self.cleaning_up(r).await,
            Phase::Destroying => self.destroying(r).await,
        }
    }

    async fn installing(&self, r: &mut Record) -> Result<Step> {
        let Some(job) = r.job.clone() else {
            match self.start(r, JobKind::Install).await {
                Ok(job) => r.job = Some(job),
                // The runner refuses it for good (a missing project, a role it may not use): the attempt fails.
                Err(e) if !e.is_retryable() => {
                    r.phase = Phase::Failed;
                    r.message = Some(format!("attempt {}: the install job could not start: {e}", r.attempt));
                }
                Err(e) => return Err(e),
            }
            return Ok(Step::Moved);
        };
        match self.jobs.state(&job).await? {
            JobState::Running => Ok(Step::Stay),
            JobState::Succeeded => {
                r.job = None;
                match self.collect(r).await? {
                    Ok(()) => r.phase = Phase::Ready,
                    Err(why) => self.clean_up(r, format!("the install finished, but {why}")).await?,
                }
                Ok(Step::Moved)
            }
            JobState::Failed(why) => {
                r.job = None;
                let log = self.dirs.read(&r.id, files::LOG).await?.unwrap_or_default();
                let said = excerpt(&String::from_utf8_lossy(&log));
                let text = if said.is_empty() {
                    format!("attempt {}: openshift-install {why}", r.attempt)
                } else {
                    format!("attempt {}: openshift-install {why}: {said}", r.attempt)
                };
                self.clean_up(r, text).await?;
                Ok(Step::Moved)
            }
        }
    }

    /// After a failed install: destroy what it made (if it got as far as `metadata.json`), then answer Failed.
    async fn clean_up(&self, r: &mut Record, why: String) -> Result<()> {
        r.message = Some(why);
        if self.dirs.read(&r.id, files::METADATA).await?.is_some() {
            r.job = Some(self.start(r, JobKind::Destroy).await?);
            r.phase = Phase::CleaningUp;
        } else {
            r.phase = Phase::Failed;
        }
        Ok(())
    }

    async fn cleaning_up(&self, r: &mut Record) -> Result<Step> {
        let Some(job) = r.job.clone() else {
            if self.dirs.read(&r.id, files::METADATA).await?.is_none() {
                return self.cleaned(r).await;
            }
            r.job = Some(self.start(r, JobKind::Destroy).await?);
            return Ok(Step::Moved);
        };
        match self.jobs.state(&job).await? {
            JobState::Running => Ok(Step::Stay),
            JobState::Succeeded => {
                r.job = None;
                self.cleaned(r).await
            }
            JobState::Failed(why) => {
                // Run again: a destroy that stopped half-way is finished by the next.
                tracing::warn!(cluster = %r.id, %why, "a clean-up destroy failed; it runs again");
                r.job = None;
                Ok(Step::Moved)
            }
        }
    }

    /// A clean-up done: the attempt is Failed, or the next one's install starts.
    async fn cleaned(&self, r: &mut Record) -> Result<Step> {
        self.remove_secrets(r).await?;
        r.infra_id = None;
        r.outputs.clear();
        if !r.reinstall {
            r.phase = Phase::Failed;
            return Ok(Step::Moved);
        }
        let Some(config) = self.dirs.read(&r.id, NEXT_INSTALL_CONFIG).await? else {
            r.phase = Phase::Failed;
            r.message =
                Some(format!("attempt {}: its install-config was lost; the next attempt renders it", r.attempt));
            return Ok(Step::Moved);
        };
        // The next attempt installs with the pool's release as it is now.
        match self.pools.settings(&r.pool).await? {
            Some(settings) => {
                r.install_timeout = settings.timeout().map_or(r.install_timeout, |t| t.as_secs());
                // The release the attempt asked for, kept beside its install-config while the old one went.
                let asked =
                    self.dirs.read(&r.id, NEXT_RELEASE).await?.map(|b| String::from_utf8_lossy(&b).into_owned());
                r.release_image = asked.unwrap_or(settings.release_image);
                r.role_arn = settings.role_arn;
            }
            None => {
                r.phase = Phase::Failed;
                r.message = Some(format!("attempt {}: pool {:?} has no settings at the installer", r.attempt, r.pool));
                return Ok(Step::Moved);
            }
        }
        let pull = self.dirs.read(&r.id, NEXT_PULL_SECRET).await?.unwrap_or_default();
        let manifests: Vec<Manifest> = match self.dirs.read(&r.id, NEXT_MANIFESTS).await? {
            Some(bytes) => serde_json::from_slice(&bytes)?,
            None => Vec::new(),
        };
        self.dirs.clear(&r.id).await?;
        self.dirs.write(&r.id, files::INSTALL_CONFIG, &config).await?;
        self.dirs.write(&r.id, files::PULL_SECRET, &pull).await?;
        self.place(&r.id, &manifests).await?;
        r.reinstall = false;
        r.message = None;
        r.phase = Phase::Installing;
        Ok(Step::Moved)
    }

    async fn destroying(&self, r: &mut Record) -> Result<Step> {
        let Some(job) = r.job.clone() else {
            if self.dirs.read(&r.id, files::METADATA).await?.is_none() {
                // Nothing was made (or a destroy already finished): only what the installer stored remains.
                self.remove_secrets(r).await?;
                self.dirs.clear(&r.id).await?;
                return Ok(Step::Gone);
            }
            r.job = Some(self.start(r, JobKind::Destroy).await?);
            return Ok(Step::Moved);
        };
        match self.jobs.state(&job).await? {
            JobState::Running => Ok(Step::Stay),
            JobState::Succeeded => {
                self.remove_secrets(r).await?;
                self.dirs.clear(&r.id).await?;
                Ok(Step::Gone)
            }
            JobState::Failed(why) => {
                let log = self.dirs.read(&r.id, files::LOG).await?.unwrap_or_default();
                let said = excerpt(&String::from_utf8_lossy(&log));
                r.message = Some(format!("openshift-install destroy {why}: {said}; it runs again"));
                r.job = None;
                Ok(Step::Moved)
            }
        }
    }

    /// A finished install's outputs: the ids from `metadata.json`, the credentials stored as secrets.
    async fn collect(&self, r: &mut Record) -> Result<std::result::Result<(), String>> {
        let Some(metadata) = self.dirs.read(&r.id, files::METADATA).await? else {
            return Ok(Err("left no metadata.json".to_owned()));
        };
        let metadata = match Metadata::parse(&metadata) {
            Ok(m) => m,
            Err(why) => return Ok(Err(why)),
        };
        let Some(kubeconfig) = self.dirs.read(&r.id, files::KUBECONFIG).await? else {
            return Ok(Err("left no auth/kubeconfig".to_owned()));
        };
        let kubeconfig = String::from_utf8_lossy(&kubeconfig).into_owned();
        let Some(password) = self.dirs.read(&r.id, files::KUBEADMIN_PASSWORD).await? else {
            return Ok(Err("left no auth/kubeadmin-password".to_owned()));
        };
        let password = String::from_utf8_lossy(&password).trim().to_owned();
        r.infra_id = Some(metadata.infra_id.clone());
        let name = |what: &str| format!("apiary-installer/{}/{}/{what}", r.pool, r.id);
        let kubeconfig_arn = self.vault.store(&name("kubeconfig"), &kubeconfig, &r.pool).await?;
        remember(&mut r.secrets, &kubeconfig_arn);
        let password_arn = self.vault.store(&name("kubeadmin-password"), &password, &r.pool).await?;
        remember(&mut r.secrets, &password_arn);
        let api = kubeconfig_server(&kubeconfig).unwrap_or_else(|| format!("https://api.{}:6443", r.domain));
        r.outputs = BTreeMap::from([
            ("apiUrl".to_owned(), api),
            ("consoleUrl".to_owned(), format!("https://console-openshift-console.apps.{}", r.domain)),
            ("kubeconfigSecretArn".to_owned(), kubeconfig_arn),
            ("kubeadminPasswordSecretArn".to_owned(), password_arn),
            ("openshiftClusterId".to_owned(), metadata.cluster_id),
        ]);
        Ok(Ok(()))
    }

    async fn remove_secrets(&self, r: &mut Record) -> Result<()> {
        for arn in std::mem::take(&mut r.secrets) {
            self.vault.remove(&arn).await?;
        }
        Ok(())
    }

    async fn start(&self, r: &mut Record, kind: JobKind) -> Result<String> {
        let timeout = match kind {
            JobKind::Install => std::time::Duration::from_secs(r.install_timeout),
            JobKind::Destroy => DESTROY_TIMEOUT,
        };
        self.hand_credentials(r).await?;
        r.runs += 1;
        let spec = JobSpec {
            kind,
            cluster: r.id.clone(),
            pool: r.pool.clone(),
            run: r.runs,
            release_image: r.release_image.clone(),
            timeout,
            role_arn: r.role_arn.clone(),
        };
        let job = self.jobs.start(&spec).await?;
        tracing::info!(cluster = %r.id, pool = %r.pool, job = %job, kind = kind.name(), "a job started");
        Ok(job)
    }

    /// On a cloud whose jobs need credentials, the pool's written where the job takes them from; the job moves them
    /// out of the directory before anything else runs. A pool whose settings no longer name them fails the job's
    /// start for good.
    async fn hand_credentials(&self, r: &Record) -> Result<()> {
        let Some(cloud) = r.platform.as_deref().filter(|p| crate::credentials::needed(p)) else { return Ok(()) };
        let Some(arn) = self.pools.settings(&r.pool).await?.and_then(|s| s.credentials) else {
            return Err(Error::Config(format!("pools/{}.json names no credentials for a {cloud} cluster", r.pool)));
        };
        let secret = self.secrets.get(&arn, &r.pool).await?;
        self.dirs.write(&r.id, &crate::credentials::file(cloud), secret.expose().as_bytes()).await
    }

    /// Writes `r` conditionally on revision `expected`; `false` when the condition was lost.
    async fn write(&self, r: &mut Record, expected: Option<u64>) -> Result<bool> {
        r.revision = expected.map_or(1, |e| e + 1);
        self.records.put(r, expected).await
    }
}

/// Where the next attempt's install-config waits while an earlier attempt is cleaned up.
const NEXT_INSTALL_CONFIG: &str = ".apiary/next-install-config.yaml";
/// The release the next attempt installs, kept beside its install-config.
const NEXT_RELEASE: &str = ".apiary/next-release";
/// And its pull secret.
const NEXT_PULL_SECRET: &str = ".apiary/next-pull-secret.json";
/// And its manifests (a JSON list of [`Manifest`]).
const NEXT_MANIFESTS: &str = ".apiary/next-manifests.json";

/// How beginning an install attempt went: answered, or another request wrote the record first and it must be read
/// again.
enum Begun {
    Answered(Answer),
    Reread,
}

enum Step {
    Stay,
    Moved,
    Gone,
}

/// Whether `id` may name a cluster (and its install directory).
/// `pool` checked by the planner's rule for a pool's name (a DNS label): the name becomes a file's path and an
/// object's key (`pools/<pool>.json`) and part of the secrets' names, so nothing else may pass.
pub fn pool_name(pool: &str) -> std::result::Result<(), String> {
    apiary_planner::validate::validate_name("pool", pool).map_err(|e| format!("{}: {}", e.field, e.message))
}

fn valid_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && !id.starts_with('.')
        && id.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

fn remember(secrets: &mut Vec<String>, arn: &str) {
    if !secrets.iter().any(|s| s == arn) {
        secrets.push(arn.to_owned());
    }
}

fn refused(attempt: u32, why: impl Into<String>) -> Answer {
    let mut body = json!({"state": "Failed", "message": why.into()});
    if attempt > 0 {
        body["attempt"] = json!(attempt);
    }
    (StatusCode::BAD_REQUEST, body)
}

/// The contract's answer for `r`.
/// The answer about a removed cluster: none.
fn gone(id: &str) -> Answer {
    message(StatusCode::NOT_FOUND, format!("cluster {id} is gone"))
}

fn answer(r: &Record) -> Answer {
    if r.phase == Phase::Removed {
        return gone(&r.id);
    }
    let mut out = ClusterAnswer { state: r.phase.state().to_owned(), attempt: Some(r.attempt), ..Default::default() };
    let status = match r.phase {
        Phase::Ready => {
            out.infra_id = r.infra_id.clone();
            out.outputs = r.outputs.clone();
            StatusCode::OK
        }
        Phase::Failed => {
            out.message = r.message.clone();
            StatusCode::CONFLICT
        }
        Phase::Installing | Phase::CleaningUp => {
            out.retry_after_seconds = Some(LOOK_AGAIN_SECONDS);
            StatusCode::ACCEPTED
        }
        Phase::Destroying => {
            out.message = r.message.clone();
            StatusCode::ACCEPTED
        }
        Phase::Removed => StatusCode::NOT_FOUND,
    };
    (status, serde_json::to_value(out).unwrap_or_default())
}
