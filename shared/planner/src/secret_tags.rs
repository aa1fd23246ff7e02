//! Which pools may use a secret: the tags a Secrets Manager secret must carry before Apiary reads it for a pool.
//!
//! A pool names secrets by ARN (a cloud's credentials, a webhook installer's signing key, a readiness check's
//! kubeconfig), and Apiary's power function reads them with its own role. That role may read only secrets tagged
//! `apiary=true`, but that alone would let a pool admin of one team name another team's credentials. So a secret
//! also lists, in its tag `apiary:pools`, the pools that may use it (names separated by spaces), and Apiary reads
//! a secret for a pool only when that tag names the pool. Only stack admins create pools, so a pool's name is not
//! the pool admin's to choose; whoever may tag the secret (`secretsmanager:TagResource`) decides who uses it.

use std::collections::BTreeMap;

/// The tag every secret Apiary reads must carry, with the value `true` (the functions' IAM condition).
pub const APIARY_TAG: &str = "apiary";

/// The tag naming the pools that may use a secret, separated by spaces: `ci nightly`.
pub const POOLS_TAG: &str = "apiary:pools";

/// Whether the secret `arn`, tagged `tags`, may be read for `pool`; `Err` says why not, naming the tag to set.
pub fn secret_serves(arn: &str, tags: &BTreeMap<String, String>, pool: &str) -> Result<(), String> {
    if tags.get(APIARY_TAG).map(String::as_str) != Some("true") {
        return Err(format!("the secret {arn} is not tagged {APIARY_TAG}=true, so Apiary may not read it"));
    }
    match tags.get(POOLS_TAG) {
        None => Err(format!(
            "the secret {arn} has no tag {POOLS_TAG} naming the pools that may use it: tag it {POOLS_TAG}={pool} \
             for pool {pool} to use it"
        )),
        Some(pools) if pools.split_whitespace().any(|p| p == pool) => Ok(()),
        Some(pools) => Err(format!(
            "the secret {arn} is not for pool {pool}: its tag {POOLS_TAG} names {:?}, not {pool}",
            pools.trim()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARN: &str = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:team-a/gcp-AbCdEf";

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn a_secret_serves_only_the_pools_its_tag_names() {
        type Tags<'a> = &'a [(&'a str, &'a str)];
        let cases: &[(Tags, &str, bool)] = &[
            (&[("apiary", "true"), ("apiary:pools", "ci")], "ci", true),
            (&[("apiary", "true"), ("apiary:pools", "ci nightly")], "nightly", true),
            (&[("apiary", "true"), ("apiary:pools", "  ci   nightly ")], "ci", true),
            // A name is matched whole: neither a prefix nor a part of another name.
            (&[("apiary", "true"), ("apiary:pools", "ci-team-a")], "ci", false),
            (&[("apiary", "true"), ("apiary:pools", "ci")], "ci-team-a", false),
            (&[("apiary", "true"), ("apiary:pools", "")], "ci", false),
            (&[("apiary", "true")], "ci", false),
            // The pools' tag alone is not enough: the stack's IAM condition needs apiary=true too.
            (&[("apiary:pools", "ci")], "ci", false),
            (&[("apiary", "True"), ("apiary:pools", "ci")], "ci", false),
            // Tags are case-sensitive, as Secrets Manager's are.
            (&[("apiary", "true"), ("Apiary:Pools", "ci")], "ci", false),
            (&[("apiary", "true"), ("apiary:pools", "CI")], "ci", false),
        ];
        for (pairs, pool, serves) in cases {
            assert_eq!(secret_serves(ARN, &tags(pairs), pool).is_ok(), *serves, "{pairs:?} for {pool}");
        }
    }

    #[test]
    fn a_refusal_names_the_secret_the_pool_and_the_tag_to_set() {
        let why = secret_serves(ARN, &tags(&[("apiary", "true"), ("apiary:pools", "team-b")]), "team-a")
            .expect_err("refused");
        assert!(why.contains(ARN) && why.contains("team-a") && why.contains("apiary:pools"), "{why}");
        let why = secret_serves(ARN, &tags(&[("apiary", "true")]), "team-a").expect_err("refused");
        assert!(why.contains("apiary:pools=team-a"), "{why}");
        let why = secret_serves(ARN, &tags(&[]), "team-a").expect_err("refused");
        assert!(why.contains("apiary=true"), "{why}");
    }
}
