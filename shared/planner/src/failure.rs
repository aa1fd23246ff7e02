//! Why an install failed, in one word: the installer's answer (for the reference installer, openshift-install's
//! error and fatal lines) classified by [`classify`], a table of the phrases the clouds and openshift-install write.
//! A pool's `installRetryReasons` says which classes are tried again ([`Retried`]; by default the transient ones:
//! capacity, a bootstrap that timed out, and what the table does not know); a failure of another class stops the
//! cluster's provisioning at once, saying why in its condition, the trail and the `cluster.broken` notification.

use serde::{Deserialize, Serialize};

/// The class of an install failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum FailureReason {
    /// The cloud has no machines of the kind asked for, for now (EC2's InsufficientInstanceCapacity, GCP's
    /// exhausted zones, Azure's allocation failures).
    Capacity,
    /// An account limit: vCPUs, addresses, networks, disks, load balancers.
    Quota,
    /// The installer's credentials are refused, expired, or lack a permission.
    Credentials,
    /// The base domain's zone is missing, or a record the install makes exists already.
    Dns,
    /// The cluster did not come up: bootstrap, or the Kubernetes API, timed out.
    BootstrapTimeout,
    /// The install-config, a manifest, or the installer's answer is not valid.
    Configuration,
    /// None of the above.
    Unknown,
}

impl FailureReason {
    /// Every class, in the order `installRetryReasons` lists them.
    pub const ALL: [Self; 7] = [
        Self::Capacity,
        Self::Quota,
        Self::Credentials,
        Self::Dns,
        Self::BootstrapTimeout,
        Self::Configuration,
        Self::Unknown,
    ];

    /// The name a pool spec's `installRetryReasons` uses.
    pub fn name(self) -> &'static str {
        match self {
            Self::Capacity => "Capacity",
            Self::Quota => "Quota",
            Self::Credentials => "Credentials",
            Self::Dns => "DNS",
            Self::BootstrapTimeout => "BootstrapTimeout",
            Self::Configuration => "Configuration",
            Self::Unknown => "Unknown",
        }
    }

    /// The class `installRetryReasons` names by `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.name() == name)
    }

    /// The reason of the ProvisionStopped condition of a cluster whose install failed for this class and is not
    /// tried again.
    pub fn condition_reason(self) -> &'static str {
        match self {
            Self::Capacity => "InsufficientCapacity",
            Self::Quota => "QuotaExceeded",
            Self::Credentials => "InvalidCredentials",
            Self::Dns => "DNSFailure",
            Self::BootstrapTimeout => "BootstrapTimedOut",
            Self::Configuration => "InvalidConfiguration",
            Self::Unknown => "InstallFailed",
        }
    }

    /// What a person reads for this class.
    pub fn words(self) -> &'static str {
        match self {
            Self::Capacity => "the cloud had no capacity for the machines",
            Self::Quota => "an account quota was exceeded",
            Self::Credentials => "the installer's credentials were refused",
            Self::Dns => "the base domain's DNS is not as the install needs it",
            Self::BootstrapTimeout => "the cluster did not come up in time",
            Self::Configuration => "the install's configuration is not valid",
            Self::Unknown => "the install failed",
        }
    }
}

/// The classes tried again after a failure: a set of [`FailureReason`]s, kept in a byte so the power step's
/// limits stay `Copy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retried(u8);

impl Retried {
    /// The default: the transient classes (capacity comes back, a bootstrap may succeed the next time, and a
    /// failure nobody has named is given the benefit of the doubt).
    pub const TRANSIENT: Self =
        Self::of(&[FailureReason::Capacity, FailureReason::BootstrapTimeout, FailureReason::Unknown]);

    /// The set of `reasons`.
    pub const fn of(reasons: &[FailureReason]) -> Self {
        let mut bits = 0u8;
        let mut i = 0;
        while i < reasons.len() {
            bits |= 1 << reasons[i] as u8;
            i += 1;
        }
        Self(bits)
    }

    /// The set a pool spec's `installRetryReasons` names (unknown names are the validator's to refuse; here they
    /// are left out); the default when the spec names none.
    pub fn from_names(names: Option<&[String]>) -> Self {
        match names {
            None => Self::TRANSIENT,
            Some(names) => {
                let reasons: Vec<FailureReason> = names.iter().filter_map(|n| FailureReason::parse(n)).collect();
                Self::of(&reasons)
            }
        }
    }

    /// Whether a failure of class `reason` is tried again.
    pub fn contains(self, reason: FailureReason) -> bool {
        self.0 & (1 << reason as u8) != 0
    }
}

impl Default for Retried {
    fn default() -> Self {
        Self::TRANSIENT
    }
}

/// The phrases each class is known by, as the clouds' APIs and openshift-install write them (case as written),
/// checked in this order: the first phrase found in the message names its class.
const PHRASES: &[(FailureReason, &str)] = &[
    // Quota before capacity: a quota's message can speak of capacity ("vCPU capacity ... limit").
    (FailureReason::Quota, "VcpuLimitExceeded"),
    (FailureReason::Quota, "MissingQuota"),
    (FailureReason::Quota, "LimitExceeded"),
    (FailureReason::Quota, "TooManyBuckets"),
    (FailureReason::Quota, "TooManyLoadBalancers"),
    (FailureReason::Quota, "QuotaExceeded"),
    (FailureReason::Quota, "exceeding approved"),
    (FailureReason::Quota, "because the required number of resources"),
    (FailureReason::Quota, "' exceeded. Limit:"),
    (FailureReason::Quota, "Not enough IP space available"),
    (FailureReason::Capacity, "InsufficientInstanceCapacity"),
    (FailureReason::Capacity, "InsufficientCapacity"),
    (FailureReason::Capacity, "ZONE_RESOURCE_POOL_EXHAUSTED"),
    (FailureReason::Capacity, "does not have enough resources available"),
    (FailureReason::Capacity, "AllocationFailed"),
    (FailureReason::Capacity, "SkuNotAvailable"),
    (FailureReason::Capacity, "OverconstrainedAllocationRequest"),
    (FailureReason::Capacity, "NoCapacity"),
    (FailureReason::Credentials, "InvalidClientTokenId"),
    (FailureReason::Credentials, "SignatureDoesNotMatch"),
    (FailureReason::Credentials, "ExpiredToken"),
    (FailureReason::Credentials, "AuthFailure"),
    (FailureReason::Credentials, "UnauthorizedOperation"),
    (FailureReason::Credentials, "AccessDenied"),
    (FailureReason::Credentials, "current credentials insufficient"),
    (FailureReason::Credentials, "AuthorizationFailed"),
    (FailureReason::Credentials, "AADSTS"),
    (FailureReason::Credentials, "invalid_grant"),
    (FailureReason::Credentials, "googleapi: Error 403"),
    (FailureReason::Credentials, "googleapi: Error 401"),
    (FailureReason::Dns, "Route53Zone"),
    (FailureReason::Dns, "resource record set"),
    (FailureReason::Dns, "TooManyHostedZones"),
    (FailureReason::Dns, "Hosted Zone"),
    (FailureReason::Dns, "public zone"),
    (FailureReason::Dns, "DNS zone"),
    (FailureReason::BootstrapTimeout, "Bootstrap failed to complete"),
    (FailureReason::BootstrapTimeout, "failed to wait for bootstrapping to complete"),
    (FailureReason::BootstrapTimeout, "failed waiting for Kubernetes API"),
    (FailureReason::BootstrapTimeout, "failed to initialize the cluster"),
    (FailureReason::BootstrapTimeout, "timed out waiting for the condition"),
    (FailureReason::Configuration, "failed to load asset \"Install Config\""),
    (FailureReason::Configuration, "invalid \"install-config.yaml\""),
    (FailureReason::Configuration, "failed to fetch Master Machines"),
    (FailureReason::Configuration, "Invalid value:"),
    (FailureReason::Configuration, "Unsupported value:"),
    (FailureReason::Configuration, "Required value"),
    (FailureReason::Configuration, "InvalidTemplate"),
    (FailureReason::Configuration, "InvalidParameter"),
];

/// The class of an install that failed saying `message`.
pub fn classify(message: &str) -> FailureReason {
    PHRASES.iter().find(|(_, phrase)| message.contains(phrase)).map_or(FailureReason::Unknown, |(reason, _)| *reason)
}
