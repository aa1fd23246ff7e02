//! What the commands print: tables for people, JSON and YAML for programs, `export` lines for a CI job's shell.
//! Every function here is pure (the time is an argument), so the outputs are tested against golden files.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use apiary_planner::{Cluster, Machine, PoolStatus, PowerState, Timestamp};
use clap::ValueEnum;
use comfy_table::{presets, CellAlignment, ColumnConstraint, ContentArrangement, Table};
use serde::Deserialize;
use serde_json::Value;

use crate::error::{Failure, Result};

/// `--output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned columns for a terminal.
    Table,
    /// The API's JSON.
    Json,
    /// The API's document as YAML.
    Yaml,
    /// Shell `export` lines (claims only): never a credential.
    Env,
    /// A Ready claim's cluster's kubeconfig, as the claim API hands it to the claim's owner, subjects and admins.
    Kubeconfig,
}

/// A claim as the API shows it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClaimView {
    /// The pool.
    pub pool: String,
    /// The claim's name.
    pub name: String,
    /// Its owner's ARN.
    pub owner: String,
    /// Who may use it beside its owner.
    pub subjects: Vec<String>,
    /// The labels it chose its pool by, when made by selector.
    pub selector: Option<ClaimSelector>,
    /// Pending, Assigned, Ready or Releasing.
    pub phase: String,
    /// When it was made.
    pub created_at: Option<Timestamp>,
    /// When it got its cluster.
    pub assigned_at: Option<Timestamp>,
    /// When it ends.
    pub expires_at: Option<Timestamp>,
    /// Its cluster, once assigned.
    pub cluster: Option<ClaimCluster>,
}

/// The selector of a claim made by labels.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClaimSelector {
    /// The labels its pool carries.
    pub match_labels: std::collections::BTreeMap<String, String>,
}

/// A claimed cluster as a claim shows it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClaimCluster {
    /// The cluster's id.
    pub id: String,
    /// Its name (an inventory name, or generated).
    pub cluster_name: String,
    /// The id its cloud resources are tagged with.
    pub infra_id: String,
    /// The release it was installed from, when its pool names one.
    pub release: Option<String>,
    /// Its power state.
    pub power_state: Option<PowerState>,
    /// What its installer said of it.
    pub outputs: BTreeMap<String, String>,
    /// Its machines and their addresses (while it runs).
    pub machines: Vec<Machine>,
}

impl ClaimView {
    /// The phase a person waiting on the claim reads: the API's phase, with `Resuming` for an assigned cluster on
    /// its way to Running.
    pub fn shown_phase(&self) -> &str {
        let resuming = self.cluster.as_ref().and_then(|c| c.power_state).is_some_and(PowerState::is_resuming);
        match self.phase.as_str() {
            "Assigned" if resuming => "Resuming",
            phase => phase,
        }
    }
}

/// `value` as JSON (pretty) or YAML.
pub fn document(format: Format, value: &Value) -> Result<String> {
    match format {
        Format::Yaml => serde_saphyr::to_string(value).map_err(|e| Failure::other(format!("YAML: {e}"))),
        _ => Ok(serde_json::to_string_pretty(value).unwrap_or_default() + "\n"),
    }
}

pub(crate) fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING).set_content_arrangement(ContentArrangement::Disabled).set_header(header.to_vec());
    for column in t.column_iter_mut() {
        column.set_padding((0, 2)).set_cell_alignment(CellAlignment::Left);
    }
    if let Some(last) = t.column_iter_mut().last() {
        last.set_padding((0, 0)).set_constraint(ColumnConstraint::ContentWidth);
    }
    t
}

/// A table as text: no trailing blanks, one newline at the end.
fn text(t: &Table) -> String {
    t.to_string().lines().map(str::trim_end).collect::<Vec<_>>().join("\n") + "\n"
}

/// `then` to `now` as a short age: `45s`, `12m`, `3h20m`, `2d4h`.
pub fn age(then: Timestamp, now: Timestamp) -> String {
    let s = (now - then).num_seconds().max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 if s % 3600 / 60 == 0 => format!("{}h", s / 3600),
        3600..86400 => format!("{}h{}m", s / 3600, s % 3600 / 60),
        _ if s % 86400 / 3600 == 0 => format!("{}d", s / 86400),
        _ => format!("{}d{}h", s / 86400, s % 86400 / 3600),
    }
}

fn platform_of(pool: &Value) -> String {
    pool["spec"]["platform"].as_object().and_then(|p| p.keys().next().cloned()).unwrap_or_default()
}

fn status_of(pool: &Value) -> PoolStatus {
    serde_json::from_value(pool["status"].clone()).unwrap_or_default()
}

/// `pool list`.
pub fn pools_table(pools: &[Value]) -> String {
    let mut t = table(&[
        "NAME",
        "PLATFORM",
        "SIZE",
        "RUNNING",
        "READY",
        "STANDBY",
        "INSTALLING",
        "CLAIMED",
        "BROKEN",
        "PENDING",
    ]);
    for p in pools {
        let s = status_of(p);
        let mut name = p["name"].as_str().unwrap_or_default().to_owned();
        if p.get("deletionRequestedAt").is_some_and(|d| !d.is_null()) {
            name.push_str(" (deleting)");
        }
        t.add_row(vec![
            name,
            platform_of(p),
            p["spec"]["size"].to_string(),
            s.running_count.to_string(),
            s.ready.to_string(),
            s.standby.to_string(),
            s.installing.to_string(),
            s.claimed.to_string(),
            s.broken.to_string(),
            s.pending_claims.to_string(),
        ]);
    }
    text(&t)
}

/// `whoami`: the caller, and what it may do.
pub fn me_table(me: &Value) -> String {
    let names = |key: &str| listed(&me[key]);
    let mut out = String::new();
    for (k, v) in [
        ("principal", me["principal"].as_str().unwrap_or_default().to_owned()),
        ("stack admin", if me["stackAdmin"].as_bool() == Some(true) { "yes" } else { "no" }.to_owned()),
        ("claim from", names("claim")),
        ("administer", names("administer")),
        ("default access", me["defaultPoolAccess"].as_str().unwrap_or("-").to_owned()),
    ] {
        let _ = writeln!(out, "{k:<15} {v}");
    }
    out
}

/// A pool's access list as a line: who may claim, who administers.
fn access_text(access: &Value) -> Option<(String, String)> {
    if access.is_null() {
        return None;
    }
    Some((listed(&access["claimants"]), listed(&access["admins"])))
}

/// A JSON list of names as `a, b`, or `-` when there is none.
fn listed(names: &Value) -> String {
    let names: Vec<&str> = names.as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    if names.is_empty() {
        "-".to_owned()
    } else {
        names.join(", ")
    }
}

/// `pool get`: the pool's settings and counts, then its conditions.
pub fn pool_table(pool: &Value, now: Timestamp) -> String {
    let s = status_of(pool);
    let spec = &pool["spec"];
    let created = pool["createdAt"].as_str().and_then(|t| t.parse::<Timestamp>().ok());
    let mut rows = vec![
        ("name", pool["name"].as_str().unwrap_or_default().to_owned()),
        ("platform", platform_of(pool)),
        ("size", format!("{} (maxSize {})", spec["size"], opt(&spec["maxSize"]))),
        ("running", format!("{} (runningCount {})", s.running_count, spec["runningCount"].as_i64().unwrap_or(0))),
        (
            "clusters",
            format!(
                "ready {} standby {} installing {} claimed {} broken {} stale {} deleting {}",
                s.ready, s.standby, s.installing, s.claimed, s.broken, s.stale, s.deleting
            ),
        ),
        ("pending claims", s.pending_claims.to_string()),
        ("age", created.map(|c| age(c, now)).unwrap_or_default()),
    ];
    if let Some(release) = spec["release"].as_str() {
        // What the pool installs; clusters from an older release count as stale until replaced.
        rows.insert(2, ("release", format!("{release} (stale clusters {})", s.stale)));
    }
    if let Some(role) = spec["platform"]["aws"]["roleArn"].as_str() {
        // A pool in another account: the role, and the ExternalId its trust policy must require.
        rows.insert(2, ("role", role.to_owned()));
        rows.insert(3, ("external id", pool["status"]["externalId"].as_str().unwrap_or("-").to_owned()));
    }
    if let Some((claimants, admins)) = access_text(&spec["access"]) {
        rows.push(("claimants", claimants));
        rows.push(("admins", admins));
    }
    if let Some(at) = pool["deletionRequestedAt"].as_str() {
        rows.push(("deleting since", at.to_owned()));
    }
    let mut out = String::new();
    for (k, v) in rows {
        let _ = writeln!(out, "{k:<15} {v}");
    }
    if !s.conditions.is_empty() {
        let mut t = table(&["CONDITION", "STATUS", "REASON", "MESSAGE"]);
        for c in &s.conditions {
            t.add_row(vec![c.type_.clone(), format!("{:?}", c.status), c.reason.clone(), c.message.clone()]);
        }
        out.push('\n');
        out.push_str(&text(&t));
    }
    out
}

fn opt(v: &Value) -> String {
    if v.is_null() {
        "-".into()
    } else {
        v.to_string()
    }
}

/// A cluster's power state as a person reads it: `Installing` before its first, with `deleting`, `paused` or
/// `released` after it.
fn power_text(c: &Cluster) -> String {
    let mut power = c.power_state.map_or_else(|| "Installing".to_owned(), |p| format!("{p:?}"));
    for (on, flag) in [(c.deleting, "deleting"), (c.power_paused, "paused"), (c.marked_for_deletion, "released")] {
        if on {
            power.push_str(&format!(" ({flag})"));
        }
    }
    power
}

/// `pool clusters`: name, power state, age, claim and broken reason.
pub fn clusters_table(clusters: &[Cluster], now: Timestamp) -> String {
    let mut t = table(&["NAME", "ID", "POWER", "AGE", "CLAIM", "BROKEN"]);
    for c in clusters {
        t.add_row(vec![
            c.cluster_name.clone(),
            c.id.clone(),
            power_text(c),
            age(c.created_at, now),
            c.claim.clone().unwrap_or_else(|| "-".into()),
            c.broken_reason().unwrap_or("-").to_owned(),
        ]);
    }
    text(&t)
}

/// `pool events`: newest first, each event's age, type, claim, cluster, who caused it and what it says.
pub fn events_table(events: &[Value], now: Timestamp) -> String {
    let mut t = table(&["AGE", "TYPE", "CLAIM", "CLUSTER", "BY", "MESSAGE"]);
    let field = |e: &Value, k: &str| e[k].as_str().unwrap_or("-").to_owned();
    for e in events {
        let at = e["time"].as_str().and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
        t.add_row(vec![
            at.map_or_else(|| "-".into(), |at| age(at.with_timezone(&chrono::Utc), now)),
            field(e, "type"),
            field(e, "claim"),
            field(e, "cluster"),
            field(e, "principal"),
            field(e, "message"),
        ]);
    }
    text(&t)
}

/// `claim list`.
pub fn claims_table(claims: &[ClaimView], now: Timestamp) -> String {
    let mut t = table(&["NAME", "PHASE", "CLUSTER", "POWER", "AGE", "EXPIRES", "OWNER"]);
    for k in claims {
        let cluster = k.cluster.as_ref();
        t.add_row(vec![
            k.name.clone(),
            k.shown_phase().to_owned(),
            cluster.map_or_else(|| "-".into(), |c| c.cluster_name.clone()),
            cluster.and_then(|c| c.power_state).map_or_else(|| "-".into(), |p| format!("{p:?}")),
            k.created_at.map(|c| age(c, now)).unwrap_or_default(),
            k.expires_at
                .map_or_else(|| "-".into(), |e| if e > now { format!("in {}", age(now, e)) } else { "now".into() }),
            k.owner.clone(),
        ]);
    }
    text(&t)
}

/// One claim: its phase, cluster, outputs and machines.
pub fn claim_table(k: &ClaimView, now: Timestamp) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{:<12} {}/{}", "claim", k.pool, k.name);
    let _ = writeln!(out, "{:<12} {}", "phase", k.shown_phase());
    let _ = writeln!(out, "{:<12} {}", "owner", k.owner);
    if !k.subjects.is_empty() {
        let _ = writeln!(out, "{:<12} {}", "shared with", k.subjects.join(", "));
    }
    if let Some(s) = &k.selector {
        let labels: Vec<String> = s.match_labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(out, "{:<12} {}", "selector", labels.join(","));
    }
    if let Some(e) = k.expires_at {
        let _ = writeln!(
            out,
            "{:<12} {} ({})",
            "expires",
            e.to_rfc3339(),
            if e > now { format!("in {}", age(now, e)) } else { "now".into() }
        );
    }
    if let Some(c) = &k.cluster {
        let power = c.power_state.map_or_else(|| "-".into(), |p| format!("{p:?}"));
        let release = c.release.as_deref().map(|r| format!(", release {r}")).unwrap_or_default();
        let (name, id, infra) = (&c.cluster_name, &c.id, &c.infra_id);
        let _ = writeln!(out, "{:<12} {name} (id {id}, infraId {infra}{release}, {power})", "cluster");
        for (name, value) in &c.outputs {
            let _ = writeln!(out, "{:<12} {name} = {value}", "output");
        }
        if !c.machines.is_empty() {
            let mut t = table(&["MACHINE", "PRIVATE IP", "PUBLIC IP"]);
            for m in &c.machines {
                t.add_row(vec![
                    m.id.clone(),
                    m.private_ip.clone().unwrap_or_else(|| "-".into()),
                    m.public_ip.clone().unwrap_or_else(|| "-".into()),
                ]);
            }
            out.push('\n');
            out.push_str(&text(&t));
        }
    }
    out
}

/// `claim --output env`: `export` lines a CI job `eval`s. Values are single-quoted for the shell.
pub fn claim_env(k: &ClaimView) -> String {
    let mut vars: Vec<(String, String)> = vec![
        ("APIARY_POOL".into(), k.pool.clone()),
        ("APIARY_CLAIM".into(), k.name.clone()),
        ("APIARY_CLAIM_PHASE".into(), k.shown_phase().to_owned()),
    ];
    if let Some(e) = k.expires_at {
        vars.push(("APIARY_CLAIM_EXPIRES_AT".into(), e.to_rfc3339()));
    }
    if let Some(c) = &k.cluster {
        vars.push(("APIARY_CLUSTER_ID".into(), c.id.clone()));
        vars.push(("APIARY_CLUSTER_NAME".into(), c.cluster_name.clone()));
        vars.push(("APIARY_INFRA_ID".into(), c.infra_id.clone()));
        let ips =
            |f: fn(&Machine) -> Option<&String>| c.machines.iter().filter_map(f).cloned().collect::<Vec<_>>().join(" ");
        vars.push(("APIARY_MACHINE_IDS".into(), c.machines.iter().map(|m| m.id.clone()).collect::<Vec<_>>().join(" ")));
        vars.push(("APIARY_PRIVATE_IPS".into(), ips(|m| m.private_ip.as_ref())));
        vars.push(("APIARY_PUBLIC_IPS".into(), ips(|m| m.public_ip.as_ref())));
        for (name, value) in &c.outputs {
            vars.push((format!("APIARY_OUTPUT_{}", env_name(name)), value.clone()));
        }
    }
    vars.iter().map(|(k, v)| format!("export {k}={}\n", shell_quote(v))).collect()
}

/// `apiUrl` → `API_URL`, `kubeconfig-secret.arn` → `KUBECONFIG_SECRET_ARN`.
fn env_name(name: &str) -> String {
    let mut out = String::new();
    let mut previous_lower = false;
    for ch in name.chars() {
        if ch.is_ascii_uppercase() && previous_lower {
            out.push('_');
        }
        previous_lower = ch.is_ascii_lowercase() || ch.is_ascii_digit();
        out.push(if ch.is_ascii_alphanumeric() { ch.to_ascii_uppercase() } else { '_' });
    }
    out
}

/// `s` in single quotes, each `'` in it closed, escaped and reopened.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `pool watch`: the pool's counts, each cluster and each claim, as `make run`'s status shows them.
pub fn watch_view(pool: &Value, clusters: &[Cluster], claims: &[ClaimView], now: Timestamp) -> String {
    let s = status_of(pool);
    let mut out = format!(
        "pool {}  {}{}\n\n",
        pool["name"].as_str().unwrap_or_default(),
        s.counts(),
        if pool["deletionRequestedAt"].is_string() { "  (deleting)" } else { "" },
    );
    if clusters.is_empty() {
        out.push_str("no clusters\n");
    } else {
        out.push_str(&clusters_table(clusters, now));
    }
    if !claims.is_empty() {
        out.push('\n');
        out.push_str(&claims_table(claims, now));
    }
    out
}

/// What `pool apply` did, or with `--diff` would do: a line per pool, then the fields a change sets and the
/// clusters it replaces, indented.
pub fn apply_report(pools: &[Value]) -> String {
    let mut out = String::new();
    for p in pools {
        let rev = p.get("rev").filter(|r| !r.is_null()).map(|r| format!(" (rev {r})")).unwrap_or_default();
        out.push_str(&format!("pool {} {}{rev}\n", text_of(&p["name"]), text_of(&p["said"])));
        for f in p["fields"].as_array().into_iter().flatten() {
            let side = |v: &Value| if v.is_null() { "(none)".to_owned() } else { shorten(&v.to_string(), 60) };
            out.push_str(&format!("    {}: {} -> {}\n", text_of(&f["field"]), side(&f["before"]), side(&f["after"])));
        }
        let replaced = p["replaced"].as_array().cloned().unwrap_or_default();
        if !replaced.is_empty() {
            let each: Vec<String> =
                replaced.iter().map(|r| format!("{} ({})", text_of(&r["cluster"]), text_of(&r["reason"]))).collect();
            out.push_str(&format!(
                "    replaces {} unclaimed cluster{}, one at a time: {}\n",
                replaced.len(),
                if replaced.len() == 1 { "" } else { "s" },
                each.join(", ")
            ));
        }
    }
    out
}

fn text_of(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

/// `text` cut to `max` characters, the middle replaced by `…` (a release image's tag is at its end).
fn shorten(text: &str, max: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= max {
        return text.to_owned();
    }
    let half = (max - 1) / 2;
    let (head, tail): (String, String) = (chars[..half].iter().collect(), chars[chars.len() - half..].iter().collect());
    format!("{head}…{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_are_short() {
        let t0: Timestamp = "2026-11-24T10:00:00Z".parse().expect("time");
        let at = |s: i64| t0 + chrono::TimeDelta::seconds(s);
        for (s, want) in
            [(0, "0s"), (59, "59s"), (60, "1m"), (3600, "1h"), (3660 + 60, "1h2m"), (86400, "1d"), (93600, "1d2h")]
        {
            assert_eq!(age(t0, at(s)), want, "{s}");
        }
        assert_eq!(age(at(10), t0), "0s", "a clock behind the server's says 0s, not a negative age");
    }

    #[test]
    fn output_names_become_shell_variables_and_values_are_quoted() {
        assert_eq!(env_name("apiUrl"), "API_URL");
        assert_eq!(env_name("kubeconfigSecretArn"), "KUBECONFIG_SECRET_ARN");
        assert_eq!(env_name("console-url.v2"), "CONSOLE_URL_V2");
        assert_eq!(shell_quote("it's $HOME"), r"'it'\''s $HOME'");
    }
}
