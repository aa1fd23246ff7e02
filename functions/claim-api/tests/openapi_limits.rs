//! The OpenAPI document declares the limits validation enforces: every bound in the pool spec's schema equals the
//! planner's limit, and a value one past it is refused with 400 naming its field. A bound added to either side
//! without the other fails here, so a schema-driven client's inputs and the API agree.

use apiary_planner::validate::limits::*;
use apiary_testkit::{World, ADMIN};
use chrono::{TimeZone, Utc};
use serde_json::{json, Value};

const BOUNDS: [&str; 5] = ["maxLength", "maximum", "maxItems", "maxProperties", "minimum"];

/// Every `(path/keyword, value)` bound of an inline schema (references are checked once, in their own case).
fn bounds(schema: &Value, path: &str, out: &mut Vec<(String, f64)>) {
    let Some(obj) = schema.as_object() else { return };
    for k in BOUNDS {
        if let Some(v) = obj.get(k).and_then(Value::as_f64) {
            out.push((format!("{path}/{k}"), v));
        }
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (name, s) in props {
            bounds(s, &format!("{path}/{name}"), out);
        }
    }
    if let Some(items) = obj.get("items") {
        bounds(items, &format!("{path}/items"), out);
    }
    if let Some(values) = obj.get("additionalProperties").filter(|v| v.is_object()) {
        bounds(values, &format!("{path}/*"), out);
    }
}

fn base() -> Value {
    json!({"size": 1, "platform": {"aws": {"region": "us-east-1", "imageId": "ami-1", "instanceType": "t3"}}})
}

/// A valid GCP pool with `field` of its platform set to `value`.
fn gcp(field: &str, value: Value) -> Value {
    let mut spec = json!({"size": 1, "platform": {"gcp": {
        "project": "ci-clusters-1",
        "zone": "europe-west1-b",
        "instanceTemplate": "apiary-node",
        "credentialsSecret": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:apiary/gcp-AbCdEf",
    }}});
    spec["platform"]["gcp"][field] = value;
    spec
}

/// A valid Azure pool with `field` of its platform set to `value` (`templateUri` replaces the template).
fn azure(field: &str, value: Value) -> Value {
    let mut spec = json!({"size": 1, "platform": {"azure": {
        "subscriptionId": "00000000-0000-0000-0000-0000000000aa",
        "tenantId": "00000000-0000-0000-0000-0000000000bb",
        "location": "westeurope",
        "template": {"parameters": {"infraId": {"type": "string"}}, "resources": []},
        "credentialsSecret": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:apiary/azure-AbCdEf",
    }}});
    if field == "templateUri" {
        spec["platform"]["azure"].as_object_mut().map(|a| a.remove("template"));
    }
    spec["platform"]["azure"][field] = value;
    spec
}

/// A valid vSphere pool with `field` of its platform set to `value`.
fn vsphere(field: &str, value: Value) -> Value {
    let mut spec = json!({"size": 1, "platform": {"vsphere": {
        "server": "vcenter.example.com",
        "datacenter": "DC1",
        "template": "rhcos",
        "folder": "ci",
        "credentialsSecret": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:apiary/vsphere-AbCdEf",
    }}});
    spec["platform"]["vsphere"][field] = value;
    spec
}

const INSTALLER_KEY: &str = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:apiary/installer-AbCdEf";

/// A valid pool whose clusters the installer at `url` makes, signing with the key under `secret`.
fn installer(url: &str, secret: &str) -> Value {
    let mut spec = base();
    spec["provisioner"] = json!({"webhook": {"url": url, "secret": secret}});
    spec
}

/// A valid pool whose readiness check is `kubernetes`.
fn kube(kubernetes: Value) -> Value {
    let mut spec = base();
    spec["readiness"] = json!({ "kubernetes": kubernetes });
    spec
}

/// A valid pool whose readiness probe is `https`.
fn probe(https: Value) -> Value {
    let mut spec = base();
    spec["readiness"] = json!({ "https": https });
    spec
}

/// One of a pool's `notify` webhooks.
fn hook(url: &str, secret: &str, events: Value) -> Value {
    json!({"url": url, "secret": secret, "events": events})
}

fn with(path: &[&str], value: Value) -> Value {
    let mut spec = base();
    let mut at = &mut spec;
    for (i, key) in path.iter().enumerate() {
        if i + 1 == path.len() {
            at[*key] = value;
            break;
        }
        if at.get(*key).is_none() {
            at[*key] = json!({});
        }
        at = &mut at[*key];
    }
    spec
}

fn schedule(extra: Value) -> Value {
    let mut s = json!({"name": "office", "cron": "0 8 * * 1-5", "duration": "8h", "runningCount": 1});
    for (k, v) in extra.as_object().into_iter().flatten() {
        s[k] = v.clone();
    }
    json!([s])
}

#[tokio::test]
async fn every_declared_bound_is_the_enforced_one() {
    let doc: Value = serde_json::from_str(claim_api::OPENAPI).expect("document");
    let schemas = &doc["components"]["schemas"];
    let mut declared = vec![];
    bounds(&schemas["PoolSpec"], "PoolSpec", &mut declared);
    bounds(&schemas["Duration"], "Duration", &mut declared);
    let x = |n: usize| "x".repeat(n);
    let m = MAX_CLUSTERS as usize;
    let aws = ["platform", "aws"];
    // (declared bound, its value in the planner, a spec one past it, the field the 400 must name)
    let cases: Vec<(&str, f64, Value, &str)> = vec![
        ("PoolSpec/size/maximum", m as f64, with(&["size"], json!(m + 1)), "size"),
        ("PoolSpec/size/minimum", 0.0, with(&["size"], json!(-1)), "size"),
        ("PoolSpec/runningCount/maximum", m as f64, with(&["runningCount"], json!(m + 1)), "runningCount"),
        ("PoolSpec/runningCount/minimum", 0.0, with(&["runningCount"], json!(-1)), "runningCount"),
        ("PoolSpec/maxSize/maximum", m as f64, with(&["maxSize"], json!(m + 1)), "maxSize"),
        ("PoolSpec/maxSize/minimum", 0.0, with(&["maxSize"], json!(-1)), "maxSize"),
        ("PoolSpec/maxConcurrent/maximum", m as f64, with(&["maxConcurrent"], json!(m + 1)), "maxConcurrent"),
        ("PoolSpec/maxConcurrent/minimum", 1.0, with(&["maxConcurrent"], json!(0)), "maxConcurrent"),
        (
            "PoolSpec/installAttemptsLimit/maximum",
            MAX_INSTALL_ATTEMPTS as f64,
            with(&["installAttemptsLimit"], json!(MAX_INSTALL_ATTEMPTS + 1)),
            "installAttemptsLimit",
        ),
        (
            "PoolSpec/installAttemptsLimit/minimum",
            1.0,
            with(&["installAttemptsLimit"], json!(0)),
            "installAttemptsLimit",
        ),
        (
            "PoolSpec/installRetryReasons/maxItems",
            apiary_planner::failure::FailureReason::ALL.len() as f64,
            with(&["installRetryReasons"], json!(vec!["Capacity"; 8])),
            "installRetryReasons",
        ),
        ("PoolSpec/release/maxLength", 512.0, with(&["release"], json!(format!("quay.io/{}:1", x(510)))), "release"),
        (
            "PoolSpec/installConfigTemplate/maxLength",
            135.0,
            with(&["installConfigTemplate"], json!(format!("{}@sha256:{}", x(64), "0".repeat(64)))),
            "installConfigTemplate",
        ),
        (
            "Duration/maxLength",
            MAX_DURATION_LEN as f64,
            with(&["hibernateAfter"], json!("1s".repeat(MAX_DURATION_LEN / 2 + 1))),
            "hibernateAfter",
        ),
        (
            "PoolSpec/inventory/clusterDeployments/maxItems",
            MAX_INVENTORY as f64,
            with(
                &["inventory", "clusterDeployments"],
                (0..=MAX_INVENTORY).map(|i| json!({"name": format!("n{i}")})).collect(),
            ),
            "inventory.clusterDeployments",
        ),
        (
            "PoolSpec/inventory/clusterDeployments/items/name/maxLength",
            apiary_planner::validate::MAX_CLUSTER_NAME_LEN as f64,
            with(&["inventory", "clusterDeployments"], json!([{"name": x(58)}])),
            "inventory.clusterDeployments[0].name",
        ),
        (
            "PoolSpec/baseDomain/maxLength",
            253.0,
            with(&["baseDomain"], json!(format!("{}.{}.{}.{}", x(63), x(63), x(63), x(63)))),
            "baseDomain",
        ),
        (
            "PoolSpec/labels/maxProperties",
            MAX_LABELS as f64,
            with(
                &["labels"],
                (0..=MAX_LABELS).map(|i| (format!("k{i}"), json!("v"))).collect::<serde_json::Map<_, _>>().into(),
            ),
            "labels",
        ),
        (
            "PoolSpec/labels/*/maxLength",
            MAX_LABEL_VALUE_LEN as f64,
            with(&["labels"], json!({"team": x(MAX_LABEL_VALUE_LEN + 1)})),
            "labels.team",
        ),
        (
            "PoolSpec/platform/aws/region/maxLength",
            MAX_CLOUD_ID_LEN as f64,
            with(&[aws[0], aws[1], "region"], json!(x(129))),
            "platform.aws.region",
        ),
        (
            "PoolSpec/platform/aws/imageId/maxLength",
            MAX_CLOUD_ID_LEN as f64,
            with(&[aws[0], aws[1], "imageId"], json!(x(129))),
            "platform.aws.imageId",
        ),
        (
            "PoolSpec/platform/aws/instanceType/maxLength",
            MAX_CLOUD_ID_LEN as f64,
            with(&[aws[0], aws[1], "instanceType"], json!(x(129))),
            "platform.aws.instanceType",
        ),
        (
            "PoolSpec/platform/aws/roleArn/maxLength",
            MAX_ROLE_ARN_LEN as f64,
            with(
                &[aws[0], aws[1], "roleArn"],
                json!(format!("arn:aws:iam::210987654321:role/{}/r", x(MAX_ROLE_ARN_LEN))),
            ),
            "platform.aws.roleArn",
        ),
        (
            "PoolSpec/access/claimants/maxItems",
            MAX_PRINCIPALS as f64,
            with(&["access", "claimants"], (0..=MAX_PRINCIPALS).map(|_| json!("*")).collect()),
            "access.claimants",
        ),
        (
            "PoolSpec/access/claimants/items/maxLength",
            MAX_PRINCIPAL_LEN as f64,
            with(&["access", "claimants"], json!([format!("arn:aws:iam::111111111111:user/{}", x(MAX_PRINCIPAL_LEN))])),
            "access.claimants[0]",
        ),
        (
            "PoolSpec/access/admins/maxItems",
            MAX_PRINCIPALS as f64,
            with(&["access", "admins"], (0..=MAX_PRINCIPALS).map(|_| json!("111111111111")).collect()),
            "access.admins",
        ),
        (
            "PoolSpec/access/admins/items/maxLength",
            MAX_PRINCIPAL_LEN as f64,
            with(&["access", "admins"], json!([format!("arn:aws:iam::111111111111:role/{}", x(MAX_PRINCIPAL_LEN))])),
            "access.admins[0]",
        ),
        (
            "PoolSpec/platform/aws/subnetId/maxLength",
            MAX_CLOUD_ID_LEN as f64,
            with(&[aws[0], aws[1], "subnetId"], json!(x(129))),
            "platform.aws.subnetId",
        ),
        (
            "PoolSpec/platform/aws/launchTemplate/id/maxLength",
            MAX_CLOUD_ID_LEN as f64,
            with(&[aws[0], aws[1], "launchTemplate"], json!({"id": x(129)})),
            "platform.aws.launchTemplate.id",
        ),
        (
            "PoolSpec/platform/aws/launchTemplate/version/maxLength",
            MAX_CLOUD_ID_LEN as f64,
            with(&[aws[0], aws[1], "launchTemplate"], json!({"id": "lt-1", "version": x(129)})),
            "platform.aws.launchTemplate.version",
        ),
        (
            "PoolSpec/platform/aws/machineCount/maximum",
            MAX_MACHINES as f64,
            with(&[aws[0], aws[1], "machineCount"], json!(MAX_MACHINES + 1)),
            "platform.aws.machineCount",
        ),
        (
            "PoolSpec/platform/aws/machineCount/minimum",
            1.0,
            with(&[aws[0], aws[1], "machineCount"], json!(0)),
            "platform.aws.machineCount",
        ),
        (
            "PoolSpec/platform/aws/tags/maxProperties",
            MAX_TAGS as f64,
            with(
                &[aws[0], aws[1], "tags"],
                (0..=MAX_TAGS).map(|i| (format!("k{i}"), json!("v"))).collect::<serde_json::Map<_, _>>().into(),
            ),
            "platform.aws.tags",
        ),
        (
            "PoolSpec/platform/aws/tags/*/maxLength",
            MAX_TAG_VALUE_LEN as f64,
            with(&[aws[0], aws[1], "tags"], json!({"k": x(256)})),
            "platform.aws.tags.k",
        ),
        (
            "PoolSpec/platform/gcp/project/maxLength",
            30.0,
            gcp("project", json!(format!("p{}", x(30)))),
            "platform.gcp.project",
        ),
        ("PoolSpec/platform/gcp/zone/maxLength", 63.0, gcp("zone", json!(x(64))), "platform.gcp.zone"),
        (
            "PoolSpec/platform/gcp/zones/maxItems",
            MAX_ZONES as f64,
            gcp("zones", (0..=MAX_ZONES).map(|i| json!(format!("z{i}"))).collect()),
            "platform.gcp.zones",
        ),
        ("PoolSpec/platform/gcp/zones/items/maxLength", 63.0, gcp("zones", json!([x(64)])), "platform.gcp.zones[0]"),
        (
            "PoolSpec/platform/gcp/instanceTemplate/maxLength",
            MAX_GCP_TEMPLATE_LEN as f64,
            gcp("instanceTemplate", json!(x(MAX_GCP_TEMPLATE_LEN + 1))),
            "platform.gcp.instanceTemplate",
        ),
        (
            "PoolSpec/platform/gcp/machineCount/maximum",
            100.0,
            gcp("machineCount", json!(101)),
            "platform.gcp.machineCount",
        ),
        ("PoolSpec/platform/gcp/machineCount/minimum", 1.0, gcp("machineCount", json!(0)), "platform.gcp.machineCount"),
        (
            "PoolSpec/platform/gcp/credentialsSecret/maxLength",
            MAX_SECRET_ARN_LEN as f64,
            gcp("credentialsSecret", json!(format!("arn:aws:secretsmanager:eu-west-1:123456789012:secret:{}", x(500)))),
            "platform.gcp.credentialsSecret",
        ),
        (
            "PoolSpec/platform/gcp/labels/maxProperties",
            MAX_GCP_LABELS as f64,
            gcp(
                "labels",
                (0..=MAX_GCP_LABELS).map(|i| (format!("k{i}"), json!("v"))).collect::<serde_json::Map<_, _>>().into(),
            ),
            "platform.gcp.labels",
        ),
        ("PoolSpec/platform/gcp/labels/*/maxLength", 63.0, gcp("labels", json!({"k": x(64)})), "platform.gcp.labels.k"),
        (
            "PoolSpec/platform/azure/subscriptionId/maxLength",
            36.0,
            azure("subscriptionId", json!(x(37))),
            "platform.azure.subscriptionId",
        ),
        (
            "PoolSpec/platform/azure/tenantId/maxLength",
            36.0,
            azure("tenantId", json!(x(37))),
            "platform.azure.tenantId",
        ),
        (
            "PoolSpec/platform/azure/location/maxLength",
            MAX_AZURE_LOCATION_LEN as f64,
            azure("location", json!(x(MAX_AZURE_LOCATION_LEN + 1))),
            "platform.azure.location",
        ),
        (
            "PoolSpec/platform/azure/resourceGroupName/maxLength",
            (MAX_RESOURCE_GROUP_LEN - MAX_INFRA_ID_LEN + "{infraId}".len()) as f64,
            azure(
                "resourceGroupName",
                json!(format!("{}{{infraId}}", x(MAX_RESOURCE_GROUP_LEN - MAX_INFRA_ID_LEN + 1))),
            ),
            "platform.azure.resourceGroupName",
        ),
        (
            "PoolSpec/platform/azure/templateUri/maxLength",
            MAX_URL_LEN as f64,
            azure("templateUri", json!(format!("https://t.example.com/{}", x(MAX_URL_LEN - 21)))),
            "platform.azure.templateUri",
        ),
        (
            "PoolSpec/platform/azure/parameters/maxProperties",
            MAX_AZURE_PARAMETERS as f64,
            azure(
                "parameters",
                (0..=MAX_AZURE_PARAMETERS)
                    .map(|i| (format!("p{i}"), json!(1)))
                    .collect::<serde_json::Map<_, _>>()
                    .into(),
            ),
            "platform.azure.parameters",
        ),
        (
            "PoolSpec/platform/azure/credentialsSecret/maxLength",
            MAX_SECRET_ARN_LEN as f64,
            azure(
                "credentialsSecret",
                json!(format!("arn:aws:secretsmanager:eu-west-1:123456789012:secret:{}", x(500))),
            ),
            "platform.azure.credentialsSecret",
        ),
        (
            "PoolSpec/platform/azure/tags/maxProperties",
            MAX_AZURE_TAGS as f64,
            azure(
                "tags",
                (0..=MAX_AZURE_TAGS).map(|i| (format!("k{i}"), json!("v"))).collect::<serde_json::Map<_, _>>().into(),
            ),
            "platform.azure.tags",
        ),
        (
            "PoolSpec/platform/azure/tags/*/maxLength",
            MAX_AZURE_TAG_VALUE_LEN as f64,
            azure("tags", json!({"k": x(MAX_AZURE_TAG_VALUE_LEN + 1)})),
            "platform.azure.tags.k",
        ),
        (
            "PoolSpec/platform/vsphere/server/maxLength",
            259.0,
            vsphere("server", json!(format!("{}.{}.{}.{}:4430", x(63), x(63), x(63), x(63)))),
            "platform.vsphere.server",
        ),
        (
            "PoolSpec/platform/vsphere/datacenter/maxLength",
            80.0,
            vsphere("datacenter", json!(x(81))),
            "platform.vsphere.datacenter",
        ),
        (
            "PoolSpec/platform/vsphere/template/maxLength",
            80.0,
            vsphere("template", json!(x(81))),
            "platform.vsphere.template",
        ),
        (
            "PoolSpec/platform/vsphere/folder/maxLength",
            80.0,
            vsphere("folder", json!(x(81))),
            "platform.vsphere.folder",
        ),
        (
            "PoolSpec/platform/vsphere/resourcePool/maxLength",
            80.0,
            vsphere("resourcePool", json!(x(81))),
            "platform.vsphere.resourcePool",
        ),
        (
            "PoolSpec/platform/vsphere/datastore/maxLength",
            80.0,
            vsphere("datastore", json!(x(81))),
            "platform.vsphere.datastore",
        ),
        (
            "PoolSpec/platform/vsphere/machineCount/maximum",
            100.0,
            vsphere("machineCount", json!(101)),
            "platform.vsphere.machineCount",
        ),
        (
            "PoolSpec/platform/vsphere/machineCount/minimum",
            1.0,
            vsphere("machineCount", json!(0)),
            "platform.vsphere.machineCount",
        ),
        (
            "PoolSpec/platform/vsphere/credentialsSecret/maxLength",
            MAX_SECRET_ARN_LEN as f64,
            vsphere(
                "credentialsSecret",
                json!(format!("arn:aws:secretsmanager:eu-west-1:123456789012:secret:{}", x(500))),
            ),
            "platform.vsphere.credentialsSecret",
        ),
        (
            "PoolSpec/platform/vsphere/caBundle/maxLength",
            MAX_CA_BUNDLE_LEN as f64,
            vsphere("caBundle", json!(x(MAX_CA_BUNDLE_LEN + 1))),
            "platform.vsphere.caBundle",
        ),
        (
            "PoolSpec/readiness/https/url/maxLength",
            MAX_URL_LEN as f64,
            probe(json!({"url": format!("https://t.example.com/{}", x(MAX_URL_LEN - 21))})),
            "readiness.https.url",
        ),
        (
            "PoolSpec/readiness/https/caBundle/maxLength",
            MAX_CA_BUNDLE_LEN as f64,
            probe(json!({"url": "https://a.example.com", "caBundle": format!("-----BEGIN{}", x(MAX_CA_BUNDLE_LEN))})),
            "readiness.https.caBundle",
        ),
        (
            "PoolSpec/readiness/https/expectedStatus/maximum",
            599.0,
            probe(json!({"url": "https://a.example.com", "expectedStatus": 600})),
            "readiness.https.expectedStatus",
        ),
        (
            "PoolSpec/readiness/https/expectedStatus/minimum",
            100.0,
            probe(json!({"url": "https://a.example.com", "expectedStatus": 99})),
            "readiness.https.expectedStatus",
        ),
        (
            "PoolSpec/readiness/kubernetes/credentials/maxLength",
            MAX_SECRET_ARN_LEN as f64,
            kube(
                json!({"credentials": format!("arn:aws:secretsmanager:eu-west-1:123456789012:secret:{{infraId}}{}", x(500))}),
            ),
            "readiness.kubernetes.credentials",
        ),
        (
            "PoolSpec/readiness/kubernetes/server/maxLength",
            MAX_URL_LEN as f64,
            kube(
                json!({"credentials": "{outputs.k}", "server": format!("https://t.example.com/{}", x(MAX_URL_LEN - 21))}),
            ),
            "readiness.kubernetes.server",
        ),
        (
            "PoolSpec/readiness/kubernetes/caBundle/maxLength",
            MAX_CA_BUNDLE_LEN as f64,
            kube(json!({"credentials": "{outputs.k}", "caBundle": format!("-----BEGIN{}", x(MAX_CA_BUNDLE_LEN))})),
            "readiness.kubernetes.caBundle",
        ),
        (
            "PoolSpec/provisioner/webhook/url/maxLength",
            MAX_URL_LEN as f64,
            installer(&format!("https://t.example.com/{}", x(MAX_URL_LEN - 21)), INSTALLER_KEY),
            "provisioner.webhook.url",
        ),
        (
            "PoolSpec/provisioner/webhook/secret/maxLength",
            MAX_SECRET_ARN_LEN as f64,
            installer(
                "https://installer.example.com",
                &format!("arn:aws:secretsmanager:eu-west-1:123456789012:secret:{}", x(500)),
            ),
            "provisioner.webhook.secret",
        ),
        (
            "PoolSpec/platform/fake/installFailureRate/maximum",
            1.0,
            json!({"size": 1, "platform": {"fake": {"installFailureRate": 1.5}}}),
            "platform.fake.installFailureRate",
        ),
        (
            "PoolSpec/platform/fake/installFailureRate/minimum",
            0.0,
            json!({"size": 1, "platform": {"fake": {"installFailureRate": -0.5}}}),
            "platform.fake.installFailureRate",
        ),
        (
            "PoolSpec/platform/fake/resumeFailureRate/maximum",
            1.0,
            json!({"size": 1, "platform": {"fake": {"resumeFailureRate": 1.5}}}),
            "platform.fake.resumeFailureRate",
        ),
        (
            "PoolSpec/platform/fake/resumeFailureRate/minimum",
            0.0,
            json!({"size": 1, "platform": {"fake": {"resumeFailureRate": -0.5}}}),
            "platform.fake.resumeFailureRate",
        ),
        (
            "PoolSpec/platform/maxProperties",
            1.0,
            json!({"size": 1, "platform": {"fake": {}, "aws": {"region": "r", "imageId": "a", "instanceType": "t"}}}),
            "platform",
        ),
        (
            "PoolSpec/schedules/maxItems",
            MAX_SCHEDULES as f64,
            with(&["schedules"], (0..=MAX_SCHEDULES).map(|_| schedule(json!({}))[0].clone()).collect()),
            "schedules",
        ),
        (
            "PoolSpec/schedules/items/name/maxLength",
            63.0,
            with(&["schedules"], schedule(json!({"name": x(64)}))),
            "schedules[0].name",
        ),
        (
            "PoolSpec/schedules/items/cron/maxLength",
            MAX_CRON_LEN as f64,
            with(&["schedules"], schedule(json!({"cron": format!("0 8 * * 1-5{}", " ".repeat(60))}))),
            "schedules[0].cron",
        ),
        (
            "PoolSpec/schedules/items/timeZone/maxLength",
            MAX_TIME_ZONE_LEN as f64,
            with(&["schedules"], schedule(json!({"timeZone": x(65)}))),
            "schedules[0].timeZone",
        ),
        (
            "PoolSpec/schedules/items/size/maximum",
            m as f64,
            with(&["schedules"], schedule(json!({"size": m + 1}))),
            "schedules[0].size",
        ),
        (
            "PoolSpec/schedules/items/size/minimum",
            0.0,
            with(&["schedules"], schedule(json!({"size": -1}))),
            "schedules[0].size",
        ),
        (
            "PoolSpec/schedules/items/runningCount/maximum",
            m as f64,
            with(&["schedules"], schedule(json!({"runningCount": m + 1}))),
            "schedules[0].runningCount",
        ),
        (
            "PoolSpec/schedules/items/runningCount/minimum",
            0.0,
            with(&["schedules"], schedule(json!({"runningCount": -1}))),
            "schedules[0].runningCount",
        ),
        (
            "PoolSpec/adaptiveRunningCount/instantShare/maximum",
            1.0,
            with(&["adaptiveRunningCount"], json!({"instantShare": 1.0})),
            "adaptiveRunningCount.instantShare",
        ),
        (
            "PoolSpec/adaptiveRunningCount/instantShare/minimum",
            0.0,
            with(&["adaptiveRunningCount"], json!({"instantShare": 0.0})),
            "adaptiveRunningCount.instantShare",
        ),
        (
            "PoolSpec/adaptiveRunningCount/forecast/halfLifeWeeks/maximum",
            apiary_planner::forecast::MAX_HALF_LIFE_WEEKS,
            with(&["adaptiveRunningCount"], json!({"instantShare": 0.9, "forecast": {"halfLifeWeeks": 8.5}})),
            "adaptiveRunningCount.forecast.halfLifeWeeks",
        ),
        (
            "PoolSpec/adaptiveRunningCount/forecast/halfLifeWeeks/minimum",
            0.0,
            with(&["adaptiveRunningCount"], json!({"instantShare": 0.9, "forecast": {"halfLifeWeeks": 0.0}})),
            "adaptiveRunningCount.forecast.halfLifeWeeks",
        ),
        (
            "PoolSpec/adaptiveRunningCount/forecast/timeZone/maxLength",
            MAX_TIME_ZONE_LEN as f64,
            with(&["adaptiveRunningCount"], json!({"instantShare": 0.9, "forecast": {"timeZone": x(65)}})),
            "adaptiveRunningCount.forecast.timeZone",
        ),
        (
            "PoolSpec/resumeCanaries/atATime/maximum",
            apiary_planner::canary::MAX_AT_A_TIME as f64,
            with(&["resumeCanaries"], json!({"after": "72h", "atATime": 101})),
            "resumeCanaries.atATime",
        ),
        (
            "PoolSpec/resumeCanaries/atATime/minimum",
            1.0,
            with(&["resumeCanaries"], json!({"after": "72h", "atATime": 0})),
            "resumeCanaries.atATime",
        ),
        (
            "PoolSpec/inventory/clusterDeployments/items/parameters/maxProperties",
            MAX_ENTRY_PARAMETERS as f64,
            with(
                &["inventory"],
                json!({"clusterDeployments": [{"name": "a", "parameters":
                    (0..=MAX_ENTRY_PARAMETERS).map(|i| (format!("p{i}"), json!("v"))).collect::<serde_json::Map<_, _>>()}]}),
            ),
            "inventory.clusterDeployments[0].parameters",
        ),
        (
            "PoolSpec/inventory/clusterDeployments/items/parameters/*/maxLength",
            MAX_LABEL_VALUE_LEN as f64,
            with(
                &["inventory"],
                json!({"clusterDeployments": [{"name": "a", "parameters": {"apiVIP": x(MAX_LABEL_VALUE_LEN + 1)}}]}),
            ),
            "inventory.clusterDeployments[0].parameters.apiVIP",
        ),
        (
            "PoolSpec/notify/maxItems",
            apiary_planner::notify::MAX_HOOKS as f64,
            with(&["notify"], json!(vec![hook("https://hooks.example.com/a", INSTALLER_KEY, json!([])); 5])),
            "notify",
        ),
        (
            "PoolSpec/notify/items/url/maxLength",
            MAX_URL_LEN as f64,
            with(
                &["notify"],
                json!([hook(&format!("https://h.example.com/{}", x(MAX_URL_LEN - 20)), INSTALLER_KEY, json!([]))]),
            ),
            "notify[0].url",
        ),
        (
            "PoolSpec/notify/items/secret/maxLength",
            MAX_SECRET_ARN_LEN as f64,
            with(
                &["notify"],
                json!([hook(
                    "https://hooks.example.com/a",
                    &format!("arn:aws:secretsmanager:eu-west-1:123456789012:secret:{}", x(500)),
                    json!([])
                )]),
            ),
            "notify[0].secret",
        ),
        (
            "PoolSpec/notify/items/events/maxItems",
            apiary_planner::notify::NoticeKind::ALL.len() as f64,
            with(
                &["notify"],
                json!([hook(
                    "https://hooks.example.com/a",
                    INSTALLER_KEY,
                    json!(["claim.assigned", "claim.released", "claim.expired", "cluster.broken", "claim.assigned"])
                )]),
            ),
            "notify[0].events",
        ),
        (
            "PoolSpec/resumeCanaries/timeZone/maxLength",
            MAX_TIME_ZONE_LEN as f64,
            with(&["resumeCanaries"], json!({"after": "72h", "timeZone": x(65)})),
            "resumeCanaries.timeZone",
        ),
    ];
    let mut tested: Vec<&str> = cases.iter().map(|c| c.0).collect();
    tested.sort_unstable();
    let mut found: Vec<&str> = declared.iter().map(|(p, _)| p.as_str()).collect();
    found.sort_unstable();
    assert_eq!(found, tested, "the document's bounds and the tested ones");
    let w = World::new(Utc.with_ymd_and_hms(2026, 11, 23, 9, 0, 0).single().expect("time"));
    let deps = w.default_deps(900);
    for (path, want, spec, field) in cases {
        let value = declared.iter().find(|(p, _)| p == path).map(|(_, v)| *v);
        assert_eq!(value, Some(want), "{path}: the document and the planner disagree");
        let req = claim_api::api_request("PUT", "/pools/p", Some(ADMIN), spec.to_string().into_bytes());
        let res = claim_api::handle(&deps, req).await;
        let status = res.status().as_u16();
        let body: Value = match res.into_body() {
            lambda_http::Body::Text(t) => serde_json::from_str(&t).unwrap_or(Value::Null),
            _ => Value::Null,
        };
        let fields: Vec<&str> =
            body["fields"].as_array().into_iter().flatten().filter_map(|f| f["field"].as_str()).collect();
        assert_eq!(status, 400, "{path}: {body}");
        assert!(fields.contains(&field), "{path}: want {field}, got {fields:?}");
    }
}
