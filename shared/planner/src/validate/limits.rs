/// Most clusters a pool may hold or ask for: size, runningCount, maxSize, maxConcurrent and a schedule's
/// overrides.
pub const MAX_CLUSTERS: i64 = 10_000;
/// Most inventory names.
pub const MAX_INVENTORY: usize = 2_000;
/// Longest duration text (`1h30m`, …).
pub const MAX_DURATION_LEN: usize = 32;
/// Most labels, and the longest label key and value.
pub const MAX_LABELS: usize = 64;
/// Longest label key.
pub const MAX_LABEL_KEY_LEN: usize = 128;
/// Longest label value.
pub const MAX_LABEL_VALUE_LEN: usize = 256;
/// Parameters of one inventory entry, at most (names and values as labels take them).
pub const MAX_ENTRY_PARAMETERS: usize = 32;
/// The bytes of every inventory entry's parameters' names and values together, at most: the pool's item
/// holds them.
pub const MAX_INVENTORY_PARAMETER_BYTES: usize = 8 * 1024;
/// Most schedules.
pub const MAX_SCHEDULES: usize = 16;
/// Longest cron expression and IANA time zone name.
pub const MAX_CRON_LEN: usize = 64;
/// Longest time zone name.
pub const MAX_TIME_ZONE_LEN: usize = 64;
/// Longest cloud identifier (region, image, instance type, launch template id and version, subnet).
pub const MAX_CLOUD_ID_LEN: usize = 128;
/// Most extra tags on a machine (EC2 allows 50; Apiary sets four of its own).
pub const MAX_TAGS: usize = 40;
/// Longest tag key (EC2's limit).
pub const MAX_TAG_KEY_LEN: usize = 127;
/// Longest tag value (EC2's limit).
pub const MAX_TAG_VALUE_LEN: usize = 255;
/// Most provisioning attempts per cluster.
pub const MAX_INSTALL_ATTEMPTS: i64 = 100;
/// Most machines per cluster.
pub const MAX_MACHINES: i64 = 100;
/// Longest Secrets Manager ARN.
pub const MAX_SECRET_ARN_LEN: usize = 512;
/// Longest IAM role ARN (a role's path and name are far shorter in practice than IAM's 512 + 64).
pub const MAX_ROLE_ARN_LEN: usize = 512;
/// Most principal patterns in each of a pool's `access.claimants` and `access.admins`.
pub const MAX_PRINCIPALS: usize = 20;
/// Longest principal pattern (an IAM or STS ARN, an account id, `*`).
pub const MAX_PRINCIPAL_LEN: usize = 256;
/// Most zones of a GCP pool.
pub const MAX_ZONES: usize = 16;
/// Most extra labels on a GCP instance (Compute Engine allows 64; Apiary sets three of its own).
pub const MAX_GCP_LABELS: usize = 60;
/// Longest GCP label key or value, and resource name.
pub const MAX_GCP_NAME_LEN: usize = 63;
/// Longest instance template path (`projects/P/regions/R/instanceTemplates/NAME` at its longest).
pub const MAX_GCP_TEMPLATE_LEN: usize = 193;
/// Longest infraId the planner makes (`<21 characters of the name>-<5>`, openshift-install's length).
pub const MAX_INFRA_ID_LEN: usize = 27;
/// Longest Azure region name.
pub const MAX_AZURE_LOCATION_LEN: usize = 64;
/// Longest Azure resource group name (Azure's limit), with the longest infraId in it.
pub const MAX_RESOURCE_GROUP_LEN: usize = 90;
/// Most bytes of an inline ARM template and its parameters, as JSON (larger ones go by `templateUri`): what
/// keeps the largest Azure pool item under half of DynamoDB's limit.
pub const MAX_AZURE_TEMPLATE_BYTES: usize = 12 * 1024;
/// Most template parameters a pool sets.
pub const MAX_AZURE_PARAMETERS: usize = 64;
/// Longest template parameter name.
pub const MAX_AZURE_PARAMETER_NAME_LEN: usize = 128;
/// Longest URL (`templateUri`).
pub const MAX_URL_LEN: usize = 2048;
/// Most extra tags on an Azure resource group (Azure allows 50; Apiary sets three of its own).
pub const MAX_AZURE_TAGS: usize = 40;
/// Longest Azure tag name (Azure allows 512; Apiary, as on EC2, 128).
pub const MAX_AZURE_TAG_KEY_LEN: usize = 128;
/// Longest Azure tag value (Azure's limit).
pub const MAX_AZURE_TAG_VALUE_LEN: usize = 256;
/// Longest vSphere inventory name (datacenter, folder, template, resource pool, datastore).
pub const MAX_VSPHERE_NAME_LEN: usize = 80;
/// Longest CA bundle (PEM), a few certificates.
pub const MAX_CA_BUNDLE_LEN: usize = 16 * 1024;
/// Most install outputs an external installer may name for one cluster.
pub const MAX_OUTPUTS: usize = 32;
/// Longest install output name.
pub const MAX_OUTPUT_KEY_LEN: usize = 64;
/// Longest install output value (a URL, an ARN).
pub const MAX_OUTPUT_VALUE_LEN: usize = 2048;
/// Longest provisioning handle a cluster keeps (a platform's longer answer is not kept: it then follows its
/// provisioning without it).
pub const MAX_PROVISION_REF_LEN: usize = 8 * 1024;
