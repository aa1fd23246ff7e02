//! `apiary`: see `apiary --help`, and the README's quick start.

use std::io::IsTerminal;
use std::process::ExitCode;

use apiary_cli::api::{self, Api, Target};
use apiary_cli::args::{ClaimAction, Cli, Command, PoolCommand, StackCommand};
use apiary_cli::commands::{self, out, Ctx};
use apiary_cli::error::{Exit, Failure, Result};
use clap::{CommandFactory, Parser};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => return fail(&Failure::other(format!("starting: {e}"))),
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => fail(&f),
    }
}

fn fail(f: &Failure) -> ExitCode {
    // A bare exit status (`pool apply --diff`'s 7: changes to apply) has said what it has to on standard output.
    if !f.message.is_empty() {
        eprintln!("apiary: {f}");
    }
    ExitCode::from(f.exit as u8)
}

async fn run(cli: Cli) -> Result<()> {
    if let Command::Completions { shell } = cli.command {
        let mut text = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "apiary", &mut text);
        out(&String::from_utf8_lossy(&text));
        return Ok(());
    }
    if let Command::Pool(PoolCommand::Import {
        file,
        into,
        name,
        apply: false,
        installer,
        installer_secret,
        pull_secret,
        ssh_key,
    }) = &cli.command
    {
        let installer = commands::installer(installer, installer_secret, pull_secret, ssh_key);
        return commands::import_offline(cli.output, file, into.as_deref(), name.as_deref(), installer.as_ref());
    }
    let mut target =
        Target { api: cli.api, stack: cli.stack, principal: cli.principal, region: cli.region, auth: cli.auth };
    // `stack check NAME` reaches NAME's own API unless told otherwise.
    if let (Command::Stack(StackCommand::Check { name }), None, None) = (&cli.command, &target.api, &target.stack) {
        target.stack = Some(name.clone());
    }
    let api = Api::connect(&target).await?;
    // Which local API and principal are used, for a person at a terminal; a script's standard error stays quiet.
    if let Some(note) = api.local_note().filter(|_| std::io::stderr().is_terminal()) {
        eprintln!("{note}");
    }
    let ctx = Ctx { api, format: cli.output };
    match cli.command {
        Command::Pool(command) => ctx.pool(command).await,
        Command::Claim(claim) => match (claim.action, claim.create) {
            (Some(action), _) => ctx.claim(action).await,
            (None, Some(create)) => ctx.claim(ClaimAction::Create(create)).await,
            (None, None) => Err(Failure::new(Exit::Usage, "claim: give POOL NAME, or a subcommand (see --help)")),
        },
        Command::Whoami => ctx.whoami().await,
        Command::Version => ctx.version().await,
        Command::Stack(StackCommand::Delete { name, end_claims, delete_table, wait }) => {
            let config = api::aws_configuration(&target).await;
            ctx.stack_delete(&config, &name, end_claims, delete_table, &wait).await
        }
        Command::Stack(StackCommand::Check { name }) => {
            let config = api::aws_configuration(&target).await;
            ctx.stack_check(&config, &name).await
        }
        Command::Endpoint => {
            out(&format!("{}\n", ctx.api.describe()));
            Ok(())
        }
        Command::Completions { .. } => Ok(()),
    }
}
