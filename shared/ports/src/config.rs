//! Settings from the environment: the stack's outputs, as the template passes them to each function.

use apiary_planner::access::DefaultAccess;
use apiary_planner::validate::{MemberRoles, UrlPolicy};

use crate::error::{Error, Result};
use crate::metrics::{Monitoring, Sink};

/// What the functions read from their environment.
#[derive(Debug, Clone)]
pub struct Config {
    /// `APIARY_TABLE`: the DynamoDB table.
    pub table: String,
    /// `APIARY_RECONCILE_QUEUE_URL`: the FIFO reconcile queue.
    pub reconcile_queue_url: String,
    /// `APIARY_RECONCILE_QUEUE_ARN`: the same queue, as the target of pool schedules.
    pub reconcile_queue_arn: String,
    /// `APIARY_POWER_QUEUE_URL`: the power queue.
    pub power_queue_url: String,
    /// `APIARY_SCHEDULER_ROLE_ARN`: the role EventBridge Scheduler assumes to send to the reconcile queue.
    pub scheduler_role_arn: String,
    /// `APIARY_SCHEDULE_PREFIX`: prefix of this deployment's schedule names (default `apiary-`).
    pub schedule_prefix: String,
    /// `APIARY_ADMINS`: comma-separated principal ARNs that may manage pools and act on any claim.
    pub admins: Vec<String>,
    /// `APIARY_MAX_RECHECK_SECONDS`: longest wait between two looks at a cluster (default and maximum 900, the
    /// SQS delay limit). Lower it to make transitions on a fast cloud or emulator observable sooner.
    pub max_recheck_seconds: u32,
    /// `APIARY_FULL_SWEEP_SECONDS`: how often the sweep makes a full pass, enqueueing every pool and starting the
    /// tick of every pool with clusters in motion and none live (default 600).
    pub full_sweep_every: chrono::TimeDelta,
    /// `APIARY_STACK`: the deployment's name, the `Stack` dimension of its metrics (default `apiary`).
    pub stack: String,
    /// `APIARY_STACK_ID`: the stack's `AWS::StackId` (default the stack's name), from which each AWS pool's
    /// ExternalId is made ([`apiary_planner::external_id`]).
    pub stack_id: String,
    /// `APIARY_MEMBER_ROLE_PATTERN` and `APIARY_MEMBER_ACCOUNTS` (comma-separated account ids): the roles an AWS
    /// pool may name, as the power role's policy allows them (default: `apiary-member-*`, in no account).
    pub member_roles: MemberRoles,
    /// `APIARY_DEFAULT_POOL_ACCESS`: what a pool without `access` allows callers who are not stack admins, `open`
    /// (claim from it; the default) or `admins` (nothing).
    pub default_pool_access: DefaultAccess,
    /// What a pool's URLs may reach ([`UrlPolicy`]): `APIARY_ALLOWED_PRIVATE_RANGES` (comma-separated CIDRs, the
    /// stack's `AllowedPrivateRanges`), `APIARY_API_HOST` (the stack's own API, never called) and
    /// `APIARY_LOCAL_URLS=true` (the local stack only: http, loopback and private addresses allowed).
    pub url_policy: UrlPolicy,
    /// `APIARY_METRICS`: `emf` (default) writes CloudWatch metrics to stdout, `file:PATH` appends them to a file
    /// (the local runtime, whose stdout is the status screen), `off` writes none.
    pub metrics: Sink,
    /// `APIARY_MONITORING`: which metric series are published, each billed by CloudWatch ([`Monitoring`]):
    /// `alarms` (the default), `dashboard` or `pools`.
    pub monitoring: Monitoring,
}

impl Config {
    /// Reads the settings from the environment; a missing required one is an error naming it.
    pub fn from_env() -> Result<Self> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the settings from `lookup` (the environment, or a stack's outputs).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let var = |name: &str| lookup(name).ok_or_else(|| Error::Config(format!("{name} is not set")));
        let max_recheck_seconds = match lookup("APIARY_MAX_RECHECK_SECONDS") {
            Some(v) => v
                .parse::<u32>()
                .ok()
                .filter(|s| (1..=900).contains(s))
                .ok_or_else(|| Error::Config(format!("APIARY_MAX_RECHECK_SECONDS={v:?}: want 1 to 900")))?,
            None => 900,
        };
        let full_sweep_every = match lookup("APIARY_FULL_SWEEP_SECONDS") {
            Some(v) => v
                .parse::<i64>()
                .ok()
                .filter(|s| (1..=86_400).contains(s))
                .map(chrono::TimeDelta::seconds)
                .ok_or_else(|| Error::Config(format!("APIARY_FULL_SWEEP_SECONDS={v:?}: want 1 to 86400")))?,
            None => apiary_planner::sweep::FULL_SWEEP_EVERY,
        };
        let mut member_roles = MemberRoles::default();
        if let Some(pattern) = lookup("APIARY_MEMBER_ROLE_PATTERN").filter(|p| !p.trim().is_empty()) {
            member_roles.pattern = pattern.trim().to_owned();
        }
        for account in lookup("APIARY_MEMBER_ACCOUNTS").unwrap_or_default().split(',').map(str::trim) {
            if account.is_empty() {
                continue;
            }
            if account.len() != 12 || !account.bytes().all(|b| b.is_ascii_digit()) {
                return Err(Error::Config(format!("APIARY_MEMBER_ACCOUNTS: {account:?} is not a 12-digit account id")));
            }
            member_roles.accounts.push(account.to_owned());
        }
        let default_pool_access = match lookup("APIARY_DEFAULT_POOL_ACCESS").filter(|v| !v.is_empty()) {
            Some(v) => v.parse().map_err(|why| Error::Config(format!("APIARY_DEFAULT_POOL_ACCESS: {why}")))?,
            None => DefaultAccess::default(),
        };
        let local_urls = match lookup("APIARY_LOCAL_URLS").as_deref() {
            None | Some("" | "false") => false,
            Some("true") => true,
            Some(v) => return Err(Error::Config(format!("APIARY_LOCAL_URLS={v:?}: want true or false"))),
        };
        let api_host: Vec<String> = lookup("APIARY_API_HOST").filter(|h| !h.is_empty()).into_iter().collect();
        let ranges = lookup("APIARY_ALLOWED_PRIVATE_RANGES").unwrap_or_default();
        let url_policy = UrlPolicy::new(local_urls, &ranges, api_host)
            .map_err(|why| Error::Config(format!("APIARY_ALLOWED_PRIVATE_RANGES: {why}")))?;
        let stack = lookup("APIARY_STACK").unwrap_or_else(|| "apiary".into());
        Ok(Config {
            table: var("APIARY_TABLE")?,
            reconcile_queue_url: var("APIARY_RECONCILE_QUEUE_URL")?,
            reconcile_queue_arn: var("APIARY_RECONCILE_QUEUE_ARN")?,
            power_queue_url: var("APIARY_POWER_QUEUE_URL")?,
            scheduler_role_arn: var("APIARY_SCHEDULER_ROLE_ARN")?,
            schedule_prefix: lookup("APIARY_SCHEDULE_PREFIX").unwrap_or_else(|| "apiary-".into()),
            admins: admins(&lookup("APIARY_ADMINS").unwrap_or_default())?,
            max_recheck_seconds,
            full_sweep_every,
            stack_id: lookup("APIARY_STACK_ID").filter(|s| !s.is_empty()).unwrap_or_else(|| stack.clone()),
            stack,
            member_roles,
            default_pool_access,
            url_policy,
            metrics: match lookup("APIARY_METRICS").as_deref() {
                None | Some("emf") => Sink::Stdout,
                Some("off") => Sink::Off,
                Some(v) if v.starts_with("file:") && v.len() > 5 => Sink::File(v[5..].into()),
                Some(v) => return Err(Error::Config(format!("APIARY_METRICS={v:?}: want emf, file:PATH or off"))),
            },
            monitoring: match lookup("APIARY_MONITORING").filter(|v| !v.is_empty()) {
                None => Monitoring::default(),
                Some(v) => Monitoring::parse(&v).ok_or_else(|| {
                    Error::Config(format!("APIARY_MONITORING={v:?}: want alarms, dashboard or pools"))
                })?,
            },
        })
    }

    /// Settings for a deployment whose resources are named after `stack`, with `admins` (tests and simulations,
    /// where nothing real stands behind the names).
    pub fn named(stack: &str, admins: &[&str]) -> Self {
        Config {
            table: format!("{stack}-table"),
            reconcile_queue_url: format!("{stack}-reconcile.fifo"),
            reconcile_queue_arn: format!("arn:aws:sqs:us-east-1:123456789012:{stack}-reconcile.fifo"),
            power_queue_url: format!("{stack}-power"),
            scheduler_role_arn: format!("arn:aws:iam::123456789012:role/{stack}-scheduler"),
            schedule_prefix: format!("{stack}-"),
            admins: admins.iter().map(|a| (*a).to_owned()).collect(),
            max_recheck_seconds: 900,
            full_sweep_every: apiary_planner::sweep::FULL_SWEEP_EVERY,
            stack: stack.to_owned(),
            stack_id: format!(
                "arn:aws:cloudformation:us-east-1:123456789012:stack/{stack}/0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
            ),
            member_roles: MemberRoles::default(),
            default_pool_access: DefaultAccess::default(),
            url_policy: UrlPolicy::default(),
            metrics: Sink::Off,
            // Tests read every document a handler writes.
            monitoring: Monitoring::Pools,
        }
    }
}

/// `APIARY_ADMINS` (the stack's `AdminPrincipals`): comma-separated principal patterns, each as a pool's `access`
/// takes them ([`apiary_planner::access::matches`]: a role names its sessions, an account id its principals,
/// IAM's wildcards), checked by the same rule.
fn admins(text: &str) -> Result<Vec<String>> {
    let admins: Vec<String> = text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
    apiary_planner::validate::validate_principals("AdminPrincipals", &admins)
        .map_err(|e| Error::Config(format!("APIARY_ADMINS: {}: {}", e.field, e.message)))?;
    Ok(admins)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn config(extra: &[(&str, &str)]) -> Result<Config> {
        let mut env: HashMap<&str, &str> = [
            ("APIARY_TABLE", "t"),
            ("APIARY_RECONCILE_QUEUE_URL", "r"),
            ("APIARY_RECONCILE_QUEUE_ARN", "ra"),
            ("APIARY_POWER_QUEUE_URL", "p"),
            ("APIARY_SCHEDULER_ROLE_ARN", "s"),
        ]
        .into();
        env.extend(extra.iter().copied());
        Config::from_lookup(|k| env.get(k).map(|v| (*v).to_owned()))
    }

    #[test]
    fn defaults_and_metrics_sinks() {
        let c = config(&[]).expect("config");
        assert_eq!((c.stack.as_str(), c.metrics, c.max_recheck_seconds), ("apiary", Sink::Stdout, 900));
        let c = config(&[("APIARY_METRICS", "file:/tmp/m.log"), ("APIARY_STACK", "prod")]).expect("config");
        assert_eq!((c.stack.as_str(), c.metrics), ("prod", Sink::File("/tmp/m.log".into())));
        assert_eq!(config(&[("APIARY_METRICS", "off")]).expect("config").metrics, Sink::Off);
    }

    #[test]
    fn monitoring_publishes_the_alarms_series_unless_asked_for_more_and_a_bad_value_is_named() {
        assert_eq!(config(&[]).expect("config").monitoring, Monitoring::Alarms);
        assert_eq!(config(&[("APIARY_MONITORING", "pools")]).expect("config").monitoring, Monitoring::Pools);
        let e = config(&[("APIARY_MONITORING", "all")]).expect_err("refused").to_string();
        assert!(e.contains("APIARY_MONITORING=\"all\""), "{e}");
    }

    #[test]
    fn member_roles_and_the_stack_id() {
        let c = config(&[]).expect("config");
        assert_eq!((c.stack_id.as_str(), c.member_roles), ("apiary", MemberRoles::default()));
        let c = config(&[
            ("APIARY_STACK_ID", "arn:aws:cloudformation:eu-west-1:123456789012:stack/apiary/0f1e"),
            ("APIARY_MEMBER_ROLE_PATTERN", "apiary-*"),
            ("APIARY_MEMBER_ACCOUNTS", " 210987654321, 111111111111 ,"),
        ])
        .expect("config");
        assert_eq!(c.stack_id, "arn:aws:cloudformation:eu-west-1:123456789012:stack/apiary/0f1e");
        assert_eq!(c.member_roles.pattern, "apiary-*");
        assert_eq!(c.member_roles.accounts, ["210987654321", "111111111111"]);
    }

    #[test]
    fn the_default_pool_access_is_open_unless_the_stack_says_admins() {
        assert_eq!(config(&[]).expect("config").default_pool_access, DefaultAccess::Open);
        let c = config(&[("APIARY_DEFAULT_POOL_ACCESS", "admins")]).expect("config");
        assert_eq!(c.default_pool_access, DefaultAccess::Admins);
    }

    #[test]
    fn admins_are_principal_patterns_and_a_malformed_one_is_named() {
        let c = config(&[("APIARY_ADMINS", "arn:aws:iam::111122223333:role/platform-admin, 444455556666")]);
        assert_eq!(c.expect("config").admins, ["arn:aws:iam::111122223333:role/platform-admin", "444455556666"]);
        let err = config(&[("APIARY_ADMINS", "arn:aws:iam::111122223333:role/a,platform-admin")]).expect_err("refused");
        assert!(err.to_string().contains("AdminPrincipals[1]"), "{err}");
        assert!(err.to_string().contains("\"platform-admin\" is not a principal"), "{err}");
    }

    #[test]
    fn the_url_policy_is_strict_unless_the_stack_allows_ranges_or_is_local() {
        assert_eq!(config(&[]).expect("config").url_policy, UrlPolicy::default());
        let c = config(&[
            ("APIARY_ALLOWED_PRIVATE_RANGES", "10.20.0.0/16, 192.168.7.0/24"),
            ("APIARY_API_HOST", "abc123.execute-api.eu-west-1.amazonaws.com"),
        ])
        .expect("config");
        assert_eq!((c.url_policy.private.len(), c.url_policy.denied_hosts.len(), c.url_policy.local), (2, 1, false));
        assert!(config(&[("APIARY_LOCAL_URLS", "true")]).expect("config").url_policy.local);
    }

    #[test]
    fn bad_settings_name_the_variable() {
        for (name, value) in [
            ("APIARY_METRICS", "loud"),
            ("APIARY_METRICS", "file:"),
            ("APIARY_MAX_RECHECK_SECONDS", "0"),
            ("APIARY_FULL_SWEEP_SECONDS", "soon"),
            ("APIARY_MEMBER_ACCOUNTS", "210987654321,12345"),
            ("APIARY_DEFAULT_POOL_ACCESS", "closed"),
            ("APIARY_ALLOWED_PRIVATE_RANGES", "10.0.0.0/8,vcenter"),
            ("APIARY_LOCAL_URLS", "yes"),
        ] {
            let e = config(&[(name, value)]).expect_err(value).to_string();
            assert!(e.contains(name), "{e}");
        }
        let e = Config::from_lookup(|_| None).expect_err("nothing set").to_string();
        assert!(e.contains("APIARY_TABLE"), "{e}");
    }
}
