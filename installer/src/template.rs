//! A pool's install-config template, rendered for one cluster.
//!
//! The template is `install-config.yaml` as an admin writes it, with placeholders where a cluster differs:
//! `{clusterName}`, `{baseDomain}`, `{labels.<name>}` (the pool's labels) and `{parameters.<name>}` (the
//! parameters of the inventory entry the cluster's name comes from, such as an on-premises cluster's VIPs). A
//! placeholder is replaced by its value as text, so it may stand for a number (`replicas: {parameters.workers}`)
//! as well as a string. Since values are put into YAML as they are, a value may hold only characters that YAML
//! reads as part of a plain scalar ([`plain`]); any other is refused naming it, never quoted behind the admin's back.
//!
//! Anything else between braces that looks like a placeholder (`{word}` or `{word.word}`) is refused as an unknown
//! placeholder rather than left for YAML to read as a flow mapping: a misspelt `{clustername}` names itself.

use std::collections::BTreeMap;

/// What a cluster's placeholders stand for.
#[derive(Debug, Clone, Copy)]
pub struct Values<'a> {
    /// `{clusterName}`.
    pub cluster_name: &'a str,
    /// `{baseDomain}`, when the pool has one.
    pub base_domain: Option<&'a str>,
    /// `{labels.<name>}`.
    pub labels: &'a BTreeMap<String, String>,
    /// `{parameters.<name>}`.
    pub parameters: &'a BTreeMap<String, String>,
}

/// Why a template could not be rendered: the placeholder (`field`, as it is written without braces) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The placeholder, or the value's name (`parameters.apiVIP`).
    pub field: String,
    /// Why.
    pub why: String,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.why)
    }
}

/// Whether `value` may be put into YAML as it is: letters, digits and `. _ / + = : @ -`, not starting with
/// `-`, `:` or `@` (which YAML reads as structure there). Empty is a null.
pub fn plain(value: &str) -> bool {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "._/+=:@-".contains(c);
    value.chars().all(allowed) && !value.starts_with(['-', ':', '@'])
}

/// `template` with every placeholder replaced by its value, or the first placeholder that cannot be. A comment
/// line (`# …`) is left as it is: it may well explain the placeholders.
pub fn render(template: &str, values: &Values<'_>) -> Result<String, Refused> {
    let mut out = String::with_capacity(template.len());
    for line in template.split_inclusive('\n') {
        if line.trim_start().starts_with('#') {
            out.push_str(line);
        } else {
            render_line(line, values, &mut out)?;
        }
    }
    Ok(out)
}

fn render_line(line: &str, values: &Values<'_>, out: &mut String) -> Result<(), Refused> {
    let mut rest = line;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(name) = after.find('}').map(|close| &after[..close]).filter(|name| looks_like_placeholder(name))
        else {
            // YAML's own braces (`{}`, `{a: b}`): left as they are.
            out.push('{');
            rest = after;
            continue;
        };
        out.push_str(&value_of(name, values)?);
        rest = &after[name.len() + 1..];
    }
    out.push_str(rest);
    Ok(())
}

/// `word` or `word.rest`, without spaces, colons, commas or quotes: what nobody writes as a YAML flow mapping.
fn looks_like_placeholder(name: &str) -> bool {
    let (head, tail) = name.split_once('.').unwrap_or((name, ""));
    !head.is_empty()
        && head.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !tail.chars().any(|c| c.is_whitespace() || ":,'\"{}[]".contains(c))
}

fn value_of(name: &str, values: &Values<'_>) -> Result<String, Refused> {
    let refused = |why: String| Refused { field: name.to_owned(), why };
    let value = match name.split_once('.') {
        None if name == "clusterName" => Some(values.cluster_name),
        None if name == "baseDomain" => Some(values.base_domain.ok_or_else(|| {
            refused("the pool has no baseDomain: set the pool's baseDomain, or write the domain in the template".into())
        })?),
        Some(("labels", key)) => Some(
            values
                .labels
                .get(key)
                .map(String::as_str)
                .ok_or_else(|| refused(format!("the pool has no label {key:?}")))?,
        ),
        Some(("parameters", key)) => Some(values.parameters.get(key).map(String::as_str).ok_or_else(|| {
            refused(format!("the cluster's inventory entry has no parameter {key:?}: give every entry the parameter"))
        })?),
        _ => None,
    };
    let Some(value) = value else {
        return Err(refused(
            "is not a placeholder: the template may use {clusterName}, {baseDomain}, {labels.<name>} and \
             {parameters.<name>}"
                .to_owned(),
        ));
    };
    if !plain(value) {
        return Err(refused(format!(
            "the value {value:?} holds characters YAML reads as structure: only letters, digits and . _ / + = : @ - \
             (not first: - : @) may be put in the template"
        )));
    }
    Ok(value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values<'a>(labels: &'a BTreeMap<String, String>, parameters: &'a BTreeMap<String, String>) -> Values<'a> {
        Values { cluster_name: "ci-1", base_domain: Some("ci.example.com"), labels, parameters }
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn placeholders_become_their_values_and_yamls_braces_stay() {
        let labels = map(&[("team", "ci")]);
        let parameters = map(&[("apiVIP", "10.0.0.5"), ("workers", "2")]);
        let template = "# {parameters.<name>}: an entry's\nmetadata:\n  name: {clusterName}\nbaseDomain: {baseDomain}\nplatform:\n  none: {}\n\
                        compute:\n- name: worker\n  replicas: {parameters.workers}\nvip: \"{parameters.apiVIP}\"\n\
                        tags: {team: {labels.team}}\n";
        let out = render(template, &values(&labels, &parameters)).expect("rendered");
        assert_eq!(
            out,
            "# {parameters.<name>}: an entry's\nmetadata:\n  name: ci-1\nbaseDomain: ci.example.com\nplatform:\n  none: {}\ncompute:\n- name: worker\n  \
             replicas: 2\nvip: \"10.0.0.5\"\ntags: {team: ci}\n"
        );
    }

    #[test]
    fn an_unknown_or_missing_placeholder_is_refused_by_name() {
        let (labels, parameters) = (map(&[]), map(&[("apiVIP", "10.0.0.5")]));
        let v = values(&labels, &parameters);
        let field = |t: &str| render(t, &v).expect_err("refused").field;
        assert_eq!(field("name: {clustername}"), "clustername");
        assert_eq!(field("vip: {parameters.ingressVIP}"), "parameters.ingressVIP");
        assert_eq!(field("team: {labels.team}"), "labels.team");
        assert_eq!(field("x: {secrets.pull}"), "secrets.pull");
        let none = Values { base_domain: None, ..v };
        let why = render("baseDomain: {baseDomain}", &none).expect_err("refused");
        assert!(why.why.contains("no baseDomain"), "{why}");
    }

    #[test]
    fn a_value_yaml_would_read_as_structure_is_refused_naming_it() {
        let labels = map(&[]);
        for bad in ["a: b", "x\ny: z", "#c", "- 1", "[1]", "\"q\"", "*alias", "@x"] {
            let parameters = map(&[("p", bad)]);
            let why = render("k: {parameters.p}", &values(&labels, &parameters)).expect_err(bad);
            assert_eq!(why.field, "parameters.p", "{bad:?}");
        }
        for good in ["10.0.0.0/16", "m6i.xlarge", "user@example.com", "3", "", "a=b+c", "host:6443"] {
            let parameters = map(&[("p", good)]);
            assert!(render("k: {parameters.p}", &values(&labels, &parameters)).is_ok(), "{good:?}");
        }
    }
}
