//! Validation of pool specs and names: every problem, each with the path of the field it concerns.
//!
//! The claim API answers 400 with this list; a stored spec has passed it, so the planner can rely on it.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::duration::GoDuration;
use crate::model::{ClaimLifetime, PoolSpec};
use limits::*;

mod member_roles;
mod platforms;
mod principals;
mod spec;
mod strict;
mod urls;

pub use spec::validate_spec;

pub use member_roles::{validate_member_role, MemberRoles};
pub use platforms::{check_installed, gcp_template_name};
pub use principals::{validate_principals, validate_subjects};
pub use strict::strictly;
pub use urls::{validate_urls, UrlPolicy};

/// One problem with one field, e.g. `inventory.clusterDeployments[2].name: duplicate name "foo"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldError {
    /// Path of the field, in the JSON's own names.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl FieldError {
    /// A problem with `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: field.into(), message: message.into() }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Longest inventory name: a DNS label (63) less the `-xxxxx` suffix of the cluster id.
pub const MAX_CLUSTER_NAME_LEN: usize = 57;

/// The bounds of every count and string a pool spec or claim may carry. Together they keep a pool item far below
/// DynamoDB's 400 KB (a test builds the largest spec they allow and measures it), keep every plan's work bounded,
/// and are declared in the OpenAPI document (a test checks each is there and enforced).
pub mod limits;

/// Checks that `new` may replace `old`, the spec of an existing pool: beside [`validate_spec`], the fields that
/// say where its machines live do not change (its clusters are found there), nor whether an installer makes them
/// (they are removed the way they were made).
pub fn validate_update(old: &PoolSpec, new: &PoolSpec) -> Result<(), Vec<FieldError>> {
    let mut errors = Vec::new();
    platforms::unmoved(
        &mut |field: &str, message: String| errors.push(FieldError::new(field, message)),
        &old.platform,
        &new.platform,
    );
    // A cluster is removed the way its pool's spec says now: by the pool's installer, or by its platform. A pool
    // that gained or lost an installer would ask the wrong one, which knows nothing of the cluster and answers it
    // gone while its machines run on.
    let installer = |spec: &PoolSpec| spec.provisioner.as_ref().and_then(|p| p.webhook.as_ref()).is_some();
    if installer(old) != installer(new) {
        let (was, is) = match installer(old) {
            true => ("installed by its webhook installer", "Apiary"),
            false => ("made by Apiary on its platform", "an installer"),
        };
        errors.push(FieldError::new(
            "provisioner",
            format!(
                "a pool's clusters were {was} and are removed the same way: make a new pool for clusters made by {is}"
            ),
        ));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Checks a pool or claim name: a DNS label of at most 63 characters, as it appears in URLs and keys.
pub fn validate_name(field: &str, name: &str) -> Result<(), FieldError> {
    check_dns_label(name, 63).map_err(|why| FieldError::new(field, why))
}

/// A Secrets Manager secret's ARN: `arn:PARTITION:secretsmanager:REGION:ACCOUNT:secret:NAME`, each part of the
/// characters it may hold (a partition's and a region's lowercase letters, digits and `-`; a name's letters, digits
/// and `/_+=.@-`), so that nothing else reaches a role's policy or a Secrets Manager call.
pub(crate) fn secret_arn(e: &mut impl FnMut(&str, String), field: &str, arn: &str) {
    let parts: Vec<&str> = arn.splitn(7, ':').collect();
    let lowercase =
        |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let named = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"/_+=.@-".contains(&b));
    let ok = arn.len() <= MAX_SECRET_ARN_LEN
        && matches!(parts.as_slice(), ["arn", partition, "secretsmanager", region, account, "secret", name]
            if lowercase(partition) && lowercase(region) && account.len() == 12
                && account.bytes().all(|b| b.is_ascii_digit()) && named(name));
    if !ok {
        e(
            field,
            format!(
                "{:?} is not a Secrets Manager secret ARN (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME, at \
                 most {MAX_SECRET_ARN_LEN} characters)",
                shorten(arn)
            ),
        );
    }
}

/// An image reference as a release names one: `registry/repository:tag` or `registry/repository@sha256:<digest>`,
/// at most 512 characters, no whitespace.
pub fn check_image_ref(image: &str) -> Result<(), String> {
    let (name, reference) = match image.split_once('@') {
        Some((name, digest)) => {
            let hex = digest.strip_prefix("sha256:").unwrap_or_default();
            let ok = hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase());
            (name, ok)
        }
        None => match image.rsplit_once(':') {
            Some((name, tag)) if !tag.contains('/') => (name, !tag.is_empty() && tag.len() <= 128),
            _ => (image, false),
        },
    };
    let name_ok = name.contains('/') && !name.starts_with('/') && !name.ends_with('/');
    if image.len() > 512 || image.contains(char::is_whitespace) || !name_ok || !reference {
        return Err(format!(
            "{:?} is not an image reference: registry/repository:tag or registry/repository@sha256:<digest>",
            shorten(image)
        ));
    }
    Ok(())
}

/// A template's reference as a pool names it: a name of 1 to 63 lowercase letters, digits, `-` and `.`, starting
/// and ending with a letter or digit (the installer keeps it as `templates/<name>.yaml`), then `@sha256:<digest>` if
/// the pool pins its content.
pub fn check_template_ref(reference: &str) -> Result<(), String> {
    let (name, digest) = match reference.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (reference, None),
    };
    let name_ok = (1..=63).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let digest_ok = digest.is_none_or(|d| {
        let hex = d.strip_prefix("sha256:").unwrap_or_default();
        hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    });
    if !name_ok || !digest_ok {
        return Err(format!(
            "{:?} is not a template's reference: a name (lowercase letters, digits, '-' and '.', at most 63), then \
             @sha256:<64 hex digits> to pin its content if wished",
            shorten(reference)
        ));
    }
    Ok(())
}

pub(crate) fn count(e: &mut impl FnMut(&str, String), field: &str, n: i64) {
    if n < 0 {
        e(field, format!("must not be negative, got {n}"));
    } else if n > MAX_CLUSTERS {
        e(field, format!("at most {MAX_CLUSTERS}, got {n}"));
    }
}

/// `text`, cut to a length fit for an error message.
pub(crate) fn shorten(text: &str) -> String {
    if text.len() <= 64 {
        return text.to_owned();
    }
    let cut: String = text.chars().take(60).collect();
    format!("{cut}…")
}

/// A duration text's length, before it is parsed.
fn duration_len(e: &mut impl FnMut(&str, String), field: &str, d: &GoDuration) -> bool {
    let n = d.text().len();
    if n > MAX_DURATION_LEN {
        e(field, format!("at most {MAX_DURATION_LEN} characters, got {n}"));
        return false;
    }
    true
}

pub(crate) fn duration(e: &mut impl FnMut(&str, String), field: &str, d: Option<&GoDuration>) {
    if let Some(d) = d {
        if !duration_len(e, field, d) {
            return;
        }
        if let Err(why) = crate::duration::parse(d.text()) {
            e(field, why.to_string());
        }
    }
}

/// An IANA time zone name.
fn time_zone(e: &mut impl FnMut(&str, String), field: &str, zone: &str) {
    if zone.len() > MAX_TIME_ZONE_LEN || chrono_tz::Tz::from_str(zone).is_err() {
        let zone = shorten(zone);
        e(field, format!("{zone:?} is not an IANA time zone (e.g. Europe/Berlin, UTC)"));
    }
}

pub(crate) fn positive_duration(e: &mut impl FnMut(&str, String), field: &str, d: Option<&GoDuration>) {
    if let Some(d) = d {
        if !duration_len(e, field, d) {
            return;
        }
        match crate::duration::parse(d.text()) {
            Err(why) => e(field, why.to_string()),
            Ok(v) if v <= chrono::TimeDelta::zero() => {
                e(field, format!("must be longer than zero, got {:?}", d.text()))
            }
            Ok(_) => {}
        }
    }
}

/// Checks a claim's own lifetime: a positive duration of at most [`limits::MAX_DURATION_LEN`] characters.
pub fn validate_lifetime(field: &str, text: &str) -> Result<chrono::TimeDelta, FieldError> {
    let mut found = None;
    let mut e = |f: &str, m: String| found = Some(FieldError::new(f, m));
    positive_duration(&mut e, field, Some(&GoDuration::new(text)));
    match found {
        Some(err) => Err(err),
        None => crate::duration::parse(text).map_err(|why| FieldError::new(field, why.to_string())),
    }
}

/// Checks a held claim's new lifetime under its pool's `claimLifetime` ([`validate_lifetime`]), and that it is at
/// most the pool's `maximum`: a claim made with a longer one is capped, a change to one is refused by name.
pub fn validate_claim_lifetime(
    field: &str,
    text: &str,
    pool: Option<&ClaimLifetime>,
) -> Result<chrono::TimeDelta, FieldError> {
    let asked = validate_lifetime(field, text)?;
    match pool.and_then(|l| l.maximum.as_ref()).filter(|m| m.get().is_some_and(|max| asked > max)) {
        Some(max) => Err(FieldError::new(
            field,
            format!("{text} is longer than the pool's claimLifetime.maximum, {}", max.text()),
        )),
        None => Ok(asked),
    }
}

pub(crate) fn check_dns_label(name: &str, max: usize) -> Result<(), String> {
    if name.is_empty() {
        return Err("must not be empty".into());
    }
    if name.len() > max {
        return Err(format!("{:?} is longer than {max} characters", shorten(name)));
    }
    let ok_chars = name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !ok_chars || name.starts_with('-') || name.ends_with('-') {
        return Err(format!(
            "{name:?} must be lowercase letters, digits and '-', starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ClaimLifetime, FakePlatform, Inventory, InventoryEntry, Platform, Schedule};

    fn spec() -> PoolSpec {
        PoolSpec::new(3, Platform::Fake(FakePlatform::default()))
    }

    fn fields(spec: &PoolSpec) -> Vec<String> {
        validate_spec(spec).err().unwrap_or_default().into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn a_release_is_an_image_by_tag_or_digest() {
        let digest = format!("quay.io/openshift-release-dev/ocp-release@sha256:{}", "0a".repeat(32));
        for good in
            ["quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64", "registry.local:5000/ocp/release:4.18", &digest]
        {
            assert_eq!(check_image_ref(good), Ok(()), "{good}");
        }
        let upper = digest.replace("0a", "0A");
        for bad in [
            "4.18",
            "quay.io/ocp/release",
            "registry.local:5000/ocp/release",
            "quay.io/a/b@sha256:abc",
            "quay.io/a/b:",
            "quay.io/a b:1",
            "/a:1",
            &upper,
        ] {
            assert!(check_image_ref(bad).is_err(), "{bad}");
        }
        use crate::model::{ProvisionerSpec, WebhookProvisioner};
        let mut s = spec();
        s.release = Some("quay.io/openshift-release-dev/ocp-release:4.18.1-x86_64".into());
        let refused = validate_spec(&s).expect_err("a release with no installer to install it");
        assert_eq!(refused.len(), 1);
        assert!(refused[0].field == "release" && refused[0].message.contains("provisioner.webhook"), "{refused:?}");
        let secret = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:apiary/installer-AbCdEf";
        let webhook = Some(WebhookProvisioner { url: "https://installer.example.com".into(), secret: secret.into() });
        s.provisioner = Some(ProvisionerSpec { webhook });
        assert_eq!(validate_spec(&s), Ok(()));
        s.release = Some("4.18".into());
        assert_eq!(fields(&s), ["release"]);
    }

    #[test]
    fn a_secret_arn_is_one_in_every_part_not_only_in_its_colons() {
        let good = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:apiary/gcp-ci_1+=.@-AbCdEf";
        let refused = |arn: &str| {
            let mut errors = Vec::new();
            secret_arn(&mut |f: &str, m: String| errors.push((f.to_owned(), m)), "credentialsSecret", arn);
            !errors.is_empty()
        };
        assert!(!refused(good));
        assert!(!refused("arn:aws-us-gov:secretsmanager:us-gov-west-1:123456789012:secret:ci-AbCdEf"));
        // What the API fuzzing sent: the right colons around parts no ARN has.
        let fuzzed = "arn:\u{1f3fb}?d\n\u{c2}0:secretsmanager:\u{10dc28}\u{f5}h:180786615065:secret:\u{df}";
        for bad in [
            fuzzed,
            "arn:AWS:secretsmanager:eu-west-1:123456789012:secret:ci",
            "arn:aws:secretsmanager:eu west 1:123456789012:secret:ci",
            "arn:aws:secretsmanager:eu-west-1:123456789012:secret:ci key",
            "arn:aws:secretsmanager:eu-west-1:123456789012:secret:",
        ] {
            assert!(refused(bad), "{bad:?}");
        }
    }

    #[test]
    fn an_install_config_template_is_named_and_pinned_if_wished_on_a_pool_with_an_installer() {
        let digest = format!("aws-4-18@sha256:{}", "0a".repeat(32));
        for good in ["aws-4-18", "ocp.aws.v2", "a", &digest] {
            assert_eq!(check_template_ref(good), Ok(()), "{good}");
        }
        let long = "a".repeat(64);
        for bad in [
            "",
            "AWS",
            "-a",
            "a-",
            "a/b",
            "../x",
            "a b",
            &long,
            "a@sha256:abc",
            "a@md5:0a",
            &digest.replace("0a", "0A"),
        ] {
            assert!(check_template_ref(bad).is_err(), "{bad}");
        }
        use crate::model::{ProvisionerSpec, WebhookProvisioner};
        let mut s = spec();
        s.install_config_template = Some("aws-4-18".into());
        let refused = validate_spec(&s).expect_err("a template with no installer to render it");
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].field, "installConfigTemplate");
        assert!(refused[0].message.contains("provisioner.webhook"), "{refused:?}");
        let secret = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:apiary/installer-AbCdEf";
        let webhook = Some(WebhookProvisioner { url: "https://installer.example.com".into(), secret: secret.into() });
        s.provisioner = Some(ProvisionerSpec { webhook });
        assert_eq!(validate_spec(&s), Ok(()));
        s.install_config_template = Some("templates/aws".into());
        assert_eq!(fields(&s), ["installConfigTemplate"]);
    }

    #[test]
    fn a_plain_spec_is_valid() {
        assert_eq!(validate_spec(&spec()), Ok(()));
    }

    #[test]
    fn running_count_above_size_is_allowed_and_clamped_later() {
        let mut s = spec();
        s.running_count = 10;
        assert_eq!(validate_spec(&s), Ok(()));
    }

    #[test]
    fn every_problem_is_reported_with_its_field() {
        let mut s = spec();
        s.size = -1;
        s.running_count = -2;
        s.max_size = Some(-3);
        s.max_concurrent = Some(0);
        s.hibernate_after = Some(GoDuration::new("soon"));
        s.claim_lifetime =
            Some(ClaimLifetime { default: Some(GoDuration::new("1x")), maximum: Some(GoDuration::new("0s")) });
        s.powerstate_transition_to_running_timeout = Some(GoDuration::new("5"));
        s.inventory = Some(Inventory {
            cluster_deployments: vec![
                InventoryEntry { name: Some("foo".into()), parameters: Default::default() },
                InventoryEntry { name: None, parameters: Default::default() },
                InventoryEntry { name: Some(String::new()), parameters: Default::default() },
                InventoryEntry { name: Some("foo".into()), parameters: Default::default() },
                InventoryEntry { name: Some("Bad_Name".into()), parameters: Default::default() },
            ],
        });
        assert_eq!(
            fields(&s),
            [
                "size",
                "runningCount",
                "maxSize",
                "maxConcurrent",
                "hibernateAfter",
                "claimLifetime.default",
                "claimLifetime.maximum",
                "powerstateTransitionToRunningTimeout",
                "inventory.clusterDeployments[1].name",
                "inventory.clusterDeployments[2].name",
                "inventory.clusterDeployments[3].name",
                "inventory.clusterDeployments[4].name",
            ]
        );
    }

    #[test]
    fn a_duplicate_inventory_name_is_named_in_the_message() {
        let mut s = spec();
        s.inventory = Some(Inventory::of(["foo", "bar", "foo"]));
        let errors = validate_spec(&s).expect_err("duplicate");
        assert_eq!(errors, vec![FieldError::new("inventory.clusterDeployments[2].name", "duplicate name \"foo\"")]);
    }

    #[test]
    fn a_webhook_provisioner_needs_an_https_url_and_a_secret_arn() {
        use crate::model::{ProvisionerSpec, WebhookProvisioner};
        let with = |url: &str, secret: &str| {
            let mut s = spec();
            let webhook = Some(WebhookProvisioner { url: url.into(), secret: secret.into() });
            s.provisioner = Some(ProvisionerSpec { webhook });
            s
        };
        let arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:apiary/installer-AbCdEf";
        for good in ["https://installer.example.com/apiary", "https://10.0.0.7:8443", "http://127.0.0.1:9000/x"] {
            assert_eq!(validate_spec(&with(good, arn)), Ok(()), "{good}");
        }
        for bad in [
            "http://installer.example.com",
            "ftp://x",
            "https://",
            "https://a b",
            "https://x.example.com/?token=1",
            "https://x.example.com/#f",
            "http://localhost.evil.com",
        ] {
            assert_eq!(fields(&with(bad, arn)), ["provisioner.webhook.url"], "{bad}");
        }
        assert_eq!(fields(&with("https://x.example.com", "whsec_abc")), ["provisioner.webhook.secret"]);
        let mut none = spec();
        none.provisioner = Some(ProvisionerSpec { webhook: None });
        assert_eq!(fields(&none), ["provisioner.webhook"]);
    }

    #[test]
    fn inventory_parameters_are_bounded_as_labels_are_and_in_all() {
        use crate::model::{Inventory, InventoryEntry};
        let entry = |name: &str, params: Vec<(String, String)>| InventoryEntry {
            name: Some(name.into()),
            parameters: params.into_iter().collect(),
        };
        let with = |entries: Vec<InventoryEntry>| {
            let mut s = spec();
            s.inventory = Some(Inventory { cluster_deployments: entries });
            s
        };
        let vip = vec![("apiVIP".to_owned(), "10.0.0.10".to_owned())];
        assert_eq!(validate_spec(&with(vec![entry("foo", vip)])), Ok(()));
        let many = (0..=MAX_ENTRY_PARAMETERS).map(|i| (format!("p{i}"), "v".to_owned())).collect();
        let long = vec![("apiVIP".to_owned(), "x".repeat(MAX_LABEL_VALUE_LEN + 1)), (String::new(), "v".to_owned())];
        assert_eq!(
            fields(&with(vec![entry("foo", many), entry("bar", long)])),
            [
                "inventory.clusterDeployments[0].parameters",
                "inventory.clusterDeployments[1].parameters",
                "inventory.clusterDeployments[1].parameters.apiVIP"
            ]
        );
        // Each entry within its bounds, all of them together not.
        let big = |i: usize| entry(&format!("n{i}"), vec![(format!("{i:0>128}"), "v".repeat(MAX_LABEL_VALUE_LEN))]);
        let n = MAX_INVENTORY_PARAMETER_BYTES / (128 + MAX_LABEL_VALUE_LEN) + 1;
        assert_eq!(fields(&with((0..n).map(big).collect())), ["inventory.clusterDeployments"]);
    }

    #[test]
    fn notify_webhooks_are_few_https_and_signed_with_a_secret() {
        use crate::model::notice::{NoticeKind, NotifyHook};
        let arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:apiary/hook-AbCdEf";
        let hook = |url: &str, secret: &str, events: &[NoticeKind]| NotifyHook {
            url: url.into(),
            secret: secret.into(),
            events: events.to_vec(),
        };
        let with = |hooks: Vec<NotifyHook>| PoolSpec { notify: hooks, ..spec() };
        let good = hook("https://hooks.example.com/apiary", arn, &[NoticeKind::ClaimAssigned]);
        assert_eq!(validate_spec(&with(vec![good.clone(); 4])), Ok(()));
        assert_eq!(fields(&with(vec![good.clone(); 5])), ["notify"]);
        let bad = vec![
            good.clone(),
            hook("http://hooks.example.com", "whsec_x", &[NoticeKind::ClusterBroken, NoticeKind::ClusterBroken]),
        ];
        assert_eq!(fields(&with(bad)), ["notify[1].url", "notify[1].secret", "notify[1].events"]);
        let policy = UrlPolicy::new(false, "", vec![]).expect("a policy");
        let inward = with(vec![hook("https://169.254.169.254/latest", arn, &[])]);
        let errors = validate_urls(&inward, &policy);
        assert_eq!(errors.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(), ["notify[0].url"]);
    }

    #[test]
    fn a_readiness_probe_names_its_bad_fields() {
        use crate::model::{HttpsProbe, ReadinessSpec};
        let with = |url: &str, ca: Option<&str>, status: Option<u16>, pause: Option<&str>| {
            let mut s = spec();
            let https = HttpsProbe { url: url.into(), ca_bundle: ca.map(Into::into), expected_status: status };
            s.readiness =
                Some(ReadinessSpec { https: Some(https), kubernetes: None, settle_pause: pause.map(GoDuration::new) });
            s
        };
        for good in [
            "https://api.{clusterName}.{baseDomain}:6443/readyz",
            "{outputs.apiUrl}/readyz",
            "https://{infraId}.example.com/healthz",
            "http://127.0.0.1:8443/{infraId}/readyz",
        ] {
            assert_eq!(validate_spec(&with(good, None, Some(200), Some("30s"))), Ok(()), "{good}");
        }
        for bad in ["https://api.{name}.example.com", "https://api.{clusterName", "http://api.{clusterName}.com"] {
            assert_eq!(fields(&with(bad, None, None, None)), ["readiness.https.url"], "{bad}");
        }
        assert_eq!(
            fields(&with("https://a.example.com", Some("not pem"), Some(42), Some("-1s"))),
            ["readiness.https.caBundle", "readiness.https.expectedStatus", "readiness.settlePause"]
        );
    }

    #[test]
    fn a_kubernetes_check_names_its_bad_fields() {
        use crate::model::{HttpsProbe, KubernetesCheck, ReadinessSpec};
        let with = |credentials: &str, server: Option<&str>, ca: Option<&str>| {
            let mut s = spec();
            let kubernetes = KubernetesCheck {
                credentials: credentials.into(),
                server: server.map(Into::into),
                ca_bundle: ca.map(Into::into),
                approve_node_certificates: None,
            };
            s.readiness = Some(ReadinessSpec { https: None, kubernetes: Some(kubernetes), settle_pause: None });
            s
        };
        let arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ci/kubeconfig";
        for (credentials, server) in [
            (arn, None),
            ("{outputs.kubeconfigSecretArn}", None),
            ("arn:aws:secretsmanager:us-east-1:123456789012:secret:clusters/{infraId}/token", Some("{outputs.apiUrl}")),
            (arn, Some("https://api.{clusterName}.{baseDomain}:6443")),
        ] {
            assert_eq!(validate_spec(&with(credentials, server, None)), Ok(()), "{credentials} {server:?}");
        }
        assert_eq!(fields(&with("kubeconfig", None, None)), ["readiness.kubernetes.credentials"]);
        assert_eq!(fields(&with("{outputs.}", None, None)), ["readiness.kubernetes.credentials"]);
        assert_eq!(
            fields(&with(arn, Some("ftp://api.{clusterName}"), Some("not pem"))),
            ["readiness.kubernetes.server", "readiness.kubernetes.caBundle"]
        );
        let mut both = with(arn, None, None);
        let https = HttpsProbe { url: "https://a.example.com".into(), ca_bundle: None, expected_status: None };
        if let Some(r) = both.readiness.as_mut() {
            r.https = Some(https);
        }
        assert_eq!(fields(&both), ["readiness"]);
        let mut neither = both.clone();
        neither.readiness = Some(ReadinessSpec { https: None, kubernetes: None, settle_pause: None });
        assert_eq!(fields(&neither), ["readiness"]);
    }

    #[test]
    fn an_installers_answer_is_bounded() {
        let outputs = |n: usize, len: usize| (0..n).map(|i| (format!("k{i}"), "v".repeat(len))).collect();
        assert_eq!(check_installed("ci-7x2kq", &outputs(3, 100)), Ok(()));
        assert!(check_installed("Not_A_Label", &outputs(0, 0)).expect_err("refused").contains("infraId"));
        assert!(check_installed("", &outputs(0, 0)).is_err());
        assert!(check_installed("ci", &outputs(limits::MAX_OUTPUTS + 1, 1)).expect_err("refused").contains("outputs"));
        assert!(check_installed("ci", &outputs(1, limits::MAX_OUTPUT_VALUE_LEN + 1))
            .expect_err("refused")
            .contains("k0"));
    }

    #[test]
    fn schedules_need_a_cron_a_time_zone_a_duration_and_an_override() {
        let mut s = spec();
        s.schedules = vec![Schedule {
            name: None,
            cron: "every monday".into(),
            time_zone: "Mars/Olympus".into(),
            duration: GoDuration::new("8"),
            size: None,
            running_count: None,
        }];
        assert_eq!(
            fields(&s),
            ["schedules[0].cron", "schedules[0].timeZone", "schedules[0].duration", "schedules[0].size"]
        );
    }

    #[test]
    fn names_must_be_dns_labels() {
        assert!(validate_name("pool", "ci-pool-1").is_ok());
        for bad in ["", "-a", "a-", "A", "a_b", &"x".repeat(64)] {
            assert_eq!(validate_name("pool", bad).map_err(|e| e.field), Err("pool".to_string()), "{bad}");
        }
    }

    /// Found by the whole-system simulation: a pool given an installer after Apiary had made its clusters asked the
    /// installer to remove them, which knew none and answered them gone; their machines ran on, unowned. A pool is
    /// installed the way it was made, as it stays on its platform.
    #[test]
    fn a_pool_keeps_the_installer_it_was_made_with_or_its_lack_of_one() {
        use crate::model::{ProvisionerSpec, WebhookProvisioner};
        let hook = |url: &str| ProvisionerSpec {
            webhook: Some(WebhookProvisioner {
                url: url.into(),
                secret: "arn:aws:secretsmanager:us-east-1:123456789012:secret:hook".into(),
            }),
        };
        let plain = spec();
        let installed = PoolSpec { provisioner: Some(hook("https://installer.example.com")), ..plain.clone() };
        for (old, new) in [(&plain, &installed), (&installed, &plain)] {
            let errors = validate_update(old, new).expect_err("the installer changed");
            assert_eq!(errors[0].field, "provisioner", "{errors:?}");
            assert!(errors[0].message.contains("make a new pool"), "{}", errors[0].message);
        }
        let resized = PoolSpec { size: 3, ..installed.clone() };
        assert_eq!(validate_update(&installed, &resized), Ok(()));
    }

    #[test]
    fn a_claims_new_lifetime_is_held_to_its_pools_maximum() {
        let pool = ClaimLifetime { default: None, maximum: Some(GoDuration::new("8h")) };
        let hours = |h| chrono::TimeDelta::hours(h);
        assert_eq!(validate_claim_lifetime("lifetime", "8h", Some(&pool)).map_err(|e| e.message), Ok(hours(8)));
        assert_eq!(validate_claim_lifetime("lifetime", "9h", None).map_err(|e| e.message), Ok(hours(9)));
        let past = validate_claim_lifetime("lifetime", "9h", Some(&pool)).expect_err("past the maximum");
        assert_eq!(
            (past.field.as_str(), past.message.as_str()),
            ("lifetime", "9h is longer than the pool's claimLifetime.maximum, 8h")
        );
        assert_eq!(
            validate_claim_lifetime("lifetime", "0s", Some(&pool)).map(|_| ()).map_err(|e| e.field),
            Err("lifetime".into())
        );
    }
}
