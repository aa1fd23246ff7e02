//! `apiary-demo-clouds`: `make run`'s fake clouds in a process of their own, so that they outlive the functions
//! that drive them: the upgrade test (`tests/upgrade_test.py`) stops one release's `apiary-local` and starts the
//! next against the same machines.
//!
//! ```text
//! apiary-demo-clouds --prefix NAME --pools P,Q,... [--boot 4s] [--stop 2s]
//! ```
//! Starts the fakes as `apiary-local --fake-clouds` does, their credentials stored in the Secrets Manager of the
//! environment (`AWS_ENDPOINT_URL`) under `NAME-fake-<cloud>`, tagged for the pools named. Prints one JSON line,
//! `{"env": {...}, "fill": {...}}`: the settings that point `apiary-local` at the fakes, and what each pool file
//! placeholder (`{{fake-gcp-credentials}}`, ...) stands for. Then takes one command a line on standard input until
//! it closes, each answered `ok`: `machines PATH` writes every machine of the three clouds to PATH as JSON,
//! `{"gcp": [[zone, name, status]], "azure": [[group, name, power]], "vsphere": [[folder, name, power]]}`.

use std::time::Duration;

use anyhow::Context;
use apiary_fakeclouds::common::take_commands;
use apiary_local::clouds::{DemoClouds, Grants, DEMO_PROJECT, DEMO_SUBSCRIPTION};

fn usage() -> ! {
    eprintln!("usage: apiary-demo-clouds --prefix NAME --pools P,Q,... [--boot DURATION] [--stop DURATION]");
    std::process::exit(2)
}

fn duration(text: Option<String>) -> anyhow::Result<Duration> {
    let text = text.unwrap_or_else(|| usage());
    apiary_planner::duration::parse(&text)
        .ok()
        .and_then(|d| d.to_std().ok())
        .with_context(|| format!("{text:?}: want a duration like 4s"))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (mut prefix, mut pools) = (None, vec![]);
    let (mut boot, mut stop) = (Duration::from_secs(4), Duration::from_secs(2));
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--prefix" => prefix = args.next(),
            "--pools" => pools = args.next().unwrap_or_else(|| usage()).split(',').map(str::to_owned).collect(),
            "--boot" => boot = duration(args.next())?,
            "--stop" => stop = duration(args.next())?,
            _ => usage(),
        }
    }
    let prefix = prefix.unwrap_or_else(|| usage());
    let sdk = apiary_aws::load_sdk_config().await;
    let grants = Grants::every(&pools.iter().map(String::as_str).collect::<Vec<_>>());
    let demo = DemoClouds::start(&sdk, &prefix, boot, stop, &grants).await.context("starting the fake clouds")?;
    let endpoints = demo.endpoints();
    let hello = serde_json::json!({
        "env": {
            "APIARY_GCP_ENDPOINT": endpoints.gcp,
            "APIARY_AZURE_ENDPOINT": endpoints.azure,
            "APIARY_AZURE_AUTHORITY": endpoints.azure_authority,
        },
        "fill": demo.values().into_iter().map(|(k, v)| (k.to_owned(), v.into())).collect::<serde_json::Map<_, _>>(),
    });
    take_commands(&hello, move |verb, path| {
        let machines = serde_json::json!({
            "gcp": demo.gcp.instances(DEMO_PROJECT),
            "azure": demo.azure.vms(DEMO_SUBSCRIPTION),
            "vsphere": demo.vsphere.vms(),
        });
        verb == "machines" && std::fs::write(path, machines.to_string()).is_ok()
    })
    .await
    .context("reading commands")
}
