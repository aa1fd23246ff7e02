//! Each platform's checks: a valid platform of each kind, every bad field named with its path, and the fields
//! that say where a pool's machines live held across an update.

use crate::duration::GoDuration;
use crate::model::{Platform, PoolSpec};
use crate::validate::{limits, validate_spec, validate_update};

fn fields(spec: &PoolSpec) -> Vec<String> {
    validate_spec(spec).err().unwrap_or_default().into_iter().map(|e| e.field).collect()
}

#[test]
fn aws_needs_a_region_and_an_image_or_a_launch_template_unless_an_installer_launches() {
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
            role_arn: None,
        }),
    );
    assert_eq!(
        fields(&s),
        ["platform.aws.region", "platform.aws.imageId", "platform.aws.instanceType", "platform.aws.machineCount"]
    );
    // An installer behind a webhook launches the machines: the pool names only where they are and how many.
    let mut installed = s;
    installed.provisioner = Some(crate::model::ProvisionerSpec {
        webhook: Some(crate::model::WebhookProvisioner {
            url: "https://installer.example.com/apiary".into(),
            secret: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:apiary/installer-AbCdEf".into(),
        }),
    });
    assert_eq!(fields(&installed), ["platform.aws.region", "platform.aws.machineCount"]);
}

fn aws_with_role(role: Option<&str>) -> PoolSpec {
    PoolSpec::new(
        1,
        Platform::Aws(crate::model::AwsPlatform {
            region: "eu-west-1".into(),
            launch_template: None,
            image_id: Some("ami-0123456789abcdef0".into()),
            instance_type: Some("m6i.xlarge".into()),
            machine_count: 3,
            subnet_id: None,
            tags: Default::default(),
            role_arn: role.map(String::from),
        }),
    )
}

#[test]
fn an_aws_role_is_an_iam_role_arn() {
    for arn in [
        "arn:aws:iam::210987654321:role/apiary-member-ci",
        "arn:aws:iam::210987654321:role/teams/a/apiary-member-ci",
        "arn:aws-us-gov:iam::210987654321:role/apiary-member-ci",
    ] {
        assert_eq!(validate_spec(&aws_with_role(Some(arn))), Ok(()), "{arn}");
    }
    for arn in [
        "apiary-member-ci",
        "arn:aws:iam::210987654321:user/apiary-member-ci",
        "arn:aws:iam::21098765432:role/apiary-member-ci",
        "arn:aws:iam:eu-west-1:210987654321:role/apiary-member-ci",
        "arn:aws:sts::210987654321:assumed-role/apiary-member-ci/s",
        "arn:aws:iam::210987654321:role/",
        "arn:aws:iam::210987654321:role/has space",
    ] {
        assert_eq!(fields(&aws_with_role(Some(arn))), ["platform.aws.roleArn"], "{arn}");
    }
    let long = format!("arn:aws:iam::210987654321:role/{}/r", "p".repeat(limits::MAX_ROLE_ARN_LEN));
    assert_eq!(fields(&aws_with_role(Some(&long))), ["platform.aws.roleArn"]);
}

#[test]
fn an_aws_pool_keeps_its_account_but_may_rename_its_role() {
    let a = "arn:aws:iam::210987654321:role/apiary-member-ci";
    let renamed = "arn:aws:iam::210987654321:role/apiary-member-ci-2";
    let elsewhere = "arn:aws:iam::111111111111:role/apiary-member-ci";
    assert_eq!(validate_update(&aws_with_role(Some(a)), &aws_with_role(Some(renamed))), Ok(()));
    for (old, new) in [(Some(a), Some(elsewhere)), (None, Some(a)), (Some(a), None)] {
        let errors = validate_update(&aws_with_role(old), &aws_with_role(new)).expect_err("moved");
        assert_eq!(errors.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(), ["platform.aws.roleArn"]);
    }
}

fn gcp() -> crate::model::GcpPlatform {
    serde_json::from_value(serde_json::json!({
        "project": "ci-clusters-1",
        "zone": "europe-west1-b",
        "instanceTemplate": "apiary-node",
        "credentialsSecret": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:apiary/gcp-ci-AbCdEf",
    }))
    .expect("gcp platform")
}

#[test]
fn a_gcp_platform_is_valid_with_a_project_a_zone_a_template_and_a_secret() {
    assert_eq!(validate_spec(&PoolSpec::new(1, Platform::Gcp(gcp()))), Ok(()));
    for template in [
        "global/instanceTemplates/apiary-node",
        "projects/ci-clusters-1/global/instanceTemplates/apiary-node",
        "projects/ci-clusters-1/regions/europe-west1/instanceTemplates/apiary-node",
    ] {
        let g = crate::model::GcpPlatform { instance_template: template.into(), ..gcp() };
        assert_eq!(validate_spec(&PoolSpec::new(1, Platform::Gcp(g))), Ok(()), "{template}");
    }
    let g = crate::model::GcpPlatform { zone: None, zones: vec!["a-b1-c".into(), "a-b1-d".into()], ..gcp() };
    assert_eq!(validate_spec(&PoolSpec::new(1, Platform::Gcp(g))), Ok(()));
}

#[test]
fn a_gcp_pool_whose_installer_makes_the_machines_names_no_template() {
    let g = crate::model::GcpPlatform { instance_template: String::new(), ..gcp() };
    let mut spec = PoolSpec::new(1, Platform::Gcp(g));
    assert_eq!(fields(&spec), ["platform.gcp.instanceTemplate"], "Apiary makes them: it needs the template");
    let secret = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:apiary/installer-AbCdEf";
    let webhook =
        Some(crate::model::WebhookProvisioner { url: "https://installer.example.com".into(), secret: secret.into() });
    spec.provisioner = Some(crate::model::ProvisionerSpec { webhook });
    assert_eq!(validate_spec(&spec), Ok(()));
    // Absent, it is not written out: the pool's version is what it would be had it never been a field.
    assert!(serde_json::to_value(&spec.platform).expect("json")["gcp"].get("instanceTemplate").is_none());
}

#[test]
fn every_bad_gcp_field_is_named() {
    let g = crate::model::GcpPlatform {
        project: "Bad Project".into(),
        zone: Some("Zone_A".into()),
        zones: vec!["europe-west1-c".into(), "europe-west1-c".into()],
        instance_template: "global/images/x".into(),
        machine_count: 0,
        credentials_secret: "arn:aws:s3:::bucket".into(),
        labels: [("team".to_owned(), "Platform!".to_owned()), ("apiary-pool".to_owned(), "x".to_owned())]
            .into_iter()
            .collect(),
    };
    assert_eq!(
        fields(&PoolSpec::new(1, Platform::Gcp(g))),
        [
            "platform.gcp.project",
            "platform.gcp.zone",
            "platform.gcp.zones[1]",
            "platform.gcp.instanceTemplate",
            "platform.gcp.machineCount",
            "platform.gcp.credentialsSecret",
            "platform.gcp.labels",
            "platform.gcp.labels.team",
        ]
    );
    let none = crate::model::GcpPlatform { zone: None, ..gcp() };
    assert_eq!(fields(&PoolSpec::new(1, Platform::Gcp(none))), ["platform.gcp.zone"]);
}

fn azure() -> crate::model::AzurePlatform {
    serde_json::from_value(serde_json::json!({
        "subscriptionId": "00000000-0000-0000-0000-0000000000aa",
        "tenantId": "11111111-2222-3333-4444-555555555555",
        "location": "westeurope",
        "template": {"parameters": {"infraId": {"type": "string"}}, "resources": []},
        "credentialsSecret": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:apiary/azure-AbCdEf",
    }))
    .expect("azure platform")
}

#[test]
fn an_azure_platform_is_valid_with_ids_a_location_a_template_and_a_secret() {
    let a = azure();
    assert_eq!(a.resource_group("ci-x7k2p"), "ci-x7k2p-rg", "openshift-install's resource group by default");
    assert_eq!(validate_spec(&PoolSpec::new(1, Platform::Azure(a))), Ok(()));
    let mut by_uri = azure();
    by_uri.template = None;
    by_uri.template_uri = Some("https://templates.example.com/cluster.json".into());
    assert_eq!(validate_spec(&PoolSpec::new(1, Platform::Azure(by_uri))), Ok(()));
}

#[test]
fn every_bad_azure_field_is_named() {
    let mut a = azure();
    a.subscription_id = "not-a-guid".into();
    a.tenant_id = "11111111-2222-3333-4444-55555555555z".into();
    a.location = "West Europe".into();
    a.resource_group_name = "shared-rg".into();
    a.template = Some(serde_json::json!({"resources": []}));
    a.parameters.insert("infraId".into(), serde_json::json!("x"));
    a.parameters.insert("bad name".into(), serde_json::json!(1));
    a.credentials_secret = "apiary/azure".into();
    a.tags.insert("apiary-pool".into(), "x".into());
    a.tags.insert("team".into(), "x".repeat(257));
    assert_eq!(
        fields(&PoolSpec::new(1, Platform::Azure(a))),
        [
            "platform.azure.subscriptionId",
            "platform.azure.tenantId",
            "platform.azure.location",
            "platform.azure.resourceGroupName",
            "platform.azure.template.parameters.infraId",
            "platform.azure.parameters",
            "platform.azure.parameters.infraId",
            "platform.azure.credentialsSecret",
            "platform.azure.tags",
            "platform.azure.tags.team",
        ]
    );
    let mut both = azure();
    both.template_uri = Some("http://plain.example.com/t.json".into());
    assert_eq!(fields(&PoolSpec::new(1, Platform::Azure(both))), ["platform.azure.template"]);
    let mut plain = azure();
    plain.template = None;
    plain.template_uri = Some("http://plain.example.com/t.json".into());
    assert_eq!(fields(&PoolSpec::new(1, Platform::Azure(plain))), ["platform.azure.templateUri"]);
    let mut long = azure();
    long.resource_group_name = format!("{}-{{infraId}}", "r".repeat(63));
    assert_eq!(fields(&PoolSpec::new(1, Platform::Azure(long))), ["platform.azure.resourceGroupName"]);
}

fn vsphere() -> crate::model::VspherePlatform {
    serde_json::from_value(serde_json::json!({
        "server": "vcenter.example.com",
        "datacenter": "DC1",
        "template": "rhcos-4.16",
        "folder": "ci-clusters",
        "machineCount": 3,
        "credentialsSecret": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:apiary/vsphere-AbCdEf",
    }))
    .expect("vsphere platform")
}

#[test]
fn a_vsphere_platform_is_valid_with_a_server_names_and_a_secret() {
    let v = vsphere();
    assert_eq!(v.shutdown_grace(), crate::model::DEFAULT_SHUTDOWN_GRACE);
    assert_eq!(validate_spec(&PoolSpec::new(1, Platform::Vsphere(v))), Ok(()));
    let mut port = vsphere();
    port.server = "10.0.0.5:8443".into();
    port.ca_bundle = Some("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".into());
    port.shutdown_grace_period = Some(GoDuration::new("2m"));
    assert_eq!(validate_spec(&PoolSpec::new(1, Platform::Vsphere(port))), Ok(()));
}

#[test]
fn every_bad_vsphere_field_is_named() {
    let mut v = vsphere();
    v.server = "https://vcenter.example.com/api".into();
    v.datacenter = String::new();
    v.template = "a/b".into();
    v.folder = " ci".into();
    v.resource_pool = Some("x".repeat(81));
    v.datastore = Some("ds1".into());
    v.machine_count = 0;
    v.credentials_secret = "secret".into();
    v.ca_bundle = Some("not a certificate".into());
    v.shutdown_grace_period = Some(GoDuration::new("0s"));
    assert_eq!(
        fields(&PoolSpec::new(1, Platform::Vsphere(v))),
        [
            "platform.vsphere.server",
            "platform.vsphere.datacenter",
            "platform.vsphere.template",
            "platform.vsphere.folder",
            "platform.vsphere.resourcePool",
            "platform.vsphere.machineCount",
            "platform.vsphere.credentialsSecret",
            "platform.vsphere.caBundle",
            "platform.vsphere.shutdownGracePeriod",
        ]
    );
}

#[test]
fn where_machines_live_cannot_change_and_the_rest_can() {
    let old = PoolSpec::new(1, Platform::Azure(azure()));
    let mut moved = azure();
    moved.subscription_id = "00000000-0000-0000-0000-0000000000bb".into();
    moved.resource_group_name = "apiary-{infraId}".into();
    moved.location = "northeurope".into();
    let errors = validate_update(&old, &PoolSpec::new(1, Platform::Azure(moved))).expect_err("moved");
    let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields, ["platform.azure.subscriptionId", "platform.azure.resourceGroupName"]);
    let mut reshaped = azure();
    reshaped.location = "northeurope".into();
    reshaped.tags.insert("team".into(), "ci".into());
    assert_eq!(validate_update(&old, &PoolSpec::new(4, Platform::Azure(reshaped))), Ok(()));
    let to_vsphere = validate_update(&old, &PoolSpec::new(1, Platform::Vsphere(vsphere()))).expect_err("kind");
    assert_eq!(to_vsphere[0].field, "platform");
    let mut elsewhere = vsphere();
    elsewhere.server = "vcenter2.example.com".into();
    let v = PoolSpec::new(1, Platform::Vsphere(vsphere()));
    let errors = validate_update(&v, &PoolSpec::new(1, Platform::Vsphere(elsewhere))).expect_err("moved");
    assert_eq!(errors[0].field, "platform.vsphere.server");
    assert!(errors[0].message.contains("vcenter.example.com"), "{}", errors[0].message);
}
