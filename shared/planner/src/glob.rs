//! IAM's wildcard match, for role names and principal patterns.

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
}
