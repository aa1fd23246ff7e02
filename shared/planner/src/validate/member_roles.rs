//! Which roles an AWS pool may name (`platform.aws.roleArn`): the stack's rule, set by its parameters
//! `MemberRoleNamePattern` and `MemberAccountIds`. The power role's policy allows exactly the same roles; this
//! check refuses a pool that names another before it is stored, with the reason.

use crate::model::{Platform, PoolSpec, RoleArn};

use super::FieldError;

/// The roles the stack allows pools to name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRoles {
    /// The role name pattern: IAM's wildcards, `*` for any run of characters and `?` for one.
    pub pattern: String,
    /// The accounts the roles may be in; none turns pools with a role off.
    pub accounts: Vec<String>,
}

impl Default for MemberRoles {
    /// The template's defaults: roles named `apiary-member-*`, in no account until the stack names some.
    fn default() -> Self {
        MemberRoles { pattern: "apiary-member-*".into(), accounts: vec![] }
    }
}

impl MemberRoles {
    /// Whether the stack allows `arn`, or why not.
    pub fn permits(&self, arn: &str) -> Result<(), String> {
        let role = RoleArn::parse(arn)?;
        if self.accounts.is_empty() {
            return Err("this stack allows no member accounts: its MemberAccountIds parameter is empty".into());
        }
        if !self.accounts.iter().any(|a| a == role.account) {
            return Err(format!(
                "account {} is not one of the stack's MemberAccountIds ({})",
                role.account,
                self.accounts.join(", ")
            ));
        }
        if !glob(self.pattern.as_bytes(), role.name.as_bytes()) {
            return Err(format!(
                "role name {:?} does not match the stack's MemberRoleNamePattern {:?}",
                role.name, self.pattern
            ));
        }
        Ok(())
    }
}

/// Checks the role `spec` names, if any, against the stack's `rule`.
pub fn validate_member_role(spec: &PoolSpec, rule: &MemberRoles) -> Result<(), FieldError> {
    match &spec.platform {
        Platform::Aws(aws) => match &aws.role_arn {
            Some(arn) => rule.permits(arn).map_err(|why| FieldError::new("platform.aws.roleArn", why)),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// IAM's wildcard match: `*` matches any run of characters (none included), `?` exactly one.
pub(crate) fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where the last `*` was, and the text position it has been tried against.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_matches_as_iam_does() {
        for (pattern, name, matches) in [
            ("apiary-member-*", "apiary-member-ci", true),
            ("apiary-member-*", "apiary-member-", true),
            ("apiary-member-*", "apiary-membe", false),
            ("apiary-member-*", "other-apiary-member-ci", false),
            ("apiary-*-ci", "apiary-team-a-ci", true),
            ("apiary-*-ci", "apiary-team-a-cd", false),
            ("apiary-?", "apiary-a", true),
            ("apiary-?", "apiary-ab", false),
            ("*", "anything", true),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
            ("exact", "exact", true),
            ("exact", "exactly", false),
        ] {
            assert_eq!(glob(pattern.as_bytes(), name.as_bytes()), matches, "{pattern} ~ {name}");
        }
    }

    #[test]
    fn a_role_is_allowed_only_in_the_named_accounts_and_by_the_pattern() {
        let rule = MemberRoles { pattern: "apiary-member-*".into(), accounts: vec!["210987654321".into()] };
        assert_eq!(rule.permits("arn:aws:iam::210987654321:role/apiary-member-ci"), Ok(()));
        assert_eq!(rule.permits("arn:aws:iam::210987654321:role/teams/a/apiary-member-ci"), Ok(()));
        let why = |arn: &str| rule.permits(arn).expect_err(arn);
        assert!(why("arn:aws:iam::111111111111:role/apiary-member-ci").contains("account 111111111111"));
        assert!(why("arn:aws:iam::210987654321:role/Admin").contains("MemberRoleNamePattern"));
        assert!(why("arn:aws:iam::210987654321:user/apiary-member-ci").contains("not an IAM role ARN"));
        let off = MemberRoles::default();
        assert!(off.permits("arn:aws:iam::210987654321:role/apiary-member-ci").expect_err("off").contains("no member"));
    }
}
