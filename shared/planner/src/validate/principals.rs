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

/// Checks a claim's `subjects` (given as `field`): every pattern well formed as in `access`, at most
/// [`MAX_PRINCIPALS`] of them.
pub fn validate_subjects(field: &str, subjects: &[String]) -> Result<(), FieldError> {
    if subjects.len() > MAX_PRINCIPALS {
        return Err(FieldError::new(field, format!("at most {MAX_PRINCIPALS} principals, got {}", subjects.len())));
    }
    for (i, pattern) in subjects.iter().enumerate() {
        check_pattern(pattern).map_err(|why| FieldError::new(format!("{field}[{i}]"), why))?;
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
}
