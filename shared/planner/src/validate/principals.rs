//! A pool's `access` lists: each pattern one [`crate::access`] can match as meant, at most
//! [`MAX_PRINCIPALS`] per list.

use super::limits::{MAX_PRINCIPALS, MAX_PRINCIPAL_LEN};
use super::FieldError;
use crate::access::{is_account, Arn};
use crate::model::PoolAccess;

/// Checks one pattern of `field`; why it cannot name anyone as meant, otherwise.
fn check_pattern(pattern: &str) -> Result<(), String> {
    if pattern.is_empty() || pattern.len() > MAX_PRINCIPAL_LEN {
        return Err(format!("must be 1 to {MAX_PRINCIPAL_LEN} characters, got {}", pattern.len()));
    }
    if pattern == "*" || is_account(pattern) {
        return Ok(());
    }
    if pattern.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("{pattern:?} contains whitespace"));
    }
    let Some(arn) = Arn::parse(pattern) else {
        return Err(format!(
            "{pattern:?} is not a principal: use *, a 12-digit account id, or an IAM or STS ARN \
             (arn:aws:iam::ACCOUNT:role/NAME, arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION, …)"
        ));
    };
    if !matches!(arn.service, "iam" | "sts") {
        return Err(format!("{pattern:?} is not an IAM or STS ARN (service {:?})", arn.service));
    }
    if let Some(path) = arn.resource.strip_prefix("role/") {
        let (has_path, name) = match path.rsplit_once('/') {
            Some((_, name)) => (true, name),
            None => (false, path),
        };
        if has_path && name.contains(['*', '?']) {
            return Err(format!(
                "{pattern:?}: a role's sessions do not carry its path, so a role pattern with a path must name one \
                 role (no wildcard in the name); drop the path to match roles by name"
            ));
        }
    }
    Ok(())
}

/// Checks `access`: every pattern well formed, at most [`MAX_PRINCIPALS`] in each list.
pub(super) fn validate_access(access: &PoolAccess, errors: &mut Vec<FieldError>) {
    for (list, patterns) in [("access.claimants", &access.claimants), ("access.admins", &access.admins)] {
        if patterns.len() > MAX_PRINCIPALS {
            errors.push(FieldError::new(list, format!("at most {MAX_PRINCIPALS} principals, got {}", patterns.len())));
            continue;
        }
        for (i, pattern) in patterns.iter().enumerate() {
            if let Err(why) = check_pattern(pattern) {
                errors.push(FieldError::new(format!("{list}[{i}]"), why));
            }
        }
    }
}

/// Checks a flat list of principal patterns (given as `field`, the stack's `AdminPrincipals`): every pattern as in
/// `access`, at most [`MAX_PRINCIPALS`] of them.
pub fn validate_principals(field: &str, patterns: &[String]) -> Result<(), FieldError> {
    if patterns.len() > MAX_PRINCIPALS {
        return Err(FieldError::new(field, format!("at most {MAX_PRINCIPALS} principals, got {}", patterns.len())));
    }
    for (i, pattern) in patterns.iter().enumerate() {
        check_pattern(pattern).map_err(|why| FieldError::new(format!("{field}[{i}]"), why))?;
    }
    Ok(())
}

/// Checks a claim's `subjects` (given as `field`): every pattern well formed as in `access`, at most
/// [`MAX_PRINCIPALS`] of them, and none wider than an account. A subject may release, power and extend the claim as
/// its owner does, so a claim is shared with principals of named accounts, never with every caller of the stack
/// (`*`) or with a name in every account (a wildcard account or partition); a pool's admins act on any claim
/// already.
pub fn validate_subjects(field: &str, subjects: &[String]) -> Result<(), FieldError> {
    validate_principals(field, subjects)?;
    for (i, pattern) in subjects.iter().enumerate() {
        let wide = match Arn::parse(pattern) {
            Some(arn) => !is_account(arn.account) || arn.partition.contains(['*', '?']),
            None => !is_account(pattern),
        };
        if wide {
            return Err(FieldError::new(
                format!("{field}[{i}]"),
                format!(
                    "{pattern:?} is wider than an account: a claim's subjects are principals of named accounts (a \
                     12-digit account id, or an ARN with its account's id), never everyone"
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_checked_with_the_field_that_holds_them() {
        let access = PoolAccess {
            claimants: vec![
                "*".into(),
                "111122223333".into(),
                "arn:aws:iam::111122223333:role/ci-*".into(),
                "arn:aws:iam::111122223333:role/teams/ci".into(),
                "arn:aws:sts::111122223333:assumed-role/ci/*".into(),
                "bob".into(),
                "arn:aws:s3:::bucket".into(),
                "arn:aws:iam::111122223333:role/teams/ci-*".into(),
                "arn:aws:iam::111122223333:user/ bob".into(),
                String::new(),
                format!("arn:aws:iam::111122223333:user/{}", "b".repeat(MAX_PRINCIPAL_LEN)),
            ],
            admins: vec!["arn:aws:iam::111122223333:user/*".into(); MAX_PRINCIPALS + 1],
        };
        let mut errors = vec![];
        validate_access(&access, &mut errors);
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "access.claimants[5]",
                "access.claimants[6]",
                "access.claimants[7]",
                "access.claimants[8]",
                "access.claimants[9]",
                "access.claimants[10]",
                "access.admins"
            ]
        );
        assert!(errors[0].message.contains("12-digit account id"), "{}", errors[0]);
        assert!(errors[2].message.contains("path"), "{}", errors[2]);
    }

    /// A claim is shared with principals of named accounts, never with everyone: `*` and patterns whose account or
    /// partition is a wildcard are refused there, and stay allowed in a pool's access lists and the stack's admins.
    #[test]
    fn subjects_name_principals_of_named_accounts() {
        let wide = [
            "*",
            "arn:aws:iam::*:role/ci",
            "arn:aws:sts::1111222233??:assumed-role/ci/x",
            "arn:*:iam::111122223333:role/ci",
        ];
        for pattern in wide {
            let why = validate_subjects("subjects", &[pattern.to_owned()]).expect_err(pattern);
            assert_eq!(why.field, "subjects[0]");
            assert!(why.message.contains("wider than an account"), "{why}");
            assert!(validate_principals("AdminPrincipals", &[pattern.to_owned()]).is_ok(), "{pattern}");
        }
        let named =
            ["111122223333", "arn:aws:iam::111122223333:role/ci-*", "arn:aws:sts::111122223333:assumed-role/ci/*"];
        assert!(validate_subjects("subjects", &named.map(String::from)).is_ok());
    }
}
