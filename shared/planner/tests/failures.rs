//! The install failure table: openshift-install's own error and fatal lines, and the clouds' errors it relays, each
//! classified as the class its phrase names; a pool's `installRetryReasons` checked by name.

use apiary_planner::failure::{classify, FailureReason, Retried};
use apiary_planner::validate::validate_spec;

use FailureReason::*;

/// (class, a line as openshift-install logs it, or as the installer relays a cloud's error).
const LINES: &[(FailureReason, &str)] = &[
    (Capacity, "level=error msg=Error: creating EC2 Instance: InsufficientInstanceCapacity: We currently do not have sufficient m6i.xlarge capacity in the Availability Zone you requested (us-east-1a). Our system will be working on provisioning additional capacity."),
    (Capacity, "level=error msg=Error: Error waiting for instance to create: The zone 'projects/ci/zones/us-central1-a' does not have enough resources available to fulfill the request. '(resource type:compute)'. ZONE_RESOURCE_POOL_EXHAUSTED"),
    (Capacity, "level=error msg=Code=\"ZonalAllocationFailed\" Message=\"Allocation failed. We do not have sufficient capacity for the requested VM size in this zone.\""),
    (Capacity, "level=error msg=Code=\"SkuNotAvailable\" Message=\"The requested size for resource is currently not available in location 'westeurope' zones '1'\""),
    (Quota, "level=fatal msg=failed to fetch Cluster: failed to fetch dependency of \"Cluster\": failed to generate asset \"Platform Quota Check\": error(MissingQuota): ec2/L-1216C47A is not available in us-east-1 because the required number of resources (36) is more than the limit of (32)"),
    (Quota, "level=error msg=Error: creating EC2 Instance: VcpuLimitExceeded: You have requested more vCPU capacity than your current vCPU limit of 32 allows for the instance bucket that the specified instance type belongs to."),
    (Quota, "level=error msg=Error: creating EC2 NAT Gateway: NatGatewayLimitExceeded: The maximum number of NAT Gateways has been reached."),
    (Quota, "level=error msg=Error: creating EC2 EIP: AddressLimitExceeded: The maximum number of addresses has been reached."),
    (Quota, "level=error msg=Error: googleapi: Error 403: Quota 'SSD_TOTAL_GB' exceeded. Limit: 500.0 in region us-central1., quotaExceeded"),
    (Quota, "level=fatal msg=failed to fetch Cluster: failed to generate asset \"Platform Quota Check\": error(MissingQuota): compute.googleapis.com/cpus is not available in us-central1 because the required number of resources (28) is more than remaining quota of 24"),
    (Quota, "level=error msg=Code=\"OperationNotAllowed\" Message=\"Operation could not be completed as it results in exceeding approved Total Regional Cores quota.\""),
    (Credentials, "level=error msg=Error: error configuring Terraform AWS Provider: error validating provider credentials: error calling sts:GetCallerIdentity: InvalidClientTokenId: The security token included in the request is invalid."),
    (Credentials, "level=fatal msg=failed to fetch Cluster: failed to fetch dependency of \"Cluster\": failed to generate asset \"Platform Permissions Check\": validate AWS credentials: current credentials insufficient for performing cluster installation"),
    (Credentials, "level=error msg=Error: creating EC2 VPC: UnauthorizedOperation: You are not authorized to perform this operation. Encoded authorization failure message: 4vZ"),
    (Credentials, "level=fatal msg=failed to fetch Metadata: failed to load asset \"Install Config\": AADSTS7000215: Invalid client secret provided."),
    (Credentials, "level=error msg=Code=\"AuthorizationFailed\" Message=\"The client 'b3f1' does not have authorization to perform action 'Microsoft.Resources/deployments/write'\""),
    (Dns, "level=error msg=Error: no matching Route53Zone found"),
    (Dns, "level=error msg=Error: [ERR]: Error building changeset: InvalidChangeBatch: [Tried to create resource record set [name='api.ci.example.com.', type='A'] but it already exists]"),
    (Dns, "level=error msg=Error: error creating Route53 Hosted Zone: TooManyHostedZones: Limits Exceeded: MAX_HOSTED_ZONES_BY_OWNER"),
    (BootstrapTimeout, "level=error msg=Bootstrap failed to complete: timed out waiting for the condition\nlevel=fatal msg=Bootstrap failed to complete"),
    (BootstrapTimeout, "level=error msg=Attempted to gather ClusterOperator status after wait failure: listing ClusterOperator objects\nlevel=fatal msg=failed waiting for Kubernetes API: Get \"https://api.ci.example.com:6443/version\": dial tcp: i/o timeout"),
    (BootstrapTimeout, "level=fatal msg=failed to initialize the cluster: Cluster operator authentication is not available"),
    (Configuration, "level=fatal msg=failed to fetch Metadata: failed to load asset \"Install Config\": failed to create install config: invalid \"install-config.yaml\" file: [platform.aws.region: Unsupported value: \"mars-1\"]"),
    (Configuration, "level=fatal msg=failed to fetch Master Machines: failed to load asset \"Install Config\": controlPlane.replicas: Invalid value: 2: number of control plane replicas must be positive"),
    (Unknown, "level=error msg=Error: Provider produced inconsistent result after apply"),
    (Unknown, "exit status 3"),
    // An installer's answer Apiary cannot use is tried again: the next attempt may answer well.
    (Unknown, "the installer's answer is not usable: infraId \"Not A Label\" is not a DNS label"),
    (Unknown, ""),
];

#[test]
fn each_line_is_classified_as_the_class_its_phrase_names() {
    for (want, line) in LINES {
        assert_eq!(classify(line), *want, "{line}");
    }
    // Every class is shown at least once, so a class the table lost would fail here.
    for class in FailureReason::ALL {
        assert!(LINES.iter().any(|(c, _)| *c == class), "no line of {class:?}");
    }
}

#[test]
fn the_transient_classes_are_retried_by_default_and_a_pool_may_name_its_own() {
    let default = Retried::from_names(None);
    let retried: Vec<FailureReason> = FailureReason::ALL.into_iter().filter(|r| default.contains(*r)).collect();
    assert_eq!(retried, [Capacity, BootstrapTimeout, Unknown]);
    let own = Retried::from_names(Some(&["Quota".to_owned(), "DNS".to_owned()]));
    assert!(own.contains(Quota) && own.contains(Dns) && !own.contains(Capacity) && !own.contains(Unknown));
    assert!(!Retried::from_names(Some(&[])).contains(Unknown), "an empty list retries nothing");
    for class in FailureReason::ALL {
        assert_eq!(FailureReason::parse(class.name()), Some(class));
    }
}

#[test]
fn install_retry_reasons_are_checked_by_name() {
    let mut spec = valid_spec();
    spec.install_retry_reasons = Some(vec!["Capacity".into(), "Quotas".into(), "Capacity".into()]);
    let errors = validate_spec(&spec).expect_err("refused");
    let fields: Vec<(&str, &str)> = errors.iter().map(|e| (e.field.as_str(), e.message.as_str())).collect();
    assert_eq!(fields.len(), 2, "{fields:?}");
    assert_eq!(fields[0].0, "installRetryReasons[1]");
    assert!(fields[0].1.contains("\"Quotas\" is not a failure reason: one of Capacity, Quota, Credentials, DNS"));
    assert_eq!(fields[1], ("installRetryReasons[2]", "Capacity is listed twice"));
    spec.install_retry_reasons = Some(FailureReason::ALL.iter().map(|r| r.name().to_owned()).collect());
    assert_eq!(validate_spec(&spec), Ok(()));
}

/// A valid pool spec on the fake platform.
fn valid_spec() -> apiary_planner::PoolSpec {
    apiary_planner::PoolSpec::new(2, apiary_planner::Platform::Fake(apiary_planner::FakePlatform::default()))
}
