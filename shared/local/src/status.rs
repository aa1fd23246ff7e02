//! A plain-text picture of every pool: counts, each cluster's power state, claims.

use std::fmt::Write as _;

use apiary_planner::{ClaimPhase, Cluster, DesiredPower};
use apiary_ports::{Deps, Result};

fn cluster_line(c: &Cluster) -> String {
    let power = c.power_state.map_or_else(|| "Installing".to_owned(), |p| format!("{p:?}"));
    let want = match c.spec_power_state {
        Some(DesiredPower::Running) => "Running",
        Some(DesiredPower::Hibernating) => "Hibernating",
        None => "-",
    };
    let mut flags = vec![];
    if c.is_broken() {
        flags.push("broken".to_owned());
    }
    if c.deleting {
        flags.push("deleting".to_owned());
    }
    if c.marked_for_deletion {
        flags.push("released".to_owned());
    }
    if let Some(claim) = &c.claim {
        flags.push(format!("claim={claim}"));
    }
    if let Some(release) = &c.release {
        flags.push(format!("release={}", release_tag(release)));
    }
    format!("    {:<28} {:<26} want {:<12} {}", c.cluster_name, power, want, flags.join(" "))
}

/// A release image as a person names it: its tag (`4.18.1-x86_64`), or the start of its digest.
fn release_tag(image: &str) -> &str {
    match image.split_once("@sha256:") {
        Some((_, digest)) => digest.get(..12).unwrap_or(digest),
        None => image.rsplit_once(':').map_or(image, |(_, tag)| tag),
    }
}

/// Renders every pool's status.
pub async fn render(deps: &Deps) -> Result<String> {
    let mut out = String::new();
    let mut pools = deps.store.list_pools().await?;
    pools.sort_by(|a, b| a.name.cmp(&b.name));
    if pools.is_empty() {
        out.push_str("no pools yet\n");
    }
    for p in pools {
        let Some(snap) = deps.store.read_pool(&p.name).await? else { continue };
        let s = &snap.pool.status;
        let _ = writeln!(
            out,
            "pool {}  {}{}",
            p.name,
            s.counts(),
            if p.deletion_requested_at.is_some() { "  (deleting)" } else { "" },
        );
        let mut clusters = snap.clusters.clone();
        clusters.sort_by(|a, b| a.created_at.cmp(&b.created_at).then_with(|| a.id.cmp(&b.id)));
        for c in &clusters {
            let _ = writeln!(out, "{}", cluster_line(c));
        }
        for k in &snap.claims {
            let cluster = k.cluster.as_ref().and_then(|id| snap.clusters.iter().find(|c| &c.id == id));
            let state = match (k.phase(cluster), &k.cluster) {
                (phase, Some(id)) if phase != ClaimPhase::Releasing => format!("{phase:?} -> {id}"),
                (phase, _) => format!("{phase:?}"),
            };
            let _ = writeln!(out, "    claim {:<22} {:<30} by {}", k.name, state, k.owner);
        }
    }
    Ok(out)
}

/// The last `n` notifications the demo's receiver verified and kept, newest last: one line each.
pub fn notifications(received: &[apiary_fakeclouds::notifications::Received], n: usize) -> String {
    let mut out = String::new();
    if received.is_empty() {
        return out;
    }
    let _ = writeln!(out, "notifications received (signatures verified), the last {}:", n.min(received.len()));
    for r in &received[received.len().saturating_sub(n)..] {
        let text = |v: &serde_json::Value| v.as_str().unwrap_or("-").to_owned();
        let data = &r.body["data"];
        let _ = writeln!(
            out,
            "    {:<16} {}/{} cluster {} owner {}",
            text(&r.body["type"]),
            text(&data["pool"]),
            text(&data["claim"]),
            text(&data["cluster"]),
            text(&data["owner"])
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clusters_line_shows_the_release_it_was_installed_from_by_its_tag() {
        assert_eq!(release_tag("quay.io/openshift-release-dev/ocp-release:4.18.2-x86_64"), "4.18.2-x86_64");
        let digest = format!("quay.io/openshift-release-dev/ocp-release@sha256:{}", "0a".repeat(32));
        assert_eq!(release_tag(&digest), "0a0a0a0a0a0a");
        let mut c = Cluster::new("c1", "ocp-blue", "ocp-blue-x", chrono::DateTime::UNIX_EPOCH);
        assert!(!cluster_line(&c).contains("release="));
        c.release = Some("registry.local:5000/ocp/release:4.18.1".into());
        assert!(cluster_line(&c).ends_with("release=4.18.1"), "{}", cluster_line(&c));
    }
}
