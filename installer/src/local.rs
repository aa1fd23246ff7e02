//! The installer's ports on one machine (`make run`, tests): settings, records and install directories as files
//! under a root, and jobs as local processes of an `openshift-install` (the real one, or the stand-in
//! `fake-openshift-install`).
//!
//! ```text
//! <root>/pools/<pool>.json        a pool's settings
//! <root>/templates/<name>.yaml    an install-config template pools name (`installConfigTemplate`)
//! <root>/records/<id>.json        a cluster's record
//! <root>/clusters/<id>/…          its install directory
//! <root>/credentials/<job>.<cloud>.json  a running job's cloud credentials (Azure, GCP), gone when it ends
//! <root>/jobs/<job>.out           a job's output, each line redacted (`outputs::redact`): openshift-install
//!                                  prints the kubeadmin password, which only the install directory's log keeps
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use apiary_ports::{Error, Result};
use async_trait::async_trait;
use tokio::sync::Notify;

use crate::model::{PoolSettings, Record};
use crate::ports::{Dirs, JobKind, JobSpec, JobState, Jobs, Pools, Records};

fn io(what: &str, e: std::io::Error) -> Error {
    Error::service("local", format!("{what}: {e}"), true)
}

async fn read_if_there(path: &Path) -> Result<Option<Vec<u8>>> {
    match tokio::fs::read(path).await {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(&path.display().to_string(), e)),
    }
}

/// Writes `bytes` to `path` whole or not at all (a temporary file renamed over it).
async fn write_whole(path: &Path, bytes: &[u8]) -> Result<()> {
    let parent = path.parent().unwrap_or(Path::new("."));
    tokio::fs::create_dir_all(parent).await.map_err(|e| io(&parent.display().to_string(), e))?;
    let temporary = path.with_extension("partial");
    tokio::fs::write(&temporary, bytes).await.map_err(|e| io(&temporary.display().to_string(), e))?;
    tokio::fs::rename(&temporary, path).await.map_err(|e| io(&path.display().to_string(), e))
}

/// Pools' settings as files, `<root>/pools/<pool>.json`.
pub struct LocalPools {
    root: PathBuf,
}

impl LocalPools {
    /// The settings under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// Writes `pool`'s settings.
    pub async fn put(&self, pool: &str, settings: &PoolSettings) -> Result<()> {
        write_whole(&self.root.join("pools").join(format!("{pool}.json")), &serde_json::to_vec_pretty(settings)?).await
    }

    /// Keeps install-config template `text` under `name`.
    pub async fn put_template(&self, name: &str, text: &str) -> Result<()> {
        crate::config::template_name(name).map_err(Error::Config)?;
        write_whole(&self.root.join("templates").join(format!("{name}.yaml")), text.as_bytes()).await
    }
}

#[async_trait]
impl Pools for LocalPools {
    async fn settings(&self, pool: &str) -> Result<Option<PoolSettings>> {
        crate::service::pool_name(pool).map_err(Error::Config)?;
        let path = self.root.join("pools").join(format!("{pool}.json"));
        let Some(bytes) = read_if_there(&path).await? else { return Ok(None) };
        PoolSettings::parse(&bytes).map(Some).map_err(|why| Error::Config(format!("{}: {why}", path.display())))
    }

    async fn template(&self, name: &str) -> Result<Option<String>> {
        crate::config::template_name(name).map_err(Error::Config)?;
        let path = self.root.join("templates").join(format!("{name}.yaml"));
        let Some(bytes) = read_if_there(&path).await? else { return Ok(None) };
        String::from_utf8(bytes).map(Some).map_err(|_| Error::Config(format!("{}: not UTF-8", path.display())))
    }
}

/// The accepted requests as files, `<root>/replays/<sha-256 of the id>.json` (`{digest, expires}`), each write
/// conditional under one lock (one process).
pub struct LocalReplays {
    root: PathBuf,
    lock: tokio::sync::Mutex<()>,
}

impl LocalReplays {
    /// The accepted requests under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into().join("replays"), lock: tokio::sync::Mutex::new(()) }
    }
}

#[async_trait]
impl crate::ports::Replays for LocalReplays {
    async fn accept(&self, id: &str, digest: &str, now: i64, expires: i64) -> Result<bool> {
        use sha2::Digest;
        let _held = self.lock.lock().await;
        let name: String = sha2::Sha256::digest(id.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
        let path = self.root.join(format!("{name}.json"));
        if let Some(bytes) = read_if_there(&path).await? {
            let seen: serde_json::Value = serde_json::from_slice(&bytes)?;
            let live = seen["expires"].as_i64().is_some_and(|at| at >= now);
            if live && seen["digest"].as_str() != Some(digest) {
                return Ok(false);
            }
        }
        let entry = serde_json::json!({"id": id, "digest": digest, "expires": expires});
        write_whole(&path, &serde_json::to_vec(&entry)?).await?;
        Ok(true)
    }
}

/// Records as files, `<root>/records/<id>.json`, each write conditional under one lock (one process).
pub struct LocalRecords {
    root: PathBuf,
    lock: tokio::sync::Mutex<()>,
}

impl LocalRecords {
    /// The records under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into().join("records"), lock: tokio::sync::Mutex::new(()) }
    }

    fn path(&self, id: &str) -> PathBuf {
        self.root.join(format!("{id}.json"))
    }

    async fn read(&self, id: &str) -> Result<Option<Record>> {
        match read_if_there(&self.path(id)).await? {
            Some(bytes) => Ok(Some(serde_json::from_slice(&bytes)?)),
            None => Ok(None),
        }
    }
}

#[async_trait]
impl Records for LocalRecords {
    async fn get(&self, id: &str) -> Result<Option<Record>> {
        let _held = self.lock.lock().await;
        self.read(id).await
    }

    async fn put(&self, record: &Record, expected: Option<u64>) -> Result<bool> {
        let _held = self.lock.lock().await;
        if self.read(&record.id).await?.map(|r| r.revision) != expected {
            return Ok(false);
        }
        write_whole(&self.path(&record.id), &serde_json::to_vec_pretty(record)?).await?;
        Ok(true)
    }

    async fn delete(&self, id: &str, expected: u64) -> Result<bool> {
        let _held = self.lock.lock().await;
        if self.read(id).await?.map(|r| r.revision) != Some(expected) {
            return Ok(false);
        }
        tokio::fs::remove_file(self.path(id)).await.map_err(|e| io(id, e))?;
        Ok(true)
    }

    async fn list(&self, pool: &str) -> Result<Vec<Record>> {
        let _held = self.lock.lock().await;
        let mut out = Vec::new();
        let mut entries = match tokio::fs::read_dir(&self.root).await {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(io("records", e)),
        };
        while let Some(entry) = entries.next_entry().await.map_err(|e| io("records", e))? {
            if entry.path().extension().is_some_and(|x| x == "json") {
                let bytes = tokio::fs::read(entry.path()).await.map_err(|e| io("records", e))?;
                let record: Record = serde_json::from_slice(&bytes)?;
                if record.pool == pool {
                    out.push(record);
                }
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }
}

/// Install directories as directories, `<root>/clusters/<id>`.
pub struct LocalDirs {
    root: PathBuf,
}

impl LocalDirs {
    /// The directories under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into().join("clusters") }
    }

    /// The directory of cluster `id`.
    pub fn dir(&self, id: &str) -> PathBuf {
        self.root.join(id)
    }
}

#[async_trait]
impl Dirs for LocalDirs {
    async fn write(&self, id: &str, file: &str, bytes: &[u8]) -> Result<()> {
        write_whole(&self.dir(id).join(file), bytes).await
    }

    async fn read(&self, id: &str, file: &str) -> Result<Option<Vec<u8>>> {
        read_if_there(&self.dir(id).join(file)).await
    }

    async fn clear(&self, id: &str) -> Result<()> {
        match tokio::fs::remove_dir_all(self.dir(id)).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(id, e)),
            _ => Ok(()),
        }
    }
}

/// Jobs as local processes: `<program> create cluster --dir <root>/clusters/<id> --log-level info` (after `create
/// manifests` and the pool's manifests copied into `openshift/`, when it has any), with the runner's environment,
/// stopped at their timeout.
pub struct LocalJobs {
    program: Vec<String>,
    root: PathBuf,
    env: Vec<(String, String)>,
    jobs: Arc<Mutex<HashMap<String, Held>>>,
}

struct Held {
    state: JobState,
    stop: Arc<Notify>,
}

impl LocalJobs {
    /// Runs `program` (its path, then any arguments that come before openshift-install's) on the directories under
    /// `root`, with `env` added to the runner's own environment.
    pub fn new(program: Vec<String>, root: impl Into<PathBuf>, env: Vec<(String, String)>) -> Self {
        Self { program, root: root.into(), env, jobs: Arc::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait]
impl Jobs for LocalJobs {
    async fn start(&self, spec: &JobSpec) -> Result<String> {
        let id = format!("{}.{}.{}", spec.cluster, spec.kind.name(), spec.run);
        // One process a job: a second start of the same job (two looks that both found it to start, before either
        // wrote) is the first. The job is held before its process starts, so the two cannot both start one.
        let stop = Arc::new(Notify::new());
        {
            let mut jobs = self.lock();
            if jobs.contains_key(&id) {
                return Ok(id);
            }
            jobs.insert(id.clone(), Held { state: JobState::Running, stop: stop.clone() });
        }
        match self.spawn(spec, &id, stop).await {
            Ok(()) => Ok(id),
            Err(e) => {
                self.lock().remove(&id);
                Err(e)
            }
        }
    }

    async fn state(&self, id: &str) -> Result<JobState> {
        Ok(match self.lock().get(id) {
            Some(held) => held.state.clone(),
            None => JobState::Failed(format!("job {id} is not known to this runner (it was restarted)")),
        })
    }

    async fn stop(&self, id: &str) -> Result<()> {
        if let Some(held) = self.lock().get(id) {
            held.stop.notify_one();
        }
        Ok(())
    }
}

impl LocalJobs {
    /// Starts job `id`'s first process, held already, and watches its steps to their end.
    async fn spawn(&self, spec: &JobSpec, id: &str, stop: Arc<Notify>) -> Result<()> {
        let dir = LocalDirs::new(&self.root).dir(&spec.cluster);
        tokio::fs::create_dir_all(&dir).await.map_err(|e| io("the install directory", e))?;
        let logs = self.root.join("jobs");
        tokio::fs::create_dir_all(&logs).await.map_err(|e| io("the jobs' logs", e))?;
        let out = std::fs::File::create(logs.join(format!("{id}.out"))).map_err(|e| io("a job's log", e))?;
        let out = Arc::new(Mutex::new(out));
        let handed = take_credentials(&dir, &self.root.join("credentials"), id)
            .map_err(|e| io("the cloud credentials left for the job", e))?;
        let mut env = self.env.clone();
        env.extend(handed.iter().map(|(var, path)| ((*var).to_owned(), path.display().to_string())));
        let path = dir.display().to_string();
        // An install with manifests waiting makes openshift-install's own first, as the buildspec does.
        let mut steps = Vec::new();
        if spec.kind == JobKind::Install && waiting_manifests(&dir).is_some() {
            steps.push(["create", "manifests", "--dir", &path, "--log-level", "info"].map(str::to_owned).to_vec());
        }
        steps.push(spec.kind.args(&path));
        let run = Run { program: self.program.clone(), env, spec: spec.clone(), out };
        let mut steps = steps.into_iter();
        let first = steps.next().unwrap_or_default();
        // A program that cannot start is the start's error.
        let child = run.start(&first)?;
        let (jobs, job, timeout) = (self.jobs.clone(), id.to_owned(), spec.timeout);
        let verb = format!("{} cluster", spec.kind.args("")[0]);
        tokio::spawn(async move {
            let steps = async {
                let (mut child, mut args) = (child, first);
                loop {
                    if let Err(why) = run.finish(child, &args).await {
                        return JobState::Failed(why);
                    }
                    let Some(next) = steps.next() else { return JobState::Succeeded };
                    if let Err(e) = place_manifests(&dir) {
                        return JobState::Failed(format!("the manifests could not be put in openshift/: {e}"));
                    }
                    child = match run.start(&next) {
                        Ok(child) => child,
                        Err(e) => return JobState::Failed(e.to_string()),
                    };
                    args = next;
                }
            };
            // A step stopped or timed out is killed as its future is dropped.
            let state = tokio::select! {
                state = steps => state,
                () = tokio::time::sleep(timeout) => JobState::Failed(format!("{verb} timed out after {}",
                    apiary_planner::duration::format(chrono::TimeDelta::from_std(timeout).unwrap_or_default()))),
                () = stop.notified() => JobState::Failed(format!("{verb} was stopped")),
            };
            // The credentials were the job's alone.
            for (_, path) in handed {
                let _ = std::fs::remove_file(path);
            }
            if let Some(held) = jobs.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&job) {
                held.state = state;
            }
        });
        Ok(())
    }
}

/// One job's processes: the program, its environment and where their output goes.
struct Run {
    program: Vec<String>,
    env: Vec<(String, String)>,
    spec: JobSpec,
    out: Arc<Mutex<std::fs::File>>,
}

impl Run {
    /// Starts the program with `args` after its own.
    fn start(&self, args: &[String]) -> Result<tokio::process::Child> {
        let Some((program, leading)) = self.program.split_first() else {
            return Err(Error::Config("the local runner names no program".into()));
        };
        tokio::process::Command::new(program)
            .args(leading)
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("OPENSHIFT_INSTALL_RELEASE_IMAGE_OVERRIDE", &self.spec.release_image)
            .envs(self.spec.role_arn.iter().map(|role| ("APIARY_INSTALL_ROLE_ARN", role)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| Error::Config(format!("the local runner's program {program}: {e}")))
    }

    /// Waits for `child` (started with `args`), its output copied; `Err` says how it failed.
    async fn finish(&self, mut child: tokio::process::Child, args: &[String]) -> std::result::Result<(), String> {
        let verb = args.iter().take(2).cloned().collect::<Vec<_>>().join(" ");
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        let out = self.out.clone();
        let copying = tokio::spawn(async move { tokio::join!(redacted(stdout, out.clone()), redacted(stderr, out)) });
        let status = child.wait().await;
        // The output's last lines are written before the step is seen to end (the pipes close with the process;
        // the bound is for a child of it that kept them open).
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), copying).await;
        match status {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => Err(match s.code() {
                Some(code) => format!("{verb} exited with status {code}"),
                None => format!("{verb} was killed"),
            }),
            Err(e) => Err(format!("{verb} could not be waited for: {e}")),
        }
    }
}

/// The cloud credentials the installer left in install directory `dir` for job `id`, moved out of it to a file of
/// the job's own under `to` (readable by the runner's user only), each with the variable openshift-install reads
/// its path from ([`crate::credentials`]).
fn take_credentials(dir: &Path, to: &Path, id: &str) -> std::io::Result<Vec<(&'static str, PathBuf)>> {
    use std::os::unix::fs::PermissionsExt;
    let mut handed = Vec::new();
    for (cloud, var) in crate::credentials::CLOUDS {
        let left = dir.join(crate::credentials::file(cloud));
        if !left.exists() {
            continue;
        }
        std::fs::create_dir_all(to)?;
        let own = to.join(format!("{id}.{cloud}.json"));
        std::fs::rename(&left, &own)?;
        std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o600))?;
        handed.push((var, own));
    }
    Ok(handed)
}

/// The manifests waiting in install directory `dir` for the job, if there are any.
fn waiting_manifests(dir: &Path) -> Option<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join(crate::manifests::DIR))
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    (!files.is_empty()).then_some(files)
}

/// Copies the waiting manifests into `dir/openshift/`, where `create cluster` takes them.
fn place_manifests(dir: &Path) -> std::io::Result<()> {
    let openshift = dir.join("openshift");
    std::fs::create_dir_all(&openshift)?;
    for file in waiting_manifests(dir).unwrap_or_default() {
        if let Some(name) = file.file_name() {
            std::fs::copy(&file, openshift.join(name))?;
        }
    }
    Ok(())
}

/// Copies `from`, a job's stdout or stderr, to its output line by line, each line redacted.
async fn redacted(from: Option<impl tokio::io::AsyncRead + Unpin>, out: Arc<Mutex<std::fs::File>>) {
    use std::io::Write;
    use tokio::io::AsyncBufReadExt;
    let Some(from) = from else { return };
    let mut lines = tokio::io::BufReader::new(from).split(b'\n');
    while let Ok(Some(line)) = lines.next_segment().await {
        let line = crate::outputs::redact(String::from_utf8_lossy(&line).into_owned());
        let _ = writeln!(out.lock().unwrap_or_else(|e| e.into_inner()), "{line}");
    }
}
