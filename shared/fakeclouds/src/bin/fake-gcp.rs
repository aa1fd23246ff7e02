//! The fake Compute API on a free port, for an official client to drive (`tests/conformance_gcp.py`): prints one
//! JSON line, `{"endpoint", "project", "key"}` (the service account's key file names the fake's token endpoint),
//! then takes one command a line on standard input until it closes: `throttle N` (the next N requests are 429
//! with Retry-After), `unavailable N` (503), `page N` (list pages of N), `record` (every exchange from now on is
//! kept), `dump PATH` (they are written to PATH as JSON, and cleared), each answered `ok`.

use std::time::Duration;

use apiary_fakeclouds::common::take_commands;
use apiary_fakeclouds::gcp::{FakeGcp, Timings};

const PROJECT: &str = "sdk-project";

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let fake = FakeGcp::start(Timings { boot: Duration::from_secs(1), stop: Duration::from_secs(1) }).await?;
    fake.add_template("apiary-node");
    let key = fake.service_account("sdk@sdk-project.iam.gserviceaccount.com", PROJECT);
    let hello = serde_json::json!({"endpoint": fake.endpoint(), "project": PROJECT, "key": key});
    take_commands(&hello, move |verb, arg| {
        let n: u32 = arg.parse().unwrap_or(1);
        match verb {
            "throttle" => fake.throttle(n),
            "unavailable" => fake.unavailable(n),
            "page" => fake.set_page_size(n as usize),
            "record" => fake.record(),
            "dump" => {
                let wire = serde_json::to_vec(&fake.take_wire()).unwrap_or_default();
                if std::fs::write(arg, wire).is_err() {
                    return false;
                }
            }
            _ => return false,
        }
        true
    })
    .await
}
