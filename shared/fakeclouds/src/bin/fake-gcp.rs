//! The fake Compute API on a free port, for an official client to drive (`tests/conformance_gcp.py`): prints one
//! JSON line, `{"endpoint", "project", "key"}` (the service account's key file names the fake's token endpoint),
//! then takes one command a line on standard input until it closes: `throttle N` (the next N requests are 429
//! with Retry-After), `unavailable N` (503), `page N` (list pages of N), each answered `ok`.
// Its standard output is its interface: the hello line and the answers to commands.
#![allow(clippy::print_stdout)]

use std::io::BufRead;
use std::time::Duration;

use apiary_fakeclouds::gcp::{FakeGcp, Timings};

const PROJECT: &str = "sdk-project";

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let fake = FakeGcp::start(Timings { boot: Duration::from_secs(1), stop: Duration::from_secs(1) }).await?;
    fake.add_template("apiary-node");
    let key = fake.service_account("sdk@sdk-project.iam.gserviceaccount.com", PROJECT);
    let hello = serde_json::json!({"endpoint": fake.endpoint(), "project": PROJECT, "key": key});
    println!("{hello}");
    let commands = tokio::task::spawn_blocking(move || {
        for line in std::io::stdin().lock().lines() {
            let line = line?;
            let (verb, n) = line.split_once(' ').unwrap_or((line.as_str(), "1"));
            let n: u32 = n.trim().parse().unwrap_or(1);
            match verb {
                "throttle" => fake.throttle(n),
                "unavailable" => fake.unavailable(n),
                "page" => fake.set_page_size(n as usize),
                other => eprintln!("fake-gcp: no command {other:?}"),
            }
            println!("ok");
        }
        Ok::<(), std::io::Error>(())
    });
    commands.await.map_err(std::io::Error::other)?
}
