//! Who may do what with a pool: claim from it, or administer it.
//!
//! A pool's `access` lists its `claimants` and its `admins` as principal patterns. The stack's admins
//! (`AdminPrincipals`) may do everything with every pool; a pool without `access` allows what the stack's
//! `DefaultPoolAccess` says. A pool's admins may claim from it, change and delete it, pause its clusters, and read,
//! power and release any of its claims; its claimants may claim, and see the pool, its clusters and their own
//! claims. Only stack admins create pools. A claim's owner keeps every right over that claim (read, power,
//! release) even after leaving the pool's claimants: giving a cluster back is never refused.
//!
//! A pattern is one of:
//! - `*`: every caller that API Gateway lets in (`execute-api:Invoke` on the stack's API);
//! - a 12-digit account id: every principal of that account;
//! - an IAM or STS ARN, with IAM's wildcards (`*` any run of characters, `?` one): the caller's ARN matches it.
//!   A role's ARN (`arn:aws:iam::111122223333:role/ci`) also matches the role's sessions
//!   (`arn:aws:sts::111122223333:assumed-role/ci/job-42`), which is how API Gateway names a caller that assumed
//!   it. A session's ARN does not carry the role's path, so a role pattern with a path matches sessions by the
//!   role's name (unique in its account) and may not have a wildcard in that name.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::glob::glob;
use crate::model::PoolAccess;

/// What a pool allows a caller it does not name: the stack's `DefaultPoolAccess`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DefaultAccess {
    /// Every caller may claim from (and see) a pool without `access`; only stack admins administer it. API
    /// Gateway's IAM authorization already limits callers to those granted `execute-api:Invoke` on the stack.
    #[default]
    Open,
    /// Only stack admins may use a pool without `access`: pools are private until they say who may use them.
    Admins,
}

impl FromStr for DefaultAccess {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "open" => Ok(Self::Open),
            "admins" => Ok(Self::Admins),
            other => Err(format!("{other:?} is not a default pool access (open or admins)")),
        }
    }
}

/// What a caller may do with one pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rights {
    /// Claim from it (and see it, its clusters, and the caller's own claims).
    pub claim: bool,
    /// Change or delete it, pause its clusters, and read, power and release every claim of it.
    pub administer: bool,
}

impl Rights {
    /// Every right: a stack admin's.
    pub const ALL: Rights = Rights { claim: true, administer: true };

    /// Whether the caller may see the pool at all.
    pub fn any(self) -> bool {
        self.claim || self.administer
    }
}

/// The rights of `caller` (the principal ARN API Gateway names) over a pool whose access is `access`;
/// `stack_admin` when the caller is one of the stack's admins.
pub fn rights(access: Option<&PoolAccess>, caller: &str, stack_admin: bool, default: DefaultAccess) -> Rights {
    if stack_admin {
        return Rights::ALL;
    }
    match access {
        None => Rights { claim: default == DefaultAccess::Open, administer: false },
        Some(access) => {
            let named = |patterns: &[String]| patterns.iter().any(|p| matches(p, caller));
            let administer = named(&access.admins);
            Rights { claim: administer || named(&access.claimants), administer }
        }
    }
}

/// Whether the principal pattern `pattern` names `caller`.
pub fn matches(pattern: &str, caller: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    let Some(who) = Arn::parse(caller) else { return false };
    if is_account(pattern) {
        return who.account == pattern;
    }
    if glob(pattern.as_bytes(), caller.as_bytes()) {
        return true;
    }
    // A role's pattern names the role's sessions too: by partition, account and the role's name.
    match (Arn::parse(pattern), who.session_role()) {
        (Some(p), Some(role)) => match p.role_name() {
            Some(name) => {
                p.service == "iam"
                    && glob(p.partition.as_bytes(), who.partition.as_bytes())
                    && glob(p.account.as_bytes(), who.account.as_bytes())
                    && glob(name.as_bytes(), role.as_bytes())
            }
            None => false,
        },
        _ => false,
    }
}

/// Whether `s` is a 12-digit account id.
pub(crate) fn is_account(s: &str) -> bool {
    s.len() == 12 && s.bytes().all(|b| b.is_ascii_digit())
}

/// An ARN's fields (each may hold wildcards when it is a pattern).
pub(crate) struct Arn<'a> {
    pub(crate) partition: &'a str,
    pub(crate) service: &'a str,
    pub(crate) account: &'a str,
    pub(crate) resource: &'a str,
}

impl<'a> Arn<'a> {
    /// `arn`'s six fields, if it has them.
    pub(crate) fn parse(arn: &'a str) -> Option<Self> {
        let parts: Vec<&str> = arn.splitn(6, ':').collect();
        let ["arn", partition, service, _region, account, resource] = parts.as_slice() else { return None };
        if partition.is_empty() || service.is_empty() || resource.is_empty() {
            return None;
        }
        Some(Arn { partition, service, account, resource })
    }

    /// The role a session ARN (`assumed-role/ROLE/SESSION` of STS) is a session of.
    fn session_role(&self) -> Option<&'a str> {
        if self.service != "sts" {
            return None;
        }
        let rest = self.resource.strip_prefix("assumed-role/")?;
        rest.split_once('/').map(|(role, _)| role)
    }

    /// The role's name (the last segment of its path) when this is a role ARN.
    fn role_name(&self) -> Option<&'a str> {
        let path = self.resource.strip_prefix("role/")?;
        path.rsplit('/').next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOB: &str = "arn:aws:iam::111122223333:user/bob";
    const CI_SESSION: &str = "arn:aws:sts::111122223333:assumed-role/ci/job-42";
    const OTHER_ACCOUNT_SESSION: &str = "arn:aws:sts::444455556666:assumed-role/ci/job-42";

    #[test]
    fn a_pattern_names_callers_as_iam_would() {
        for (pattern, caller, named) in [
            ("*", BOB, true),
            ("*", "not-an-arn", true),
            ("111122223333", BOB, true),
            ("111122223333", CI_SESSION, true),
            ("111122223333", OTHER_ACCOUNT_SESSION, false),
            ("111122223333", "not-an-arn", false),
            (BOB, BOB, true),
            (BOB, "arn:aws:iam::111122223333:user/bobby", false),
            ("arn:aws:iam::111122223333:user/*", BOB, true),
            ("arn:aws:iam::111122223333:user/*", CI_SESSION, false),
            // A role names its sessions, in its account only.
            ("arn:aws:iam::111122223333:role/ci", CI_SESSION, true),
            ("arn:aws:iam::111122223333:role/ci", OTHER_ACCOUNT_SESSION, false),
            ("arn:aws:iam::111122223333:role/ci", "arn:aws:sts::111122223333:assumed-role/cid/job-42", false),
            ("arn:aws:iam::111122223333:role/teams/a/ci", CI_SESSION, true),
            ("arn:aws:iam::111122223333:role/ci-*", "arn:aws:sts::111122223333:assumed-role/ci-nightly/x", true),
            ("arn:aws:iam::111122223333:role/ci-*", CI_SESSION, false),
            ("arn:aws:iam::*:role/ci", OTHER_ACCOUNT_SESSION, true),
            ("arn:aws-cn:iam::111122223333:role/ci", CI_SESSION, false),
            // A session pattern names sessions as they are.
            ("arn:aws:sts::111122223333:assumed-role/ci/*", CI_SESSION, true),
            ("arn:aws:sts::111122223333:assumed-role/ci/job-4?", CI_SESSION, true),
            ("arn:aws:sts::111122223333:assumed-role/ci/job-5*", CI_SESSION, false),
            // A user pattern never names a session, nor a role pattern a user.
            ("arn:aws:iam::111122223333:role/bob", BOB, false),
        ] {
            assert_eq!(matches(pattern, caller), named, "{pattern} ~ {caller}");
        }
    }

    #[test]
    fn rights_come_from_the_stack_the_pool_and_the_default() {
        let access =
            PoolAccess { claimants: vec!["arn:aws:iam::111122223333:role/ci".into()], admins: vec![BOB.into()] };
        let none = Rights::default();
        let claim = Rights { claim: true, administer: false };
        for (access, caller, stack_admin, default, expected) in [
            (Some(&access), CI_SESSION, false, DefaultAccess::Open, claim),
            (Some(&access), BOB, false, DefaultAccess::Admins, Rights::ALL),
            (Some(&access), OTHER_ACCOUNT_SESSION, false, DefaultAccess::Open, none),
            (Some(&access), OTHER_ACCOUNT_SESSION, true, DefaultAccess::Admins, Rights::ALL),
            (None, CI_SESSION, false, DefaultAccess::Open, claim),
            (None, CI_SESSION, false, DefaultAccess::Admins, none),
            (None, CI_SESSION, true, DefaultAccess::Admins, Rights::ALL),
        ] {
            assert_eq!(rights(access, caller, stack_admin, default), expected, "{caller} {default:?}");
        }
    }

    #[test]
    fn the_default_is_read_from_the_stack_parameter() {
        assert_eq!("open".parse(), Ok(DefaultAccess::Open));
        assert_eq!("admins".parse(), Ok(DefaultAccess::Admins));
        assert!("closed".parse::<DefaultAccess>().is_err());
    }
}
