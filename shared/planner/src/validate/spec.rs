//! A whole pool spec checked part by part: sizes, durations, the inventory, the cloud and installer, the running
//! count's policy, the reaper, canaries and schedules, and who may use the pool. Every error names its field.

use std::collections::BTreeSet;

use super::*;

/// Checks a pool spec. `Ok` when it can be stored; otherwise every problem found, in field order.
pub fn validate_spec(spec: &PoolSpec) -> Result<(), Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut e = |field: &str, message: String| errors.push(FieldError::new(field, message));
    // A stored spec keeps a later release's options (`later`); a caller's may not name any this release lacks.
    for field in spec.later.keys() {
        e(field, "unknown field".into());
    }
    sizes(&mut e, spec);
    retry_reasons(&mut e, spec);
    durations(&mut e, spec);
    if !inventory(&mut e, spec) {
        return Err(errors);
    }
    domain_and_labels(&mut e, spec);
    installer_inputs(&mut e, spec);
    platform(&mut e, spec);
    adaptive_running_count(&mut e, spec);
    reaper(&mut e, spec);
    resume_canaries(&mut e, spec);
    schedules(&mut e, spec);
    if let Some(access) = &spec.access {
        principals::validate_access(access, &mut errors);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// `release` and `installConfigTemplate`: what the pool's installer installs, so only a pool with one may name them.
fn installer_inputs(e: &mut impl FnMut(&str, String), spec: &PoolSpec) {
    type Check = fn(&str) -> Result<(), String>;
    let inputs: [(&str, Option<&String>, Check); 2] = [
        ("release", spec.release.as_ref(), check_image_ref),
        ("installConfigTemplate", spec.install_config_template.as_ref(), check_template_ref),
    ];
    for (field, value, check) in inputs {
        match (value, &spec.provisioner) {
            (Some(_), None) => e(
                field,
                format!(
                    "{field} is for the pool's installer: name one (provisioner.webhook), or leave {field} out for a \
                     pool that makes its machines itself"
                ),
            ),
            (Some(value), Some(_)) => {
                if let Err(why) = check(value) {
                    e(field, why);
                }
            }
            (None, _) => {}
        }
    }
}

/// `size`, `runningCount`, `maxSize`, `maxConcurrent` and `installAttemptsLimit`.
fn sizes(e: &mut impl FnMut(&str, String), spec: &PoolSpec) {
    count(e, "size", spec.size);
    count(e, "runningCount", spec.running_count);
    if let Some(n) = spec.max_size {
        count(e, "maxSize", n);
    }
    if let Some(n) = spec.max_concurrent {
        if n < 1 {
            e("maxConcurrent", format!("must be at least 1 (omit it for no limit), got {n}"));
        } else {
            count(e, "maxConcurrent", n);
        }
    }
    if let Some(n) = spec.install_attempts_limit {
        if !(1..=MAX_INSTALL_ATTEMPTS).contains(&n) {
            e("installAttemptsLimit", format!("must be between 1 and {MAX_INSTALL_ATTEMPTS}, got {n}"));
        }
    }
}

/// `installRetryReasons`: each a class of install failure, named once.
fn retry_reasons(e: &mut impl FnMut(&str, String), spec: &PoolSpec) {
    use crate::failure::FailureReason;
    let Some(names) = &spec.install_retry_reasons else { return };
    let all = FailureReason::ALL;
    if names.len() > all.len() {
        e("installRetryReasons", format!("at most {} reasons, got {}", all.len(), names.len()));
    }
    let mut seen = BTreeSet::new();
    for (i, name) in names.iter().enumerate().take(all.len() + 1) {
        let field = format!("installRetryReasons[{i}]");
        match FailureReason::parse(name) {
            None => {
                let known: Vec<&str> = all.iter().map(|r| r.name()).collect();
                e(&field, format!("{:?} is not a failure reason: one of {}", shorten(name), known.join(", ")));
            }
            Some(reason) if !seen.insert(reason) => e(&field, format!("{name} is listed twice")),
            Some(_) => {}
        }
    }
}

/// The spec's durations: timeouts, `hibernateAfter`, `claimLifetime`.
fn durations(e: &mut impl FnMut(&str, String), spec: &PoolSpec) {
    positive_duration(e, "installTimeout", spec.install_timeout.as_ref());
    positive_duration(e, "hibernateAfter", spec.hibernate_after.as_ref());
    if let Some(lifetime) = &spec.claim_lifetime {
        positive_duration(e, "claimLifetime.default", lifetime.default.as_ref());
        positive_duration(e, "claimLifetime.maximum", lifetime.maximum.as_ref());
    }
    positive_duration(
        e,
        "powerstateTransitionToRunningTimeout",
        spec.powerstate_transition_to_running_timeout.as_ref(),
    );
    positive_duration(
        e,
        "powerstateTransitionToHibernatingTimeout",
        spec.powerstate_transition_to_hibernating_timeout.as_ref(),
    );
}

/// The admin's inventory of names: each entry named once, as a DNS label, its parameters bounded. False when there
/// are too many entries to check one by one.
fn inventory(e: &mut impl FnMut(&str, String), spec: &PoolSpec) -> bool {
    let Some(inventory) = &spec.inventory else { return true };
    let n = inventory.cluster_deployments.len();
    if n == 0 {
        e("inventory.clusterDeployments", "must list at least one entry (omit inventory to generate names)".into());
    } else if n > MAX_INVENTORY {
        e("inventory.clusterDeployments", format!("at most {MAX_INVENTORY} entries, got {n}"));
        // Every name would be checked too: one error says it.
        return false;
    }
    let bytes: usize =
        inventory.cluster_deployments.iter().flat_map(|entry| &entry.parameters).map(|(k, v)| k.len() + v.len()).sum();
    if bytes > MAX_INVENTORY_PARAMETER_BYTES {
        e(
            "inventory.clusterDeployments",
            format!("parameters of every entry together at most {MAX_INVENTORY_PARAMETER_BYTES} bytes, got {bytes}"),
        );
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
        let params = &entry.parameters;
        let field = format!("inventory.clusterDeployments[{i}].parameters");
        if params.len() > MAX_ENTRY_PARAMETERS {
            e(&field, format!("at most {MAX_ENTRY_PARAMETERS} parameters, got {}", params.len()));
        }
        for (key, value) in params.iter().take(MAX_ENTRY_PARAMETERS + 1) {
            if key.is_empty() || key.len() > MAX_LABEL_KEY_LEN {
                e(&field, format!("parameter name {:?} must be 1 to {MAX_LABEL_KEY_LEN} characters", shorten(key)));
            } else if value.len() > MAX_LABEL_VALUE_LEN {
                e(&format!("{field}.{key}"), format!("at most {MAX_LABEL_VALUE_LEN} characters, got {}", value.len()));
            }
        }
    }
    true
}

/// `baseDomain` and `labels`.
fn domain_and_labels(e: &mut impl FnMut(&str, String), spec: &PoolSpec) {
    if let Some(domain) = &spec.base_domain {
        let bad = domain.is_empty()
            || domain.len() > 253
            || domain.split('.').any(|label| check_dns_label(label, 63).is_err());
        if bad {
            e("baseDomain", format!("{domain:?} is not a DNS domain (lowercase labels separated by dots)"));
        }
    }
    if spec.labels.len() > MAX_LABELS {
        e("labels", format!("at most {MAX_LABELS} labels, got {}", spec.labels.len()));
    }
    for (key, value) in spec.labels.iter().take(MAX_LABELS + 1) {
        if key.is_empty() || key.len() > MAX_LABEL_KEY_LEN {
            e("labels", format!("label key {:?} must be 1 to {MAX_LABEL_KEY_LEN} characters", shorten(key)));
        } else if value.len() > MAX_LABEL_VALUE_LEN {
            e(&format!("labels.{key}"), format!("at most {MAX_LABEL_VALUE_LEN} characters, got {}", value.len()));
        }
    }
}

/// The cloud, the notifications, the installer and the readiness check: each in `platforms`.
fn platform(e: &mut impl FnMut(&str, String), spec: &PoolSpec) {
    // With an installer behind a webhook, the installer launches the machines: the platform only powers them.
    platforms::check(e, &spec.platform, spec.provisioner.is_none());
    platforms::notify(e, &spec.notify);
    if let Some(p) = &spec.provisioner {
        platforms::provisioner(e, p);
    }
    if let Some(r) = &spec.readiness {
        platforms::readiness(e, r);
    }
}

/// `adaptiveRunningCount`: exactly one target, its windows, its forecast.
fn adaptive_running_count(e: &mut impl FnMut(&str, String), spec: &PoolSpec) {
    let Some(adaptive) = &spec.adaptive_running_count else { return };
    match (adaptive.instant_share, &adaptive.wait_p95) {
        (Some(_), Some(_)) | (None, None) => {
            e("adaptiveRunningCount", "set exactly one target: instantShare (e.g. 0.95) or waitP95 (e.g. 1m)".into())
        }
        (Some(share), None) if !(share > 0.0 && share < 1.0) => {
            e("adaptiveRunningCount.instantShare", format!("must be between 0 and 1 (exclusive), got {share}"))
        }
        (None, Some(wait)) => positive_duration(e, "adaptiveRunningCount.waitP95", Some(wait)),
        _ => {}
    }
    positive_duration(e, "adaptiveRunningCount.window", adaptive.window.as_ref());
    positive_duration(e, "adaptiveRunningCount.resumeEstimate", adaptive.resume_estimate.as_ref());
    if let Some(forecast) = &adaptive.forecast {
        if let Some(zone) = &forecast.time_zone {
            time_zone(e, "adaptiveRunningCount.forecast.timeZone", zone);
        }
        if let Some(h) = forecast.half_life_weeks {
            if !(h.is_finite() && h > 0.0 && h <= crate::forecast::MAX_HALF_LIFE_WEEKS) {
                e(
                    "adaptiveRunningCount.forecast.halfLifeWeeks",
                    format!("must be more than 0 and at most {}, got {h}", crate::forecast::MAX_HALF_LIFE_WEEKS),
                );
            }
        }
    }
}

/// `reaper`: how often it looks and how long a machine may outlive its cluster.
fn reaper(e: &mut impl FnMut(&str, String), spec: &PoolSpec) {
    let Some(r) = &spec.reaper else { return };
    use crate::reaper::{MIN_EVERY, MIN_GRACE};
    for (field, d, least) in [("reaper.every", &r.every, MIN_EVERY), ("reaper.grace", &r.grace, MIN_GRACE)] {
        positive_duration(e, field, d.as_ref());
        if let Some(v) = d.as_ref().and_then(|d| d.get()).filter(|v| *v < least) {
            let least = crate::duration::format(least);
            e(field, format!("must be at least {least}, got {}", crate::duration::format(v)));
        }
    }
}

/// `resumeCanaries`: when, how many at a time, in which hours.
fn resume_canaries(e: &mut impl FnMut(&str, String), spec: &PoolSpec) {
    let Some(c) = &spec.resume_canaries else { return };
    positive_duration(e, "resumeCanaries.after", Some(&c.after));
    if let Some(n) = c.at_a_time {
        if !(1..=crate::canary::MAX_AT_A_TIME).contains(&n) {
            e("resumeCanaries.atATime", format!("must be 1 to {}, got {n}", crate::canary::MAX_AT_A_TIME));
        }
    }
    if let Some(hours) = &c.hours {
        if let Err(why) = crate::canary::parse_hours(&shorten(hours)) {
            e("resumeCanaries.hours", why);
        }
    }
    if let Some(zone) = &c.time_zone {
        time_zone(e, "resumeCanaries.timeZone", zone);
    }
}

/// `schedules`: each a cron in a time zone overriding `size`, `runningCount` or both for a while.
fn schedules(e: &mut impl FnMut(&str, String), spec: &PoolSpec) {
    if spec.schedules.len() > MAX_SCHEDULES {
        e("schedules", format!("at most {MAX_SCHEDULES} schedules, got {}", spec.schedules.len()));
    }
    for (i, schedule) in spec.schedules.iter().enumerate().take(MAX_SCHEDULES) {
        let at = |f: &str| format!("schedules[{i}].{f}");
        if let Some(name) = &schedule.name {
            if let Err(why) = check_dns_label(name, 63) {
                e(&at("name"), why);
            }
        }
        if schedule.cron.len() > MAX_CRON_LEN {
            e(&at("cron"), format!("at most {MAX_CRON_LEN} characters, got {}", schedule.cron.len()));
        } else if let Err(why) = crate::schedule::parse_cron(&schedule.cron) {
            e(&at("cron"), why);
        }
        time_zone(e, &at("timeZone"), &schedule.time_zone);
        positive_duration(e, &at("duration"), Some(&schedule.duration));
        if let Some(n) = schedule.size {
            count(e, &at("size"), n);
        }
        if let Some(n) = schedule.running_count {
            count(e, &at("runningCount"), n);
        }
        if schedule.size.is_none() && schedule.running_count.is_none() {
            e(&at("size"), "a schedule must override size, runningCount or both".into());
        }
    }
}
