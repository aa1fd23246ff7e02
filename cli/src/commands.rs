//! The commands: each sends its requests, prints its answer in the chosen format, and fails with one line and an
//! exit code.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use apiary_planner::{waiting, Cluster, Timestamp};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value};

use crate::api::{Api, ApiError};
use crate::args::{ClaimAction, ClaimCreate, ClaimRef, PoolCommand};
use crate::document::Document;
use crate::error::{Exit, Failure, Result};
use crate::hive;
use crate::render::{self, ClaimView, Format};

/// What every command has: the API and the output format.
pub struct Ctx {
    /// The API.
    pub api: Api,
    /// `--output`.
    pub format: Format,
}

fn now() -> Timestamp {
    Timestamp::from(std::time::SystemTime::now())
}

/// `text` to standard output; a closed pipe (`apiary … | head`) is not an error.
pub fn out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush());
}

/// A Go duration option (`30m`, `1h30m`, `20s`).
pub fn duration(option: &str, text: &str) -> Result<Duration> {
    apiary_planner::duration::parse(text)
        .ok()
        .and_then(|d| d.to_std().ok())
        .ok_or_else(|| Failure::usage(format!("{option} {text:?}: want a duration like 30s, 20m or 1h30m")))
}

/// Prints `value` as a document (JSON, YAML), or as `table` makes it.
fn show_as(format: Format, value: &Value, table: impl FnOnce() -> Result<String>) -> Result<()> {
    let text = match format {
        Format::Table => table()?,
        Format::Env => return Err(Failure::usage("--output env is for claims (claim, claim get)")),
        Format::Kubeconfig => return Err(Failure::usage("--output kubeconfig is for a claim (claim, claim get)")),
        format => render::document(format, value)?,
    };
    out(&text);
    Ok(())
}

/// `apiary pool import FILE` without `--apply`: converting a manifest needs neither an API nor credentials.
pub fn import_offline(
    format: Format,
    file: &Path,
    into: Option<&Path>,
    name: Option<&str>,
    installer: Option<&hive::Installer>,
) -> Result<()> {
    print_import(format, &translate(file, into, name, installer)?)
}

/// The reference installer `--installer` and its companions name, if it does.
pub fn installer(
    url: &Option<String>,
    secret: &Option<String>,
    pull_secret: &Option<String>,
    ssh_key: &Option<String>,
) -> Option<hive::Installer> {
    Some(hive::Installer {
        url: url.clone()?,
        secret: secret.clone()?,
        pull_secret: pull_secret.clone(),
        ssh_key: ssh_key.clone(),
    })
}

/// The Hive manifest in `file` as an Apiary pool; what did not carry over and what is still needed go to standard
/// error.
fn translate(
    file: &Path,
    into: Option<&Path>,
    name: Option<&str>,
    installer: Option<&hive::Installer>,
) -> Result<hive::Import> {
    let manifest = Document::read(file)?;
    let base = into.map(Document::read).transpose()?;
    let import = hive::translate_for(&manifest.value, base.as_ref().map(|b| &b.value), name, installer)?;
    let mut report = String::new();
    if !import.dropped.is_empty() {
        report.push_str("not carried over from the ClusterPool:\n");
        for (field, why) in &import.dropped {
            report.push_str(&format!("  {field}: {why}\n"));
        }
    }
    if !import.needed.is_empty() {
        report.push_str("still needed before the API takes it (give them in --into BASE):\n");
        for (field, why) in &import.needed {
            report.push_str(&format!("  {field}: {why}\n"));
        }
    }
    if !import.settings_needed.is_empty() {
        report.push_str(&format!(
            "still needed in the installer's settings (installerSettings, uploaded as pools/{}.json):\n",
            import.name
        ));
        for (field, why) in &import.settings_needed {
            report.push_str(&format!("  {field}: {why}\n"));
        }
    }
    if !import.notes.is_empty() {
        report.push_str("Apiary options a ClusterPool has no field for, left unset (docs/policies.md):\n");
        for (field, what) in &import.notes {
            report.push_str(&format!("  {field}: {what}\n"));
        }
    }
    eprint!("{report}");
    Ok(import)
}

/// The imported pool as a document: YAML unless JSON is asked for.
fn print_import(format: Format, import: &hive::Import) -> Result<()> {
    let mut document = json!({"name": import.name, "spec": import.spec});
    if let Some(settings) = &import.installer_settings {
        document["installerSettings"] = settings.clone();
    }
    let format = if format == Format::Json { Format::Json } else { Format::Yaml };
    show_as(format, &document, || Ok(String::new()))
}

impl Ctx {
    pub(crate) fn show(&self, value: &Value, table: impl FnOnce() -> Result<String>) -> Result<()> {
        show_as(self.format, value, table)
    }

    async fn show_claim(&self, value: &Value) -> Result<()> {
        let view = claim_view(value)?;
        match self.format {
            // The credentials stay out of `export` lines, which a job's shell traces may print.
            Format::Env => {
                out(&render::claim_env(&view));
                Ok(())
            }
            Format::Kubeconfig => {
                let credentials = self.credentials(&view).await?;
                let Some(kubeconfig) = credentials.get("kubeconfig").and_then(Value::as_str) else {
                    let why = format!("claim {}/{}: its cluster names no kubeconfig", view.pool, view.name);
                    return Err(Failure::new(Exit::NotFound, why));
                };
                out(kubeconfig);
                Ok(())
            }
            _ => self.show(value, || Ok(render::claim_table(&view, now()))),
        }
    }

    /// A Ready claim's credentials (`GET …/credentials`, read by the claim API for the claim's owner, subjects and
    /// admins).
    async fn credentials(&self, view: &ClaimView) -> Result<serde_json::Map<String, Value>> {
        if view.shown_phase() != "Ready" {
            let (pool, name, phase) = (&view.pool, &view.name, view.shown_phase());
            let why = format!("claim {pool}/{name} is {phase}: its credentials come once it is Ready");
            return Err(Failure::new(Exit::Conflict, why));
        }
        let path = format!("/pools/{}/claims/{}/credentials", seg(&view.pool)?, seg(&view.name)?);
        let (status, body) = self.api.send("GET", &path, None).await?;
        match status {
            200 => Ok(body["credentials"].as_object().cloned().unwrap_or_default()),
            _ => Err(ApiError::from_answer(status, &body).into()),
        }
    }

    /// `apiary whoami`: `GET /me`.
    pub async fn whoami(&self) -> Result<()> {
        let (_, me) = self.api.call("GET", "/me", None).await?;
        self.show(&me, || Ok(render::me_table(&me)))
    }

    /// This command line's release and the stack's (`GET /version`; a stack before 0.2.0 has none), and whether
    /// they work together ([`compatibility`]).
    pub async fn version(&self) -> Result<()> {
        let ours = env!("CARGO_PKG_VERSION");
        let (status, body) = self.api.send("GET", "/version", None).await?;
        let stack = match status {
            200 => body["version"].as_str().map(str::to_owned),
            404 => None,
            _ => return Err(ApiError::from_answer(status, &body).into()),
        };
        let said = compatibility(ours, stack.as_deref());
        let value = json!({ "commandLine": ours, "stack": stack, "compatibility": said });
        let stack = stack.unwrap_or_else(|| "before 0.2.0 (it has no GET /version)".into());
        self.show(&value, || Ok(format!("command line {ours}\nstack        {stack}\n{said}\n")))
    }

    /// Up to `limit` events of `pool`'s trail, newest first, page after page (at most the API's page at a time).
    async fn events(&self, pool: &str, claim: Option<&str>, cluster: Option<&str>, limit: usize) -> Result<Vec<Value>> {
        const PAGE: usize = 200;
        if limit == 0 {
            return Err(Failure::usage("--limit: at least 1"));
        }
        let mut base = format!("/pools/{}/events?", seg(pool)?);
        if let Some(claim) = claim {
            base.push_str(&format!("claim={}&", seg(claim)?));
        }
        if let Some(cluster) = cluster {
            base.push_str(&format!("cluster={}&", seg(cluster)?));
        }
        let mut events: Vec<Value> = vec![];
        let mut page: Option<String> = None;
        while events.len() < limit {
            let mut path = format!("{base}limit={}", (limit - events.len()).min(PAGE));
            if let Some(token) = &page {
                // base64url: nothing in it needs escaping in a query.
                if !token.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
                    return Err(Failure::other(format!("unexpected page token from the API: {token:?}")));
                }
                path.push_str(&format!("&page={token}"));
            }
            let (_, answer) = self.api.call("GET", &path, None).await?;
            events.extend(answer["events"].as_array().cloned().unwrap_or_default());
            match answer["nextPage"].as_str() {
                Some(next) => page = Some(next.to_owned()),
                None => break,
            }
        }
        events.truncate(limit);
        Ok(events)
    }

    /// `apiary pool …`.
    pub async fn pool(&self, command: PoolCommand) -> Result<()> {
        match command {
            PoolCommand::Apply { name, file, diff, prune } => {
                let prune = prune.as_deref().map(|p| match_labels("--prune", p)).transpose()?;
                self.apply_files(name.as_deref(), &file, diff, prune.as_ref()).await
            }
            PoolCommand::Get { name } => {
                let (_, pool) = self.api.call("GET", &format!("/pools/{}", seg(&name)?), None).await?;
                self.show(&pool, || Ok(render::pool_table(&pool, now())))
            }
            PoolCommand::List => {
                let (_, answer) = self.api.call("GET", "/pools", None).await?;
                let pools = answer["pools"].as_array().cloned().unwrap_or_default();
                self.show(&answer, || Ok(render::pools_table(&pools)))
            }
            PoolCommand::Delete { name, wait } => {
                let path = format!("/pools/{}", seg(&name)?);
                let limit = wait.as_deref().map(|w| duration("--wait", w)).transpose()?;
                let (_, pool) = self.api.call("DELETE", &path, None).await?;
                if let Some(limit) = limit {
                    let deadline = Instant::now() + limit;
                    let progress = Progress::new(&format!("pool {name}"));
                    loop {
                        let (status, answer) = self.api.send("GET", &path, None).await?;
                        match status {
                            404 => break,
                            s if s >= 400 => return Err(ApiError::from_answer(s, &answer).into()),
                            _ => {}
                        }
                        let s = answer["status"].clone();
                        progress.show(&format!("deleting: {} clusters left", count_clusters(&s)));
                        if Instant::now() >= deadline {
                            return Err(Failure::new(
                                Exit::TimedOut,
                                format!("pool {name} is still being deleted after {}", show_duration(limit)),
                            ));
                        }
                        tokio::time::sleep(Duration::from_secs(2).min(deadline - Instant::now())).await;
                    }
                    progress.done(&format!("pool {name} deleted"));
                    return self.show(&json!({"name": name, "deleted": true}), || Ok(format!("pool {name} deleted\n")));
                }
                self.show(&pool, || Ok(format!("pool {name} is being deleted\n")))
            }
            PoolCommand::Clusters { name } => {
                let (_, answer) = self.api.call("GET", &format!("/pools/{}/clusters", seg(&name)?), None).await?;
                let clusters = clusters_of(&answer)?;
                self.show(&answer, || Ok(render::clusters_table(&clusters, now())))
            }
            PoolCommand::Events { name, claim, cluster, limit } => {
                let events = self.events(&name, claim.as_deref(), cluster.as_deref(), limit).await?;
                let answer = json!({ "pool": name, "events": events });
                self.show(&answer, || Ok(render::events_table(&events, now())))
            }
            PoolCommand::Watch { name, interval } => self.watch(&name, duration("--interval", &interval)?).await,
            PoolCommand::Import { file, into, name, apply, installer, installer_secret, pull_secret, ssh_key } => {
                let installer = self::installer(&installer, &installer_secret, &pull_secret, &ssh_key);
                self.import(&file, into.as_deref(), name.as_deref(), apply, installer.as_ref()).await
            }
        }
    }

    async fn import(
        &self,
        file: &Path,
        into: Option<&Path>,
        name: Option<&str>,
        apply: bool,
        installer: Option<&hive::Installer>,
    ) -> Result<()> {
        let import = translate(file, into, name, installer)?;
        if !apply {
            return print_import(self.format, &import);
        }
        if !import.needed.is_empty() {
            return Err(Failure::usage(format!(
                "pool {}: not applied: {} field(s) still needed (listed above)",
                import.name,
                import.needed.len()
            )));
        }
        if import.installer_settings.is_some() {
            eprintln!(
                "the installer's settings are not applied with the pool: print them (without --apply) and upload \
                 them to the installer's bucket as pools/{}.json",
                import.name
            );
        }
        let document = json!({"name": import.name, "spec": import.spec});
        let text = serde_json::to_string(&document).unwrap_or_default();
        let doc = Document::parse(Path::new(&format!("{} (imported)", file.display())), &text)?;
        self.apply_document(doc).await
    }

    async fn watch(&self, name: &str, every: Duration) -> Result<()> {
        let path = format!("/pools/{}", seg(name)?);
        let terminal = std::io::stdout().is_terminal();
        let mut last = String::new();
        let mut seen = false;
        loop {
            let (status, pool) = self.api.send("GET", &path, None).await?;
            if status == 404 && seen {
                out(&format!("pool {name} deleted\n"));
                return Ok(());
            }
            if status >= 400 {
                return Err(ApiError::from_answer(status, &pool).into());
            }
            seen = true;
            let (_, clusters) = self.api.call("GET", &format!("{path}/clusters"), None).await?;
            let (_, claims) = self.api.call("GET", &format!("{path}/claims"), None).await?;
            let claims: Vec<ClaimView> = claims["claims"]
                .as_array()
                .map(|a| a.iter().filter_map(|c| serde_json::from_value(c.clone()).ok()).collect())
                .unwrap_or_default();
            let view = render::watch_view(&pool, &clusters_of(&clusters)?, &claims, now());
            if terminal {
                out(&format!(
                    "\x1b[2J\x1b[H{view}\n{}  every {}  (Ctrl-C stops)\n",
                    now().format("%H:%M:%S"),
                    show_duration(every)
                ));
            } else if view != last {
                out(&format!("--- {}\n{view}", now().to_rfc3339()));
            }
            last = view;
            tokio::select! {
                _ = tokio::signal::ctrl_c() => return Ok(()),
                _ = tokio::time::sleep(every) => {}
            }
        }
    }

    /// `apiary claim …`.
    pub async fn claim(&self, action: ClaimAction) -> Result<()> {
        match action {
            ClaimAction::Create(create) => self.create_claim(create).await,
            ClaimAction::Get(r) => {
                let (_, claim) = self.api.call("GET", &claim_path(&r)?, None).await?;
                self.show_claim(&claim).await
            }
            ClaimAction::List { pool } => {
                let (_, answer) = self.api.call("GET", &format!("/pools/{}/claims", seg(&pool)?), None).await?;
                let claims: Vec<ClaimView> = answer["claims"]
                    .as_array()
                    .map(|a| a.iter().map(claim_view).collect::<Result<_>>())
                    .transpose()?
                    .unwrap_or_default();
                if matches!(self.format, Format::Env | Format::Kubeconfig) {
                    return Err(Failure::usage("--output env and kubeconfig are for one claim (claim, claim get)"));
                }
                self.show(&answer, || Ok(render::claims_table(&claims, now())))
            }
            ClaimAction::Release(r) => {
                let (_, claim) = self.api.call("DELETE", &claim_path(&r)?, None).await?;
                self.said(&claim, &format!("claim {}/{} released: its cluster is being removed\n", r.pool, r.name))
                    .await
            }
            ClaimAction::Hibernate(r) => {
                let (_, claim) = self.api.call("POST", &format!("{}/hibernate", claim_path(&r)?), None).await?;
                self.said(&claim, &format!("claim {}/{}: its cluster is hibernating\n", r.pool, r.name)).await
            }
            ClaimAction::Resume(r) => {
                let (_, claim) = self.api.call("POST", &format!("{}/resume", claim_path(&r)?), None).await?;
                self.said(&claim, &format!("claim {}/{}: its cluster is resuming\n", r.pool, r.name)).await
            }
            ClaimAction::Extend { claim: r, lifetime } => {
                let body = json!({ "lifetime": lifetime });
                let (_, claim) = self.api.call("PATCH", &claim_path(&r)?, Some(&body)).await?;
                let ends = match claim["expiresAt"].as_str() {
                    Some(at) => format!("it ends at {at}"),
                    None => "it ends a lifetime after it gets its cluster".into(),
                };
                self.said(&claim, &format!("claim {}/{}: lifetime {lifetime}; {ends}\n", r.pool, r.name)).await
            }
            ClaimAction::Share { claim: r, subjects } => {
                let body = json!({ "subjects": subjects });
                let (_, claim) = self.api.call("PATCH", &claim_path(&r)?, Some(&body)).await?;
                let with = if subjects.is_empty() { "nobody".into() } else { subjects.join(", ") };
                self.said(&claim, &format!("claim {}/{}: shared with {with}\n", r.pool, r.name)).await
            }
        }
    }

    /// Prints `line` for a table, the claim for the other formats.
    async fn said(&self, claim: &Value, line: &str) -> Result<()> {
        match self.format {
            Format::Table => {
                out(line);
                Ok(())
            }
            _ => self.show_claim(claim).await,
        }
    }

    async fn create_claim(&self, c: ClaimCreate) -> Result<()> {
        let limit = c.wait.as_deref().map(|w| duration("--wait", w)).transpose()?;
        let mut body = json!({});
        let (mut r, path) = match (&c.selector, c.names.as_slice()) {
            (None, [pool, name]) => {
                let r = ClaimRef { pool: pool.clone(), name: name.clone() };
                let path = claim_path(&r)?;
                (r, path)
            }
            (Some(selector), [name]) => {
                body["selector"] = json!({ "matchLabels": match_labels("--selector", selector)? });
                // The pool is the one the answer names.
                (ClaimRef { pool: String::new(), name: name.clone() }, format!("/claims/{}", seg(name)?))
            }
            (None, _) => return Err(Failure::usage("name the pool and the claim (apiary claim POOL NAME)")),
            (Some(_), _) => {
                return Err(Failure::usage(
                    "with --selector, name the claim alone (apiary claim --selector KEY=VALUE NAME): the labels choose \
                     the pool",
                ));
            }
        };
        if let Some(l) = &c.lifetime {
            body["lifetime"] = json!(l);
        }
        if !c.subjects.is_empty() {
            body["subjects"] = json!(c.subjects);
        }
        let (_, mut claim) = self.api.call("PUT", &path, Some(&body)).await?;
        if let Some(pool) = claim["pool"].as_str() {
            r.pool = pool.to_owned();
        }
        let Some(limit) = limit else { return self.show_claim(&claim).await };
        let started = Instant::now();
        let deadline = started + limit;
        let progress = Progress::new(&format!("claim {}/{}", r.pool, r.name));
        let mut gap = waiting::FIRST;
        loop {
            let view = claim_view(&claim)?;
            let phase = view.shown_phase().to_owned();
            progress.show(&phase);
            match phase.as_str() {
                "Ready" => {
                    progress.done(&format!(
                        "claim {}/{} Ready in {}",
                        r.pool,
                        r.name,
                        show_duration(started.elapsed())
                    ));
                    return self.show_claim(&claim).await;
                }
                "Releasing" => {
                    progress.clear();
                    return Err(Failure::new(Exit::Conflict, format!("claim {}/{} is being released", r.pool, r.name)));
                }
                _ => {}
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                progress.clear();
                return Err(self.timed_out(&r, &path, &phase, limit, c.release_on_timeout).await);
            }
            // The next look, when the claim API said or else when the claimant's gaps say ([`waiting`]): a request
            // answered at once. One that waited (`?wait=`) would hold the claim API function, and Lambda bills it
            // by the second.
            tokio::time::sleep(next_look(&claim, gap).min(left)).await;
            gap = waiting::next(gap);
            let (status, answer) = self.api.send("GET", &path, None).await?;
            if status == 404 {
                progress.clear();
                return Err(Failure::new(
                    Exit::NotFound,
                    format!("claim {}/{} no longer exists (released, or its lifetime ended)", r.pool, r.name),
                ));
            }
            if status >= 400 {
                progress.clear();
                return Err(ApiError::from_answer(status, &answer).into());
            }
            claim = answer;
        }
    }

    async fn timed_out(&self, r: &ClaimRef, path: &str, phase: &str, limit: Duration, release: bool) -> Failure {
        let what = format!("claim {}/{} is not Ready after {} (phase {phase})", r.pool, r.name, show_duration(limit));
        if !release {
            return Failure::new(
                Exit::TimedOut,
                format!("{what}; it stays in place: `apiary claim release {} {}` releases it", r.pool, r.name),
            );
        }
        match self.api.call("DELETE", path, None).await {
            Ok(_) => Failure::new(Exit::TimedOut, format!("{what}; released (--release-on-timeout)")),
            Err(e) => Failure::new(Exit::TimedOut, format!("{what}; releasing it failed: {}", e.message)),
        }
    }
}

/// A pool or claim name as a path segment: DNS labels only (the API's own rule, checked here so that a name never
/// changes the path).
fn seg(name: &str) -> Result<&str> {
    apiary_planner::validate::validate_name("name", name).map(|()| name).map_err(|e| Failure::usage(e.message))
}

/// `--selector`'s `KEY=VALUE,...` as a selector's `matchLabels`.
pub(crate) fn match_labels(option: &str, text: &str) -> Result<serde_json::Map<String, Value>> {
    let mut labels = serde_json::Map::new();
    for pair in text.split(',').filter(|p| !p.trim().is_empty()) {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(Failure::usage(format!("{option}: {pair:?} is not KEY=VALUE")));
        };
        if labels.insert(key.trim().to_owned(), json!(value.trim())).is_some() {
            return Err(Failure::usage(format!("{option}: label {:?} is named twice", key.trim())));
        }
    }
    if labels.is_empty() {
        return Err(Failure::usage(format!("{option}: name at least one KEY=VALUE")));
    }
    Ok(labels)
}

fn claim_path(r: &ClaimRef) -> Result<String> {
    Ok(format!("/pools/{}/claims/{}", seg(&r.pool)?, seg(&r.name)?))
}

fn claim_view(value: &Value) -> Result<ClaimView> {
    serde_json::from_value(value.clone()).map_err(|e| Failure::other(format!("unexpected claim from the API: {e}")))
}

/// How long to wait before the next look at a claim answered as `claim`: the `retryAfterSeconds` the claim API
/// gave (at most [`waiting::LONGEST_HINT`]), else the claimant's own `gap`.
fn next_look(claim: &Value, gap: Duration) -> Duration {
    match claim["retryAfterSeconds"].as_f64() {
        Some(s) if s.is_finite() && s >= 0.0 => Duration::from_secs_f64(s).min(waiting::LONGEST_HINT),
        _ => gap,
    }
}

fn clusters_of(answer: &Value) -> Result<Vec<Cluster>> {
    serde_json::from_value(answer["clusters"].clone())
        .map_err(|e| Failure::other(format!("unexpected clusters from the API: {e}")))
}

fn count_clusters(status: &Value) -> u64 {
    ["ready", "standby", "installing", "claimed", "broken", "stale", "deleting"]
        .iter()
        .filter_map(|k| status[k].as_u64())
        .sum()
}

fn show_duration(d: Duration) -> String {
    apiary_planner::duration::format(chrono::TimeDelta::from_std(d).unwrap_or_default())
}

/// A spinner on standard error with the phase and the time so far on a terminal; a line per change otherwise.
struct Progress {
    bar: Option<ProgressBar>,
    what: String,
    started: Instant,
    last: std::cell::RefCell<String>,
}

impl Progress {
    fn new(what: &str) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {prefix} {msg} ({elapsed})")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.set_prefix(what.to_owned());
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Self { bar, what: what.to_owned(), started: Instant::now(), last: Default::default() }
    }

    fn show(&self, phase: &str) {
        match &self.bar {
            Some(bar) => bar.set_message(phase.to_owned()),
            None if *self.last.borrow() != phase => {
                eprintln!("apiary: {}: {phase} ({})", self.what, show_duration(self.started.elapsed()));
                *self.last.borrow_mut() = phase.to_owned();
            }
            None => {}
        }
    }

    fn done(&self, line: &str) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        eprintln!("apiary: {line}");
    }

    fn clear(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Whether a command line of release `ours` works with a stack of release `stack` (`None`: a stack before 0.2.0,
/// which does not say): a stack of the same release or of the one before (the minor release, while the major is
/// 0) is supported; a newer stack serves what this command line knows, and a newer command line knows what it
/// does; an older stack is to be updated first.
pub fn compatibility(ours: &str, stack: Option<&str>) -> String {
    let release = |v: &str| -> Option<(u64, u64)> {
        let mut parts = v.split('.').map(|p| p.parse::<u64>().ok());
        Some((parts.next()??, parts.next()??))
    };
    let (Some(cli), Some(stack)) = (release(ours), stack.map(|s| (s, release(s)))) else {
        return match stack {
            None => "the stack is older than the releases this command line supports: update the stack".into(),
            Some(_) => "unsupported".into(),
        };
    };
    let previous = |(major, minor): (u64, u64)| if major == 0 { (0, minor.saturating_sub(1)) } else { (major - 1, 0) };
    match stack {
        (_, Some(s)) if s == cli => "supported: the same release".into(),
        (_, Some(s)) if s > cli => {
            "supported: the stack is newer; update the command line for what its release added".into()
        }
        (_, Some(s)) if s >= previous(cli) => "supported: the stack is one release behind".into(),
        (v, Some(_)) => format!("unsupported: the stack runs {v}, more than one release behind; update the stack"),
        (v, None) => format!("unsupported: the stack says it runs {v:?}, not a release"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_command_line_works_with_its_own_release_and_the_one_before() {
        assert!(compatibility("0.3.0", Some("0.3.2")).starts_with("supported: the same release"));
        assert!(compatibility("0.3.0", Some("0.2.5")).starts_with("supported: the stack is one release behind"));
        assert!(compatibility("0.3.0", Some("0.4.0")).starts_with("supported: the stack is newer"));
        assert!(compatibility("0.3.0", Some("0.1.0")).starts_with("unsupported: the stack runs 0.1.0"));
        assert!(compatibility("0.2.0", None).contains("update the stack"));
        assert!(compatibility("0.2.0", Some("nightly")).starts_with("unsupported"));
        assert!(compatibility("1.0.0", Some("0.9.0")).starts_with("supported: the stack is one release behind"));
    }

    #[test]
    fn the_next_look_comes_when_the_api_said_else_after_the_claimants_own_gap() {
        let gap = Duration::from_secs(2);
        let told = json!({"phase": "Pending", "retryAfterSeconds": 12.5});
        assert_eq!(next_look(&told, gap), Duration::from_millis(12_500));
        assert_eq!(next_look(&json!({"phase": "Pending"}), gap), gap);
        assert_eq!(next_look(&json!({"retryAfterSeconds": 600}), gap), waiting::LONGEST_HINT, "never longer");
        for odd in [json!(-1), json!("soon"), Value::Null] {
            assert_eq!(next_look(&json!({"retryAfterSeconds": odd}), gap), gap);
        }
    }
}
