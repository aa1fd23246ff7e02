//! Validation of pool specs and names: every problem, each with the path of the field it concerns.
//!
//! The claim API answers 400 with this list; a stored spec has passed it, so the planner can rely on it.

use std::collections::BTreeSet;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::duration::GoDuration;
use crate::model::{Platform, PoolSpec};

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

/// Checks a pool spec. `Ok` when it can be stored; otherwise every problem found, in field order.
pub fn validate_spec(spec: &PoolSpec) -> Result<(), Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut e = |field: &str, message: String| errors.push(FieldError::new(field, message));

    non_negative(&mut e, "size", spec.size);
    non_negative(&mut e, "runningCount", spec.running_count);
    if let Some(n) = spec.max_size {
        non_negative(&mut e, "maxSize", n);
    }
    if let Some(n) = spec.max_concurrent {
        if n < 1 {
            e("maxConcurrent", format!("must be at least 1 (omit it for no limit), got {n}"));
        }
    }
    positive_duration(&mut e, "hibernateAfter", spec.hibernate_after.as_ref());
    if let Some(lifetime) = &spec.claim_lifetime {
        positive_duration(&mut e, "claimLifetime.default", lifetime.default.as_ref());
        positive_duration(&mut e, "claimLifetime.maximum", lifetime.maximum.as_ref());
    }
    positive_duration(
        &mut e,
        "powerstateTransitionToRunningTimeout",
        spec.powerstate_transition_to_running_timeout.as_ref(),
    );
    positive_duration(
        &mut e,
        "powerstateTransitionToHibernatingTimeout",
        spec.powerstate_transition_to_hibernating_timeout.as_ref(),
    );

    if let Some(inventory) = &spec.inventory {
        if inventory.cluster_deployments.is_empty() {
            e("inventory.clusterDeployments", "must list at least one entry (omit inventory to generate names)".into());
        }
        let mut seen = BTreeSet::new();
        for (i, entry) in inventory.cluster_deployments.iter().enumerate() {
            let field = format!("inventory.clusterDeployments[{i}].name");
            match entry.name.as_deref() {
                None => e(&field, "every inventory entry needs a name".into()),
                Some("") => e(&field, "must not be empty".into()),
                Some(name) => {
                    if let Err(why) = check_dns_label(name, MAX_CLUSTER_NAME_LEN) {
                        e(&field, why);
                    }
                    if !seen.insert(name) {
                        e(&field, format!("duplicate name {name:?}"));
                    }
                }
            }
        }
    }

    if let Some(domain) = &spec.base_domain {
        let bad = domain.is_empty()
            || domain.len() > 253
            || domain.split('.').any(|label| check_dns_label(label, 63).is_err());
        if bad {
            e("baseDomain", format!("{domain:?} is not a DNS domain (lowercase labels separated by dots)"));
        }
    }
    for key in spec.labels.keys() {
        if key.is_empty() || key.len() > 128 {
            e("labels", format!("label key {key:?} must be 1 to 128 characters"));
        }
    }

    match &spec.platform {
        Platform::Aws(aws) => {
            if aws.region.trim().is_empty() {
                e("platform.aws.region", "is required".into());
            }
            match &aws.launch_template {
                Some(lt) => {
                    if lt.id.trim().is_empty() {
                        e("platform.aws.launchTemplate.id", "is required".into());
                    }
                }
                None => {
                    if aws.image_id.as_deref().is_none_or(str::is_empty) {
                        e("platform.aws.imageId", "is required when no launchTemplate is given".into());
                    }
                    if aws.instance_type.as_deref().is_none_or(str::is_empty) {
                        e("platform.aws.instanceType", "is required when no launchTemplate is given".into());
                    }
                }
            }
            if !(1..=100).contains(&aws.machine_count) {
                e("platform.aws.machineCount", format!("must be between 1 and 100, got {}", aws.machine_count));
            }
        }
        Platform::Fake(fake) => {
            for (field, d) in [
                ("platform.fake.installDuration", &fake.install_duration),
                ("platform.fake.resumeDuration", &fake.resume_duration),
                ("platform.fake.stopDuration", &fake.stop_duration),
            ] {
                duration(&mut e, field, d.as_ref());
            }
            for (field, p) in [
                ("platform.fake.installFailureRate", fake.install_failure_rate),
                ("platform.fake.resumeFailureRate", fake.resume_failure_rate),
            ] {
                if !(0.0..=1.0).contains(&p) {
                    e(field, format!("must be a probability between 0 and 1, got {p}"));
                }
            }
        }
    }

    if let Some(adaptive) = &spec.adaptive_running_count {
        match (adaptive.instant_share, &adaptive.wait_p95) {
            (Some(_), Some(_)) | (None, None) => e(
                "adaptiveRunningCount",
                "set exactly one target: instantShare (e.g. 0.95) or waitP95 (e.g. 1m)".into(),
            ),
            (Some(share), None) if !(share > 0.0 && share < 1.0) => {
                e("adaptiveRunningCount.instantShare", format!("must be between 0 and 1 (exclusive), got {share}"))
            }
            (None, Some(wait)) => positive_duration(&mut e, "adaptiveRunningCount.waitP95", Some(wait)),
            _ => {}
        }
        positive_duration(&mut e, "adaptiveRunningCount.window", adaptive.window.as_ref());
        positive_duration(&mut e, "adaptiveRunningCount.resumeEstimate", adaptive.resume_estimate.as_ref());
    }

    for (i, schedule) in spec.schedules.iter().enumerate() {
        let at = |f: &str| format!("schedules[{i}].{f}");
        if let Err(why) = crate::schedule::parse_cron(&schedule.cron) {
            e(&at("cron"), why);
        }
        if chrono_tz::Tz::from_str(&schedule.time_zone).is_err() {
            e(&at("timeZone"), format!("{:?} is not an IANA time zone (e.g. Europe/Berlin, UTC)", schedule.time_zone));
        }
        positive_duration(&mut e, &at("duration"), Some(&schedule.duration));
        if let Some(n) = schedule.size {
            non_negative(&mut e, &at("size"), n);
        }
        if let Some(n) = schedule.running_count {
            non_negative(&mut e, &at("runningCount"), n);
        }
        if schedule.size.is_none() && schedule.running_count.is_none() {
            e(&at("size"), "a schedule must override size, runningCount or both".into());
        }
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

fn non_negative(e: &mut impl FnMut(&str, String), field: &str, n: i64) {
    if n < 0 {
        e(field, format!("must not be negative, got {n}"));
    }
}

fn duration(e: &mut impl FnMut(&str, String), field: &str, d: Option<&GoDuration>) {
    if let Some(d) = d {
        if let Err(why) = crate::duration::parse(d.text()) {
            e(field, why.to_string());
        }
    }
}

fn positive_duration(e: &mut impl FnMut(&str, String), field: &str, d: Option<&GoDuration>) {
    if let Some(d) = d {
        match crate::duration::parse(d.text()) {
            Err(why) => e(field, why.to_string()),
            Ok(v) if v <= chrono::TimeDelta::zero() => {
                e(field, format!("must be longer than zero, got {:?}", d.text()))
            }
            Ok(_) => {}
        }
    }
}

fn check_dns_label(name: &str, max: usize) -> Result<(), String> {
    if name.is_empty() {
        return Err("must not be empty".into());
    }
    if name.len() > max {
        return Err(format!("{name:?} is longer than {max} characters"));
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
    use crate::model::{ClaimLifetime, FakePlatform, Inventory, InventoryEntry, Schedule};

    fn spec() -> PoolSpec {
        PoolSpec::new(3, Platform::Fake(FakePlatform::default()))
    }

    fn fields(spec: &PoolSpec) -> Vec<String> {
        validate_spec(spec).err().unwrap_or_default().into_iter().map(|e| e.field).collect()
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
                InventoryEntry { name: Some("foo".into()) },
                InventoryEntry { name: None },
                InventoryEntry { name: Some(String::new()) },
                InventoryEntry { name: Some("foo".into()) },
                InventoryEntry { name: Some("Bad_Name".into()) },
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
    fn aws_needs_a_region_and_an_image_or_a_launch_template() {
        let s = PoolSpec::new(
            1,
            Platform::Aws(crate::model::AwsPlatform {
                region: String::new(),
                launch_template: None,
                image_id: None,
                instance_type: None,
                machine_count: 0,
                subnet_id: None,
                tags: Default::default(),
            }),
        );
        assert_eq!(
            fields(&s),
            ["platform.aws.region", "platform.aws.imageId", "platform.aws.instanceType", "platform.aws.machineCount"]
        );
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
}
