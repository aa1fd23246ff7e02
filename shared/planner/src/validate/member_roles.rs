//! Which roles an AWS pool may name (`platform.aws.roleArn`): the stack's rule, set by its parameters
//! `MemberRoleNamePattern` and `MemberAccountIds`. The power role's policy allows exactly the same roles; this
//! check refuses a pool that names another before it is stored, with the reason.

use crate::glob::glob;
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

#[cfg(test)]
mod tests {
    use super::*;

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
