//! The checks of each platform's fields: every problem, each with its field path (`platform.<kind>.<field>`).

use std::collections::{BTreeMap, BTreeSet};

use super::limits::*;
use super::{check_dns_label, duration, positive_duration, secret_arn, shorten};
use crate::model::{
    AwsPlatform, AzurePlatform, FakePlatform, GcpPlatform, Platform, ProvisionerSpec, ReadinessSpec, RoleArn,
    VspherePlatform,
};

/// The fields that say where a platform's machines live, with their values: the pool's clusters are found there,
/// so they never change once the pool exists.
fn location(platform: &Platform) -> Vec<(&'static str, &str)> {
    match platform {
        Platform::Aws(a) => vec![
            ("platform.aws.region", a.region.as_str()),
            // The account: the role's (its name may change, as a team renames or rotates it), or the stack's own.
            (
                "platform.aws.roleArn",
                a.role_arn
                    .as_deref()
                    .map_or("the stack's own account", |arn| RoleArn::parse(arn).map_or(arn, |r| r.account)),
            ),
        ],
        Platform::Gcp(g) => vec![("platform.gcp.project", g.project.as_str())],
        Platform::Azure(a) => vec![
            ("platform.azure.subscriptionId", a.subscription_id.as_str()),
            ("platform.azure.resourceGroupName", a.resource_group_name.as_str()),
        ],
        Platform::Vsphere(v) => {
            vec![("platform.vsphere.server", v.server.as_str()), ("platform.vsphere.datacenter", v.datacenter.as_str())]
        }
        Platform::Fake(_) => vec![],
    }
}

/// Checks that `new` leaves the pool's machines where `old` put them: the same platform, region, project,
/// subscription and resource-group pattern, vCenter and datacenter.
pub(super) fn unmoved(e: &mut impl FnMut(&str, String), old: &Platform, new: &Platform) {
    if old.kind() != new.kind() {
        e(
            "platform",
            format!(
                "a pool stays on the platform it was made on ({}): its clusters live there; make a new pool for {}",
                old.kind(),
                new.kind()
            ),
        );
        return;
    }
    for ((field, was), (_, is)) in location(old).into_iter().zip(location(new)) {
        if was != is {
            e(field, format!("cannot change: the pool's clusters live in {was:?}; make a new pool for {is:?}"));
        }
    }
}

/// Checks `platform`, reporting each problem through `e`.
pub(super) fn check(e: &mut impl FnMut(&str, String), platform: &Platform, launches: bool) {
    match platform {
        Platform::Aws(a) => aws(e, a, launches),
        Platform::Gcp(g) => gcp(e, g, launches),
        Platform::Azure(a) => azure(e, a),
        Platform::Vsphere(v) => vsphere(e, v),
        Platform::Fake(f) => fake(e, f),
    }
}

/// `launches`: Apiary launches the machines (no installer names them), so it needs what to launch.
fn aws(e: &mut impl FnMut(&str, String), aws: &AwsPlatform, launches: bool) {
    if aws.region.trim().is_empty() {
        e("platform.aws.region", "is required".into());
    }
    let ids = [
        ("platform.aws.region", Some(&aws.region)),
        ("platform.aws.launchTemplate.id", aws.launch_template.as_ref().map(|lt| &lt.id)),
        ("platform.aws.launchTemplate.version", aws.launch_template.as_ref().and_then(|lt| lt.version.as_ref())),
        ("platform.aws.imageId", aws.image_id.as_ref()),
        ("platform.aws.instanceType", aws.instance_type.as_ref()),
        ("platform.aws.subnetId", aws.subnet_id.as_ref()),
    ];
    for (field, value) in ids {
        if let Some(v) = value.filter(|v| v.len() > MAX_CLOUD_ID_LEN) {
            e(field, format!("at most {MAX_CLOUD_ID_LEN} characters, got {}", v.len()));
        }
    }
    if let Some(arn) = &aws.role_arn {
        if arn.len() > MAX_ROLE_ARN_LEN {
            e("platform.aws.roleArn", format!("at most {MAX_ROLE_ARN_LEN} characters, got {}", arn.len()));
        } else if let Err(why) = RoleArn::parse(arn) {
            e("platform.aws.roleArn", why);
        }
    }
    if aws.tags.len() > MAX_TAGS {
        e("platform.aws.tags", format!("at most {MAX_TAGS} tags, got {}", aws.tags.len()));
    }
    for (key, value) in aws.tags.iter().take(MAX_TAGS + 1) {
        if key.is_empty() || key.len() > MAX_TAG_KEY_LEN || key.starts_with("aws:") || key.starts_with("apiary:") {
            e(
                "platform.aws.tags",
                format!(
                    "tag key {:?} must be 1 to {MAX_TAG_KEY_LEN} characters, not starting with aws: or apiary:",
                    shorten(key)
                ),
            );
        } else if value.len() > MAX_TAG_VALUE_LEN {
            e(
                &format!("platform.aws.tags.{key}"),
                format!("at most {MAX_TAG_VALUE_LEN} characters, got {}", value.len()),
            );
        }
    }
    match &aws.launch_template {
        Some(lt) => {
            if lt.id.trim().is_empty() {
                e("platform.aws.launchTemplate.id", "is required".into());
            }
        }
        None if !launches => {}
        None => {
            if aws.image_id.as_deref().is_none_or(str::is_empty) {
                e("platform.aws.imageId", "is required when no launchTemplate is given".into());
            }
            if aws.instance_type.as_deref().is_none_or(str::is_empty) {
                e("platform.aws.instanceType", "is required when no launchTemplate is given".into());
            }
        }
    }
    if !(1..=MAX_MACHINES).contains(&aws.machine_count) {
        e("platform.aws.machineCount", format!("must be between 1 and {MAX_MACHINES}, got {}", aws.machine_count));
    }
}

fn fake(e: &mut impl FnMut(&str, String), fake: &FakePlatform) {
    for (field, d) in [
        ("platform.fake.installDuration", &fake.install_duration),
        ("platform.fake.resumeDuration", &fake.resume_duration),
        ("platform.fake.stopDuration", &fake.stop_duration),
    ] {
        duration(e, field, d.as_ref());
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

/// `launches`: Apiary makes the machines from the instance template (no installer does).
fn gcp(e: &mut impl FnMut(&str, String), gcp: &GcpPlatform, launches: bool) {
    let project = &gcp.project;
    let project_ok = (6..=30).contains(&project.len())
        && project.starts_with(|c: char| c.is_ascii_lowercase())
        && !project.ends_with('-')
        && project.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !project_ok {
        e(
            "platform.gcp.project",
            format!(
                "{:?} is not a project id: 6 to 30 lowercase letters, digits and '-', starting with a letter",
                shorten(project)
            ),
        );
    }
    let zones = gcp.all_zones();
    if zones.is_empty() {
        e("platform.gcp.zone", "is required (or zones)".into());
    }
    if gcp.zones.len() > MAX_ZONES {
        e("platform.gcp.zones", format!("at most {MAX_ZONES} zones, got {}", gcp.zones.len()));
    }
    let mut seen = BTreeSet::new();
    for (i, zone) in gcp
        .zone
        .iter()
        .map(|z| ("platform.gcp.zone".to_owned(), z))
        .chain(gcp.zones.iter().take(MAX_ZONES).enumerate().map(|(i, z)| (format!("platform.gcp.zones[{i}]"), z)))
    {
        if let Err(why) = check_gcp_name(zone) {
            e(&i, format!("is not a zone: {why}"));
        } else if !seen.insert(zone.as_str()) {
            e(&i, format!("zone {zone:?} is given twice"));
        }
    }
    if gcp.instance_template.is_empty() {
        if launches {
            e("platform.gcp.instanceTemplate", "is required when no installer makes the machines".into());
        }
    } else if gcp.instance_template.len() > MAX_GCP_TEMPLATE_LEN {
        e(
            "platform.gcp.instanceTemplate",
            format!("at most {MAX_GCP_TEMPLATE_LEN} characters, got {}", gcp.instance_template.len()),
        );
    } else if gcp_template_name(&gcp.instance_template).is_none() {
        e(
            "platform.gcp.instanceTemplate",
            format!(
                "{:?} is not an instance template: a name (lowercase letters, digits and '-', at most 63) or its \
                 path (global/instanceTemplates/NAME, projects/P/global/instanceTemplates/NAME or \
                 projects/P/regions/R/instanceTemplates/NAME)",
                shorten(&gcp.instance_template)
            ),
        );
    }
    if !(1..=MAX_MACHINES).contains(&gcp.machine_count) {
        e("platform.gcp.machineCount", format!("must be between 1 and {MAX_MACHINES}, got {}", gcp.machine_count));
    }
    secret_arn(e, "platform.gcp.credentialsSecret", &gcp.credentials_secret);
    if gcp.labels.len() > MAX_GCP_LABELS {
        e("platform.gcp.labels", format!("at most {MAX_GCP_LABELS} labels, got {}", gcp.labels.len()));
    }
    for (key, value) in gcp.labels.iter().take(MAX_GCP_LABELS + 1) {
        let key_ok = key.starts_with(|c: char| c.is_ascii_lowercase()) && gcp_label_text(key);
        if !key_ok || key.starts_with("apiary-") || key.starts_with("kubernetes-io-cluster-") {
            e(
                "platform.gcp.labels",
                format!(
                    "label key {:?} must be 1 to {MAX_GCP_NAME_LEN} lowercase letters, digits, '_' and '-', \
                     starting with a letter, not starting with apiary- or kubernetes-io-cluster-",
                    shorten(key)
                ),
            );
        } else if !value.is_empty() && !gcp_label_text(value) {
            e(
                &format!("platform.gcp.labels.{key}"),
                format!("at most {MAX_GCP_NAME_LEN} lowercase letters, digits, '_' and '-'"),
            );
        }
    }
}

/// A Compute Engine label key or value's characters and length.
fn gcp_label_text(text: &str) -> bool {
    (1..=MAX_GCP_NAME_LEN).contains(&text.len())
        && text.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// A Compute Engine resource name (RFC 1035: a lowercase letter, then letters, digits and '-', not ending in '-').
fn check_gcp_name(name: &str) -> Result<(), String> {
    check_dns_label(name, MAX_GCP_NAME_LEN)?;
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(format!("{name:?} must start with a letter"));
    }
    Ok(())
}

/// The template's name when `path` is a name or a path to an instance template.
pub fn gcp_template_name(path: &str) -> Option<&str> {
    let parts: Vec<&str> = path.split('/').collect();
    let name = match parts.as_slice() {
        [name] | ["global", "instanceTemplates", name] => *name,
        ["projects", p, "global", "instanceTemplates", name] if check_dns_label(p, 30).is_ok() => *name,
        ["projects", p, "regions", r, "instanceTemplates", name]
            if check_dns_label(p, 30).is_ok() && check_gcp_name(r).is_ok() =>
        {
            *name
        }
        _ => return None,
    };
    check_gcp_name(name).ok().map(|()| name)
}

fn azure(e: &mut impl FnMut(&str, String), az: &AzurePlatform) {
    guid(e, "platform.azure.subscriptionId", &az.subscription_id);
    guid(e, "platform.azure.tenantId", &az.tenant_id);
    let location = &az.location;
    let location_ok = (1..=MAX_AZURE_LOCATION_LEN).contains(&location.len())
        && location.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if !location_ok {
        e(
            "platform.azure.location",
            format!(
                "{:?} is not an Azure region name: 1 to {MAX_AZURE_LOCATION_LEN} lowercase letters and digits \
                 (westeurope, eastus2)",
                shorten(location)
            ),
        );
    }
    resource_group_name(e, &az.resource_group_name);
    azure_template(e, az);
    secret_arn(e, "platform.azure.credentialsSecret", &az.credentials_secret);
    if az.tags.len() > MAX_AZURE_TAGS {
        e("platform.azure.tags", format!("at most {MAX_AZURE_TAGS} tags, got {}", az.tags.len()));
    }
    for (key, value) in az.tags.iter().take(MAX_AZURE_TAGS + 1) {
        let key_ok = (1..=MAX_AZURE_TAG_KEY_LEN).contains(&key.len())
            && !key.bytes().any(|b| matches!(b, b'<' | b'>' | b'%' | b'&' | b'\\' | b'?' | b'/'))
            && !key.starts_with("apiary-")
            && !key.starts_with("kubernetes.io_cluster.");
        if !key_ok {
            e(
                "platform.azure.tags",
                format!(
                    "tag name {:?} must be 1 to {MAX_AZURE_TAG_KEY_LEN} characters without < > % & \\ ? /, not \
                     starting with apiary- or kubernetes.io_cluster.",
                    shorten(key)
                ),
            );
        } else if value.len() > MAX_AZURE_TAG_VALUE_LEN {
            e(
                &format!("platform.azure.tags.{key}"),
                format!("at most {MAX_AZURE_TAG_VALUE_LEN} characters, got {}", value.len()),
            );
        }
    }
}

/// `platform.azure.resourceGroupName`: a pattern with `{infraId}` that makes valid resource group names.
fn resource_group_name(e: &mut impl FnMut(&str, String), rg: &str) {
    // The longest name the pattern makes: every {infraId} at its longest.
    let longest = rg.replace("{infraId}", &"x".repeat(MAX_INFRA_ID_LEN));
    let rg_chars = rg
        .replace("{infraId}", "")
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'(' | b')'));
    if !rg.contains("{infraId}") {
        e(
            "platform.azure.resourceGroupName",
            format!(
                "{:?} must contain {{infraId}}: each cluster has a resource group of its own, deleted with it",
                shorten(rg)
            ),
        );
    } else if longest.len() > MAX_RESOURCE_GROUP_LEN || !rg_chars || rg.ends_with('.') {
        e(
            "platform.azure.resourceGroupName",
            format!(
                "{:?} does not make resource group names: at most {MAX_RESOURCE_GROUP_LEN} characters with a \
                 {MAX_INFRA_ID_LEN}-character infraId, letters, digits, '_', '-', '.', '(' and ')', not ending in '.'",
                shorten(rg)
            ),
        );
    }
}

/// The ARM template (inline or by its https URL) and its parameters, `infraId` being Apiary's to set.
fn azure_template(e: &mut impl FnMut(&str, String), az: &AzurePlatform) {
    match (&az.template, &az.template_uri) {
        (Some(_), Some(_)) | (None, None) => {
            e("platform.azure.template", "give exactly one of template (the ARM template) or templateUri".into())
        }
        (Some(template), None) => arm_template(e, template),
        (None, Some(uri)) => {
            let ok = uri.len() <= MAX_URL_LEN
                && uri.strip_prefix("https://").is_some_and(|rest| {
                    !rest.is_empty() && !rest.starts_with('/') && !rest.bytes().any(|b| b.is_ascii_whitespace())
                });
            if !ok {
                e(
                    "platform.azure.templateUri",
                    format!("{:?} is not an https URL of at most {MAX_URL_LEN} characters", shorten(uri)),
                );
            }
        }
    }
    if az.parameters.len() > MAX_AZURE_PARAMETERS {
        e(
            "platform.azure.parameters",
            format!("at most {MAX_AZURE_PARAMETERS} parameters, got {}", az.parameters.len()),
        );
    }
    for name in az.parameters.keys().take(MAX_AZURE_PARAMETERS + 1) {
        let ok = (1..=MAX_AZURE_PARAMETER_NAME_LEN).contains(&name.len())
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !ok {
            e(
                "platform.azure.parameters",
                format!(
                    "parameter name {:?} must be 1 to {MAX_AZURE_PARAMETER_NAME_LEN} letters, digits and '_'",
                    shorten(name)
                ),
            );
        } else if name == "infraId" {
            e("platform.azure.parameters.infraId", "is set by Apiary to each cluster's infraId".into());
        }
    }
    let size = az.template.as_ref().map_or(0, |t| t.to_string().len())
        + serde_json::to_string(&az.parameters).map_or(0, |p| p.len());
    if size > MAX_AZURE_TEMPLATE_BYTES {
        e(
            "platform.azure.template",
            format!(
                "template and parameters are {size} bytes, over {MAX_AZURE_TEMPLATE_BYTES}: publish a larger template \
                 and give its templateUri"
            ),
        );
    }
}

/// An inline ARM template: an object with resources, declaring the `infraId` parameter Apiary sets.
fn arm_template(e: &mut impl FnMut(&str, String), template: &serde_json::Value) {
    let Some(t) = template.as_object() else {
        e("platform.azure.template", "must be an ARM template (a JSON object)".into());
        return;
    };
    if !t.get("resources").is_some_and(|r| r.is_array() || r.is_object()) {
        e("platform.azure.template.resources", "is required: the resources to deploy".into());
    }
    if !t.get("parameters").and_then(|p| p.get("infraId")).is_some_and(serde_json::Value::is_object) {
        e(
            "platform.azure.template.parameters.infraId",
            "must be declared (\"infraId\": {\"type\": \"string\"}): Apiary sets it to each cluster's infraId".into(),
        );
    }
}

/// A GUID: 8-4-4-4-12 hexadecimal digits.
fn guid(e: &mut impl FnMut(&str, String), field: &str, text: &str) {
    let groups: Vec<&str> = text.split('-').collect();
    let ok = groups.len() == 5
        && groups.iter().zip([8, 4, 4, 4, 12]).all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()));
    if !ok {
        e(field, format!("{:?} is not a GUID (00000000-0000-0000-0000-000000000000)", shorten(text)));
    }
}

fn vsphere(e: &mut impl FnMut(&str, String), vs: &VspherePlatform) {
    if !server_ok(&vs.server) {
        e(
            "platform.vsphere.server",
            format!(
                "{:?} is not a host name or host:port (vcenter.example.com, 10.0.0.5:443; no scheme or path)",
                shorten(&vs.server)
            ),
        );
    }
    let names = [
        ("platform.vsphere.datacenter", Some(&vs.datacenter)),
        ("platform.vsphere.template", Some(&vs.template)),
        ("platform.vsphere.folder", Some(&vs.folder)),
        ("platform.vsphere.resourcePool", vs.resource_pool.as_ref()),
        ("platform.vsphere.datastore", vs.datastore.as_ref()),
    ];
    for (field, name) in names {
        let Some(name) = name else { continue };
        let ok = (1..=MAX_VSPHERE_NAME_LEN).contains(&name.chars().count())
            && name.trim() == name
            && !name.contains('/')
            && !name.chars().any(char::is_control);
        if !ok {
            e(
                field,
                format!(
                    "{:?} is not an inventory name: 1 to {MAX_VSPHERE_NAME_LEN} characters, no '/', no leading or \
                     trailing space",
                    shorten(name)
                ),
            );
        }
    }
    if !(1..=MAX_MACHINES).contains(&vs.machine_count) {
        e("platform.vsphere.machineCount", format!("must be between 1 and {MAX_MACHINES}, got {}", vs.machine_count));
    }
    secret_arn(e, "platform.vsphere.credentialsSecret", &vs.credentials_secret);
    if let Some(pem) = &vs.ca_bundle {
        if pem.len() > MAX_CA_BUNDLE_LEN {
            e("platform.vsphere.caBundle", format!("at most {MAX_CA_BUNDLE_LEN} characters, got {}", pem.len()));
        } else if !(pem.contains("-----BEGIN CERTIFICATE-----") && pem.contains("-----END CERTIFICATE-----")) {
            e("platform.vsphere.caBundle", "must hold PEM certificates (-----BEGIN CERTIFICATE-----)".into());
        }
    }
    positive_duration(e, "platform.vsphere.shutdownGracePeriod", vs.shutdown_grace_period.as_ref());
}

/// Checks `provisioner`: a webhook with an https URL (plain http only to a loopback host) and a secret's ARN.
pub(super) fn provisioner(e: &mut impl FnMut(&str, String), p: &ProvisionerSpec) {
    let Some(w) = &p.webhook else {
        e("provisioner.webhook", "required: the installer's webhook (url and secret)".into());
        return;
    };
    if !webhook_url_ok(&w.url) {
        e(
            "provisioner.webhook.url",
            format!(
                "{:?} is not an https URL of at most {MAX_URL_LEN} characters without query or fragment (plain http \
                 only to localhost or 127.0.0.1)",
                shorten(&w.url)
            ),
        );
    }
    secret_arn(e, "provisioner.webhook.secret", &w.secret);
}

/// Checks a pool's `notify` webhooks: at most [`MAX_HOOKS`](crate::model::notice::MAX_HOOKS), each an https URL (as the
/// installer's webhook is) with its signing key's secret ARN, naming each kind it hears at most once.
pub(super) fn notify(e: &mut impl FnMut(&str, String), hooks: &[crate::model::notice::NotifyHook]) {
    use crate::model::notice::MAX_HOOKS;
    if hooks.len() > MAX_HOOKS {
        e("notify", format!("at most {MAX_HOOKS} webhooks, got {}", hooks.len()));
        return;
    }
    for (i, hook) in hooks.iter().enumerate() {
        if !webhook_url_ok(&hook.url) {
            e(
                &format!("notify[{i}].url"),
                format!(
                    "{:?} is not an https URL of at most {MAX_URL_LEN} characters without query or fragment (plain \
                     http only to localhost or 127.0.0.1)",
                    shorten(&hook.url)
                ),
            );
        }
        secret_arn(e, &format!("notify[{i}].secret"), &hook.secret);
        let mut seen = std::collections::BTreeSet::new();
        for kind in &hook.events {
            if !seen.insert(kind) {
                e(&format!("notify[{i}].events"), format!("names {} twice", kind.as_str()));
            }
        }
    }
}

/// Checks `readiness`: exactly one check; its templates over the known placeholders, a CA bundle, a status, a
/// secret's ARN; a pause.
pub(super) fn readiness(e: &mut impl FnMut(&str, String), r: &ReadinessSpec) {
    match (&r.https, &r.kubernetes) {
        (Some(_), Some(_)) => e("readiness", "names both https and kubernetes: choose one check".to_owned()),
        (None, None) => e("readiness", "names no check: set https or kubernetes".to_owned()),
        _ => {}
    }
    if let Some(https) = &r.https {
        url_template(e, "readiness.https.url", &https.url);
        ca_bundle(e, "readiness.https.caBundle", https.ca_bundle.as_deref());
        if let Some(status) = https.expected_status.filter(|s| !(100..=599).contains(s)) {
            e("readiness.https.expectedStatus", format!("an HTTP status (100 to 599), got {status}"));
        }
    }
    if let Some(k) = &r.kubernetes {
        match crate::model::fill_template(&k.credentials, plausible) {
            Err(why) => e("readiness.kubernetes.credentials", placeholders(&why)),
            // A template (`{outputs.kubeconfigSecretArn}`) is checked once it is filled, a literal ARN now.
            Ok(_) if k.credentials.contains('{') && k.credentials.len() <= MAX_SECRET_ARN_LEN => {}
            Ok(_) => secret_arn(e, "readiness.kubernetes.credentials", &k.credentials),
        }
        if let Some(server) = &k.server {
            url_template(e, "readiness.kubernetes.server", server);
        }
        ca_bundle(e, "readiness.kubernetes.caBundle", k.ca_bundle.as_deref());
    }
    positive_duration(e, "readiness.settlePause", r.settle_pause.as_ref());
}

/// A plausible value for each placeholder a cluster can fill.
fn plausible(name: &str) -> Option<&'static str> {
    let known = matches!(name, "clusterName" | "baseDomain" | "infraId")
        || name.strip_prefix("outputs.").is_some_and(|o| !o.is_empty() && o.len() <= MAX_OUTPUT_KEY_LEN);
    known.then_some("x")
}

fn placeholders(why: &str) -> String {
    format!("{}: use the placeholders {{clusterName}}, {{baseDomain}}, {{infraId}} or {{outputs.NAME}}", shorten(why))
}

/// A URL template: known placeholders, and once filled an https URL (plain http only to a loopback address).
fn url_template(e: &mut impl FnMut(&str, String), field: &str, url: &str) {
    match crate::model::fill_template(url, plausible) {
        Err(why) => e(field, placeholders(&why)),
        // A URL that starts with an installer's output (`{outputs.apiUrl}/readyz`) is checked when it is filled.
        Ok(filled) if !webhook_url_ok(&filled) && !url.starts_with("{outputs.") => e(
            field,
            format!(
                "{:?} is not an https URL of at most {MAX_URL_LEN} characters without query or fragment (plain http \
                 only to localhost or 127.0.0.1)",
                shorten(url)
            ),
        ),
        Ok(_) => {}
    }
}

fn ca_bundle(e: &mut impl FnMut(&str, String), field: &str, bundle: Option<&str>) {
    if bundle.is_some_and(|b| b.len() > MAX_CA_BUNDLE_LEN || !b.contains("-----BEGIN")) {
        e(field, format!("PEM certificates, at most {MAX_CA_BUNDLE_LEN} characters"));
    }
}

fn webhook_url_ok(url: &str) -> bool {
    let (rest, loopback_only) = match (url.strip_prefix("https://"), url.strip_prefix("http://")) {
        (Some(rest), _) => (rest, false),
        (None, Some(rest)) => (rest, true),
        (None, None) => return false,
    };
    let host = rest.split('/').next().unwrap_or_default();
    let loopback = ["localhost", "127.0.0.1"].iter().any(|h| host == *h || host.starts_with(&format!("{h}:")));
    url.len() <= MAX_URL_LEN
        && server_ok(host)
        && (!loopback_only || loopback)
        && !url.bytes().any(|b| b.is_ascii_whitespace() || b == b'?' || b == b'#')
}

/// Checks what an external installer said of a cluster it finished: its infraId (a DNS label, as the clouds'
/// labels and names need it) and its outputs (bounded, so the cluster's item stays small). `Err` says what is wrong.
pub fn check_installed(infra_id: &str, outputs: &BTreeMap<String, String>) -> Result<(), String> {
    check_dns_label(infra_id, 63).map_err(|why| format!("infraId {:?}: {why}", shorten(infra_id)))?;
    if outputs.len() > MAX_OUTPUTS {
        return Err(format!("{} outputs, at most {MAX_OUTPUTS}", outputs.len()));
    }
    for (key, value) in outputs {
        if key.is_empty() || key.len() > MAX_OUTPUT_KEY_LEN {
            return Err(format!("output name {:?} must be 1 to {MAX_OUTPUT_KEY_LEN} characters", shorten(key)));
        }
        if value.len() > MAX_OUTPUT_VALUE_LEN {
            return Err(format!("output {key}: at most {MAX_OUTPUT_VALUE_LEN} characters, got {}", value.len()));
        }
    }
    Ok(())
}

/// `host` or `host:port`: DNS names or an IPv4 address, no scheme, no path.
fn server_ok(server: &str) -> bool {
    let (host, port) = match server.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (server, None),
    };
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|n| n > 0));
    let host_ok = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    port_ok && host_ok
}

#[cfg(test)]
mod tests;
