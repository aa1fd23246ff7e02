//! The command line's grammar.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use clap_complete::Shell;

use crate::api::AuthMode;
use crate::error::EXIT_CODES;
use crate::render::Format;

/// Apiary's command line: pools of ready clusters, and claims on them.
#[derive(Debug, Parser)]
#[command(name = "apiary", version, after_help = EXIT_CODES, propagate_version = true, max_term_width = 100)]
pub struct Cli {
    /// The claim API's base URL (a stack's ApiUrl output, or http://127.0.0.1:8080 for `make run`).
    #[arg(long, env = "APIARY_API", global = true, value_name = "URL")]
    pub api: Option<String>,
    /// Find the API in this CloudFormation stack's ApiUrl output instead.
    #[arg(long, env = "APIARY_STACK", global = true, value_name = "NAME", conflicts_with = "api")]
    pub stack: Option<String>,
    /// The caller's ARN, for a local API only (on AWS the caller is whoever the AWS credentials are).
    #[arg(long = "as", env = "APIARY_PRINCIPAL", global = true, value_name = "ARN")]
    pub principal: Option<String>,
    /// How requests say who is calling: auto is the local identity header (--as) for a loopback address, SigV4
    /// with the caller's AWS credentials otherwise.
    #[arg(long, env = "APIARY_AUTH", global = true, value_enum, default_value_t = AuthMode::Auto)]
    pub auth: AuthMode,
    /// The AWS region (default: the AWS configuration's, or the API URL's).
    #[arg(long, global = true)]
    pub region: Option<String>,
    /// How to print what the command returns.
    #[arg(long, short, global = true, value_enum, default_value_t = Format::Table)]
    pub output: Format,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create, change, inspect and remove pools (creating needs a stack admin, changing an admin of the pool).
    #[command(subcommand)]
    Pool(PoolCommand),
    /// Claim a cluster (`apiary claim POOL NAME`), or look at and act on claims.
    Claim(ClaimCommand),
    /// Print who the API takes you for: your principal, whether you are a stack admin, and the pools you may
    /// claim from and administer.
    Whoami,
    /// Remove a stack: drain its pools, then delete it (`apiary stack delete NAME`).
    #[command(subcommand)]
    Stack(StackCommand),
    /// Print where the API is and how requests say who is calling.
    Endpoint,
    /// Print this command line's release and the stack's, and whether they work together (a command line
    /// works with a stack of its own release and of the one before).
    Version,
    /// Print a completion script for a shell (`apiary completions bash > /etc/bash_completion.d/apiary`).
    Completions {
        /// The shell.
        shell: Shell,
    },
}

/// `apiary stack …`.
#[derive(Debug, Subcommand)]
pub enum StackCommand {
    /// Delete a stack without leaving a machine behind: every pool is drained first (its clusters removed from
    /// their clouds), then the CloudFormation stack is deleted. The table is kept unless --delete-table.
    Delete {
        /// The CloudFormation stack.
        name: String,
        /// End the claims still held (without it, held claims refuse the deletion and are listed).
        #[arg(long)]
        end_claims: bool,
        /// Delete the kept table too (turning its deletion protection off): every record of the stack goes.
        #[arg(long)]
        delete_table: bool,
        /// How long to wait for the pools to drain and the stack to go.
        #[arg(long, value_name = "DURATION", default_value = "30m")]
        wait: String,
    },
    /// Check a deployed stack: IAM's policy simulator asked whether each function's role allows every call the
    /// function makes, then its health (the API's /version, the queues and dead letters, the sweep's last full
    /// pass, alarms in ALARM). Exits 1 when any row says PROBLEM.
    Check {
        /// The CloudFormation stack.
        name: String,
    },
}

/// `apiary pool …`.
#[derive(Debug, Subcommand)]
pub enum PoolCommand {
    /// Create or update pools from spec files (YAML or JSON; `pool get -o yaml` output works too), each file one
    /// pool; every file is checked before any is applied.
    Apply {
        /// The pool's name, for a single file (default: the file's `name`, else its name without extension).
        name: Option<String>,
        /// A spec file (`-`: standard input), or a directory of them (.json, .yaml, .yml); repeat for more.
        #[arg(long, short, required = true)]
        file: Vec<PathBuf>,
        /// Change nothing: print what each file would change and the clusters it would replace; exit 7 if
        /// anything would change, 0 if nothing would.
        #[arg(long)]
        diff: bool,
        /// Also delete the pools carrying these labels that no file names (every file must carry them too, so
        /// one team's files prune only that team's pools).
        #[arg(long, value_name = "KEY=VALUE,...")]
        prune: Option<String>,
    },
    /// Show a pool: its settings, counts and conditions.
    Get {
        /// The pool.
        name: String,
    },
    /// List the pools.
    List,
    /// Delete a pool: its claims end and its clusters are removed.
    Delete {
        /// The pool.
        name: String,
        /// Wait until the pool is gone (at most this long).
        #[arg(long, value_name = "DURATION", num_args = 0..=1, default_missing_value = "30m")]
        wait: Option<String>,
    },
    /// List a pool's clusters: name, power state, age, claim, broken reason.
    Clusters {
        /// The pool.
        name: String,
    },
    /// Show a pool's event trail, newest first: claims made, assigned and released and by whom, clusters
    /// installed, broken, removed and why, pool changes (the pool's admins).
    Events {
        /// The pool.
        name: String,
        /// Only the events of this claim.
        #[arg(long)]
        claim: Option<String>,
        /// Only the events of this cluster (its id).
        #[arg(long)]
        cluster: Option<String>,
        /// At most this many events (the API's pages are read until there are).
        #[arg(long, default_value_t = 50, value_name = "N")]
        limit: usize,
    },
    /// Show a pool's status, redrawn in place, until Ctrl-C.
    Watch {
        /// The pool.
        name: String,
        /// Time between two looks.
        #[arg(long, default_value = "2s", value_name = "DURATION")]
        interval: String,
    },
    /// Translate a Hive ClusterPool manifest into an Apiary pool (printed; applied with --apply).
    Import {
        /// The ClusterPool manifest (YAML or JSON).
        file: PathBuf,
        /// A pool spec supplying what the manifest cannot say (the platform's image, credentials' ARNs, …).
        #[arg(long, value_name = "BASE")]
        into: Option<PathBuf>,
        /// The pool's name (default: the manifest's metadata.name).
        #[arg(long)]
        name: Option<String>,
        /// Create or update the pool as well.
        #[arg(long)]
        apply: bool,
        /// Install through the reference installer at this URL (its stack's InstallerUrl): the output also
        /// holds the installer's settings for the pool, from the ClusterImageSet and install-config Secret the
        /// file holds beside the ClusterPool (a List, as `kubectl get … -o yaml` writes one).
        #[arg(long, value_name = "URL", requires = "installer_secret")]
        installer: Option<String>,
        /// The ARN of the reference installer's signing key (the pools' provisioner.webhook.secret).
        #[arg(long, value_name = "ARN", requires = "installer")]
        installer_secret: Option<String>,
        /// The ARN of the secret holding the pool's pull secret, for the installer's settings.
        #[arg(long, value_name = "ARN", requires = "installer")]
        pull_secret: Option<String>,
        /// The ARN of the secret holding the machines' SSH public key, for the installer's settings.
        #[arg(long, value_name = "ARN", requires = "installer")]
        ssh_key: Option<String>,
    },
}

/// `apiary claim POOL NAME`, `apiary claim --selector KEY=VALUE,... NAME`, or `apiary claim get|list|release|…`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ClaimCommand {
    /// A claim subcommand; without one, make a claim.
    #[command(subcommand)]
    pub action: Option<ClaimAction>,
    /// Make a claim.
    #[command(flatten)]
    pub create: Option<ClaimCreate>,
}

/// Make a claim and, with `--wait`, wait until its cluster is Ready.
#[derive(Debug, Clone, Args)]
pub struct ClaimCreate {
    /// The pool, then the claim's name (a job id, for example); with --selector, the claim's name alone.
    #[arg(required = true, num_args = 1..=2, value_names = ["POOL", "NAME"])]
    pub names: Vec<String>,
    /// Claim from whichever pool carrying these labels serves the claim first (one with a Running spare, else
    /// the one that will have a cluster soonest), instead of naming a pool: KEY=VALUE, comma-separated.
    #[arg(long, value_name = "KEY=VALUE,...")]
    pub selector: Option<String>,
    /// How long the claim keeps its cluster (capped by the pool's claimLifetime.maximum).
    #[arg(long, value_name = "DURATION")]
    pub lifetime: Option<String>,
    /// Wait until the cluster is Ready, at most this long (default 30m when given without a value).
    #[arg(long, value_name = "DURATION", num_args = 0..=1, default_missing_value = "30m")]
    pub wait: Option<String>,
    /// When the wait times out, release the claim instead of leaving it in place.
    #[arg(long, requires = "wait")]
    pub release_on_timeout: bool,
    /// A principal who may use the claim beside you (an IAM or STS ARN, an account id, or a pattern as a pool's
    /// access takes them); repeat for more.
    #[arg(long = "subject", value_name = "PRINCIPAL")]
    pub subjects: Vec<String>,
}

/// `apiary claim …`.
#[derive(Debug, Subcommand)]
pub enum ClaimAction {
    /// Make a claim (for a pool named like a subcommand).
    Create(ClaimCreate),
    /// Show a claim: phase, cluster, outputs, machines.
    Get(ClaimRef),
    /// List a pool's claims (yours; an admin sees every claim).
    List {
        /// The pool.
        pool: String,
    },
    /// Release a claim: its cluster is removed.
    Release(ClaimRef),
    /// Hibernate the claimed cluster.
    Hibernate(ClaimRef),
    /// Resume the claimed cluster.
    Resume(ClaimRef),
    /// Change a claim's lifetime, longer or shorter (at most the pool's claimLifetime.maximum, counted from when it
    /// got its cluster).
    Extend {
        /// The claim.
        #[command(flatten)]
        claim: ClaimRef,
        /// Its new lifetime.
        #[arg(value_name = "DURATION")]
        lifetime: String,
    },
    /// Set who may use a claim beside its owner (the owner or a pool admin): the principals given replace those
    /// before; none, and the claim is shared with nobody.
    Share {
        /// The claim.
        #[command(flatten)]
        claim: ClaimRef,
        /// A principal who may use the claim; repeat for more.
        #[arg(long = "subject", value_name = "PRINCIPAL")]
        subjects: Vec<String>,
    },
}

/// One claim.
#[derive(Debug, Clone, Args)]
pub struct ClaimRef {
    /// The pool.
    pub pool: String,
    /// The claim.
    pub name: String,
}
