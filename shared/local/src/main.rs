//! `apiary-local`: runs Apiary's four functions in one process against the AWS endpoint of the environment
//! (`AWS_ENDPOINT_URL`), with the stack's settings from the environment.
//!
//! ```text
//! apiary-local [--listen 127.0.0.1:8080] [--address-file FILE] [--sweep-every 10s] [--fake-clouds]
//!              [--pool NAME=SPEC.json]... [--status]
//! ```
//! The API's address is bound before anything else starts, so the fake clouds' own listeners (any free port) can
//! never take it; with port 0 the system picks one, and `--address-file` writes the address bound (`IP:PORT`, once
//! the API answers) for whoever started the process.
//! `--pool` creates or updates a pool at start (as the first admin of `APIARY_ADMINS`); `--status` redraws every
//! pool's status every two seconds instead of logging. `--fake-clouds` serves a fake Compute Engine, a fake Azure
//! and a fake vCenter in this process, stores their demo credentials in Secrets Manager, and fills a pool file's
//! `{{fake-gcp-credentials}}`, `{{fake-azure-credentials}}`, `{{fake-vsphere-credentials}}`,
//! `{{fake-vsphere-server}}` and `{{fake-vsphere-ca}}` with them. Ctrl-C stops.

#![allow(clippy::print_stdout)]

use std::time::Duration;

use anyhow::{bail, Context};
use apiary_local::{clouds, start_functions, status, Functions, Options, PRINCIPAL_HEADER};

fn usage() -> ! {
    eprintln!(
        "usage: apiary-local [--listen ADDR] [--address-file FILE] [--sweep-every DURATION] [--fake-clouds] [--pool NAME=SPEC.json]... [--status]"
    );
    std::process::exit(2)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Args { options, pools, show_status, fake_clouds, address_file } = args()?;
    if show_status {
        std::env::set_var("APIARY_LOG_FORMAT", "text");
        if std::env::var_os("RUST_LOG").is_none() {
            std::env::set_var("RUST_LOG", "warn");
        }
    }
    apiary_aws::logging::init("local");
    let config = apiary_ports::Config::from_env().context("settings (run through `make run`, which sets them)")?;
    let sdk = apiary_aws::load_sdk_config().await;
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("listening on {}", options.listen))?;
    let mut endpoints = apiary_clouds::Endpoints::from_env();
    let demo = if fake_clouds {
        let prefix = format!("{}-{}", config.stack, std::process::id());
        // Each demo secret is tagged for the pools whose files name it, as a team's credentials are for its pools.
        let grants = clouds::Grants::named_by(pools.iter().map(|(name, text)| (name.as_str(), text.as_str())));
        let demo = clouds::DemoClouds::start(&sdk, &prefix, Duration::from_secs(20), Duration::from_secs(10), &grants)
            .await
            .context("starting the fake clouds")?;
        endpoints = demo.endpoints();
        eprintln!(
            "apiary-local: fake Compute Engine on {}, Azure on {}, vCenter on https://{}",
            demo.gcp.endpoint(),
            demo.azure.endpoint(),
            demo.vsphere.server()
        );
        Some(demo)
    } else {
        None
    };
    // Each function as a session of its own role, as Lambda runs it; `deps` is the operator's view (the status).
    let functions = Functions::as_roles(&config, &sdk, &|k| std::env::var(k).ok(), |deps, sdk| {
        clouds::with_clouds(deps, sdk, endpoints).map_err(anyhow::Error::from)
    })
    .await
    .context("the functions' roles (run through `make run`, which deploys the stack and names them)")?;
    let deps = apiary_aws::deps(config, &sdk);
    let running = start_functions(listener, functions, &options).context("starting the API")?;
    let base = format!("http://{}", running.addr);
    eprintln!("apiary-local: API on {base}");
    if let Some(file) = &address_file {
        // Written whole and then renamed, so a reader never sees half an address.
        let partial = format!("{file}.partial");
        std::fs::write(&partial, running.addr.to_string())
            .and_then(|()| std::fs::rename(&partial, file))
            .with_context(|| format!("--address-file {file}"))?;
    }
    for (name, body) in pools {
        let body = match (&demo, serde_json::from_str::<serde_json::Value>(&body)) {
            (Some(demo), Ok(mut spec)) => {
                demo.fill(&mut spec);
                spec.to_string()
            }
            _ => body,
        };
        let admin = deps.config.admins.first().cloned().context("--pool needs an admin in APIARY_ADMINS")?;
        let answer = put(&format!("{}/pools/{name}", running.addr), &admin, &body).await?;
        eprintln!("apiary-local: pool {name}: {answer}");
    }
    let shutdown = tokio::signal::ctrl_c();
    tokio::pin!(shutdown);
    if show_status {
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                _ = tokio::time::sleep(Duration::from_secs(2)) => {
                    let mut text =
                        status::render(&deps).await.unwrap_or_else(|e| format!("status unavailable: {e}\n"));
                    if let Some(demo) = &demo {
                        text.push_str(&status::notifications(&demo.receiver.received(), 5));
                    }
                    print!("\x1b[2J\x1b[H{}\nAPI {base}   (Ctrl-C stops)\n", text);
                }
            }
        }
    } else {
        let _ = shutdown.await;
    }
    running.stop().await;
    Ok(())
}

/// What the command line asks for.
struct Args {
    options: Options,
    pools: Vec<(String, String)>,
    show_status: bool,
    fake_clouds: bool,
    address_file: Option<String>,
}

/// The command line's arguments (the usage, and exit, when they do not parse).
fn args() -> anyhow::Result<Args> {
    let mut options = Options::default();
    let mut pools = vec![];
    let mut show_status = false;
    let mut fake_clouds = false;
    let mut address_file = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => options.listen = args.next().unwrap_or_else(|| usage()).parse().context("--listen")?,
            "--address-file" => address_file = Some(args.next().unwrap_or_else(|| usage())),
            "--sweep-every" => {
                let text = args.next().unwrap_or_else(|| usage());
                options.sweep_every = apiary_planner::duration::parse(&text)
                    .ok()
                    .and_then(|d| d.to_std().ok())
                    .filter(|d| !d.is_zero())
                    .with_context(|| format!("--sweep-every {text:?}: want a duration like 10s"))?;
            }
            "--pool" => {
                let spec = args.next().unwrap_or_else(|| usage());
                let Some((name, file)) = spec.split_once('=') else { usage() };
                pools
                    .push((name.to_owned(), std::fs::read_to_string(file).with_context(|| format!("reading {file}"))?));
            }
            "--status" => show_status = true,
            "--fake-clouds" => fake_clouds = true,
            "-h" | "--help" => usage(),
            other => bail!("unknown argument {other:?}"),
        }
    }
    Ok(Args { options, pools, show_status, fake_clouds, address_file })
}

/// A minimal HTTP/1.1 PUT to the local API, as the admin.
async fn put(addr_path: &str, principal: &str, body: &str) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (addr, path) = addr_path.split_once('/').context("address")?;
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let request = format!(
        "PUT /{path} HTTP/1.1\r\nHost: {addr}\r\n{PRINCIPAL_HEADER}: {principal}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    Ok(response.lines().next().unwrap_or_default().to_owned())
}
