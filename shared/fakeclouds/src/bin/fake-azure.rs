//! The fake Azure Resource Manager and Entra ID on a free port, over HTTPS, for Azure's own SDK to drive
//! (`tests/conformance_azure.py`): prints one JSON line, `{"endpoint", "tenant", "clientId", "clientSecret",
//! "subscription", "caPem"}`, then takes one command a line on standard input until it closes: `throttle N` (the
//! next N ARM calls are 429 with Retry-After), `unavailable N` (503), `page N` (list pages of N), `advance S` (the
//! clock moves S seconds), `record` (every exchange from now on is kept), `dump PATH` (they are written to PATH as
//! JSON, and cleared), each answered `ok`.

use std::time::Duration;

use apiary_fakeclouds::azure::{FakeAzure, Timings};
use apiary_fakeclouds::common::take_commands;

const TENANT: &str = "72f988bf-86f1-41af-91ab-2d7cd011db47";
const SUBSCRIPTION: &str = "00000000-0000-0000-0000-00000000beef";
const CLIENT: &str = "sdk-app";

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let second = Duration::from_secs(1);
    let (fake, ca_pem) =
        FakeAzure::start_tls(Timings { boot: second, stop: second, deploy: second, delete: second }).await?;
    let app: serde_json::Value = serde_json::from_str(&fake.app(TENANT, CLIENT)).map_err(std::io::Error::other)?;
    let hello = serde_json::json!({
        "endpoint": fake.endpoint(),
        "tenant": TENANT,
        "clientId": CLIENT,
        "clientSecret": app["clientSecret"],
        "subscription": SUBSCRIPTION,
        "caPem": ca_pem,
    });
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
            "advance" => fake.advance(Duration::from_secs(n.into())),
            _ => return false,
        }
        true
    })
    .await
}
