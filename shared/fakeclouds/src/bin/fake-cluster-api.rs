//! The fake cluster API on a free port, for the official Kubernetes client to drive
//! (`tests/conformance_kubernetes.py`): prints one JSON line, `{"server", "token", "caBundle"}` (`server` a template
//! over `{infraId}`), then takes one command a line on standard input until it closes: `page N` (lists pages of N),
//! `nodes N` (clusters have N nodes), `plain INFRA` (that cluster is plain Kubernetes: no ClusterOperators),
//! `certificates N` (kubelet certificates are valid N seconds at install), each answered `ok`.

use std::time::Duration;

use apiary_fakeclouds::cluster_api::FakeClusterApi;
use apiary_fakeclouds::common::take_commands;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let fake = FakeClusterApi::start(Duration::ZERO).await?;
    let hello =
        serde_json::json!({"server": fake.server("{infraId}"), "token": fake.token(), "caBundle": fake.ca_bundle()});
    take_commands(&hello, move |verb, arg| {
        let n: usize = arg.parse().unwrap_or(1);
        match verb {
            "page" => fake.page(n),
            "nodes" => fake.nodes(n),
            "plain" => fake.plain(arg),
            "certificates" => fake.certificates_valid(Duration::from_secs(n as u64), Duration::from_secs(30 * 86400)),
            _ => return false,
        }
        true
    })
    .await
}
