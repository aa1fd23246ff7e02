//! The fake cluster API on a free port, for the official Kubernetes client to drive (`tests/conformance_gcp.py`'s
//! sibling, `tests/conformance_kubernetes.py`): prints one JSON line, `{"server", "token", "caBundle"}` (`server`
//! a template over `{infraId}`), then takes one command a line on standard input until it closes: `page N` (lists
//! pages of N), `nodes N` (clusters have N nodes), `plain INFRA` (that cluster is plain Kubernetes: no
//! ClusterOperators), each answered `ok`.
// Its standard output is its interface: the hello line and the answers to commands.
#![allow(clippy::print_stdout)]

use std::io::BufRead;
use std::time::Duration;

use apiary_fakeclouds::cluster_api::FakeClusterApi;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let fake = FakeClusterApi::start(Duration::ZERO).await?;
    let hello =
        serde_json::json!({"server": fake.server("{infraId}"), "token": fake.token(), "caBundle": fake.ca_bundle()});
    println!("{hello}");
    let commands = tokio::task::spawn_blocking(move || {
        for line in std::io::stdin().lock().lines() {
            let line = line?;
            let (verb, arg) = line.split_once(' ').unwrap_or((line.as_str(), "1"));
            let n: usize = arg.trim().parse().unwrap_or(1);
            match verb {
                "page" => fake.page(n),
                "nodes" => fake.nodes(n),
                "plain" => fake.plain(arg.trim()),
                other => eprintln!("fake-cluster-api: no command {other:?}"),
            }
            println!("ok");
        }
        Ok::<(), std::io::Error>(())
    });
    commands.await.map_err(std::io::Error::other)?
}
