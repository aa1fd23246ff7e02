//! The EC2 platform: a cluster's machines are the instances tagged `kubernetes.io/cluster/<infraId> = owned`.
//!
//! - Provision: one RunInstances of `machineCount` instances from the launch template, or the image and instance
//!   type, with the cluster tag, Apiary's `apiary:pool` / `apiary:cluster` tags and the pool's own tags.
//!   The client token is derived from the cluster id, so a repeated provision creates nothing twice.
//! - Start / stop: in batches of [`BATCH`]; a batch the cloud refuses is retried instance by instance, so one
//!   failing instance never blocks the others, and each refusal is reported with its instance.
//! - Instances `shutting-down` or `terminated` are not machines of the cluster any more.
//! - A pool's tick looks at all the clusters it is due to look at with one DescribeInstances (paged), filtered by
//!   their cluster tags ([`Actuator::look_many`]).
//! - An instance whose root volume is an instance store cannot be stopped (EC2 refuses it): such a cluster's
//!   hibernation is unsupported (seed 004), reported before any instance is stopped.
//!
//! EC2 clients are made per region (a pool's `platform.aws.region`) from one shared SDK configuration, with the
//! process's own credentials, or with those of the pool's role in another account (`platform.aws.roleArn`,
//! assumed with the pool's ExternalId: [`crate::roles`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use apiary_planner::machines::MachineState;
use apiary_planner::power::{Install, Termination};
use apiary_planner::{external_id, AwsPlatform, Cluster, Machine, Platform, PoolSpec, Timestamp};
use async_trait::async_trait;
use aws_sdk_ec2::types::{
    DeviceType, Filter, InstanceStateName, LaunchTemplateSpecification, ResourceType, SummaryStatus, Tag,
    TagSpecification,
};
use aws_sdk_ec2::Client;

use apiary_ports::platform::{
    client_token, Actuator, Machines, Marked, Nodes, Provision, Provisioner, Refused, Seen, Target,
};
use apiary_ports::{Error, Result};

use crate::calls::count;
use crate::roles::{session_name, Assumption, Roles};

/// Instances per Start/Stop/Terminate call.
pub const BATCH: usize = 50;
/// Tag naming the pool of an instance.
pub const POOL_TAG: &str = "apiary:pool";
/// Tag naming the cluster id of an instance.
pub const CLUSTER_TAG: &str = "apiary:cluster";
/// Values one DescribeInstances filter takes at most.
const FILTER_VALUES: usize = 200;
/// Why an instance cannot be stopped.
const INSTANCE_STORE: &str = "its root volume is an instance store, which EC2 cannot stop";

/// The tag key of a cluster's machines.
pub fn cluster_tag(infra_id: &str) -> String {
    format!("kubernetes.io/cluster/{infra_id}")
}

/// EC2, in any region, and in any account whose role a pool names.
pub struct Ec2Platform {
    sdk: aws_config::SdkConfig,
    /// The stack's id, from which each pool's ExternalId is made.
    stack_id: String,
    /// The clients of the process's own credentials, by region.
    clients: Mutex<HashMap<String, Client>>,
    /// The clients of pools' roles.
    roles: Roles<Client>,
}

/// One instance of a cluster.
#[derive(Debug, Clone)]
struct Instance {
    id: String,
    /// The infraId of its `kubernetes.io/cluster/<infraId> = owned` tag.
    infra_id: Option<String>,
    state: MachineState,
    /// Its root volume is an instance store: EC2 cannot stop it.
    instance_store: bool,
    private_ip: Option<String>,
    public_ip: Option<String>,
}

impl Ec2Platform {
    /// EC2 clients made from `sdk`, for the stack `stack_id` (`AWS::StackId`).
    pub fn new(sdk: aws_config::SdkConfig, stack_id: impl Into<String>) -> Self {
        let roles = Roles::new(sdk.clone());
        Self { sdk, stack_id: stack_id.into(), clients: Mutex::new(HashMap::new()), roles }
    }

    /// The client for `pool`'s calls at `now`: with its role's credentials when it names one (assumed when none
    /// are held; [`Error::Credentials`] when refused), or the process's own.
    async fn client(&self, pool: &str, spec: &PoolSpec, now: Timestamp) -> Result<Client> {
        let (region, role_arn) = match &spec.platform {
            Platform::Aws(AwsPlatform { region, role_arn, .. }) => (region.clone(), role_arn.clone()),
            other => return Err(Error::Config(format!("the EC2 platform was given a {} pool", other.kind()))),
        };
        let conf = |region: &str| {
            aws_sdk_ec2::config::Builder::from(&self.sdk).region(aws_config::Region::new(region.to_owned()))
        };
        let Some(role_arn) = role_arn else {
            let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
            return Ok(clients
                .entry(region.clone())
                .or_insert_with(|| Client::from_conf(conf(&region).build()))
                .clone());
        };
        let assumption = Assumption {
            role_arn,
            external_id: external_id(&self.stack_id, pool),
            session_name: session_name(pool),
            region: region.clone(),
        };
        self.roles
            .client(&assumption, now, |granted| {
                Client::from_conf(conf(&region).credentials_provider(granted.credentials).build())
            })
            .await
    }

    /// The cluster's instances, all pages, terminated ones left out.
    async fn instances(&self, client: &Client, infra_id: &str) -> Result<Vec<Instance>> {
        self.tagged(client, &cluster_tag(infra_id), "owned").await
    }

    /// The instances tagged `key = value`, all pages, terminated ones left out, with the infraId each belongs to.
    async fn tagged(&self, client: &Client, key: &str, value: &str) -> Result<Vec<Instance>> {
        self.described(client, Filter::builder().name(format!("tag:{key}")).values(value).build()).await
    }

    /// The instances `filter` selects, all pages, terminated ones left out, with the infraId each belongs to, in
    /// id order.
    async fn described(&self, client: &Client, filter: Filter) -> Result<Vec<Instance>> {
        let mut out = vec![];
        let mut token = None;
        loop {
            count("ec2:DescribeInstances");
            let page = client
                .describe_instances()
                .filters(filter.clone())
                .filters(
                    Filter::builder()
                        .name("instance-state-name")
                        .set_values(Some(["pending", "running", "stopping", "stopped"].map(String::from).to_vec()))
                        .build(),
                )
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| crate::error::aws("ec2:DescribeInstances", e))?;
            for reservation in page.reservations() {
                for i in reservation.instances() {
                    let name = i.state().and_then(|s| s.name()).map(InstanceStateName::as_str).unwrap_or("pending");
                    let state = MachineState::from_ec2(name).unwrap_or(MachineState::Pending);
                    if state.is_gone() {
                        continue;
                    }
                    if let Some(id) = i.instance_id() {
                        let instance_store = i.root_device_type() == Some(&DeviceType::InstanceStore);
                        let infra_id = i.tags().iter().find_map(|t| {
                            let key = t.key()?.strip_prefix("kubernetes.io/cluster/")?;
                            (t.value() == Some("owned")).then(|| key.to_owned())
                        });
                        out.push(Instance {
                            id: id.to_owned(),
                            infra_id,
                            state,
                            instance_store,
                            private_ip: i.private_ip_address().map(String::from),
                            public_ip: i.public_ip_address().map(String::from),
                        });
                    }
                }
            }
            token = page.next_token().filter(|t| !t.is_empty()).map(String::from);
            if token.is_none() {
                break;
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    /// Applies `change` to the cluster's instances whose state `pick` selects.
    async fn change(
        &self,
        client: &Client,
        t: &Target<'_>,
        pick: impl Fn(MachineState) -> bool,
        change: Change,
    ) -> Result<Refused> {
        let ids = self
            .instances(client, &t.cluster.infra_id)
            .await?
            .into_iter()
            .filter(|i| pick(i.state))
            .map(|i| i.id)
            .collect();
        self.in_batches(ids, |batch| change.send(client, batch)).await
    }

    /// Calls `op` on `ids` in batches; a refused batch is retried one instance at a time.
    async fn in_batches<F, Fut>(&self, ids: Vec<String>, op: F) -> Result<Refused>
    where
        F: Fn(Vec<String>) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<(), Error>>,
    {
        let mut refused = Refused::default();
        for batch in ids.chunks(BATCH) {
            match op(batch.to_vec()).await {
                Ok(()) => {}
                Err(e) if e.is_retryable() => return Err(e),
                Err(_) if batch.len() > 1 => {
                    for id in batch {
                        if let Err(e) = op(vec![id.clone()]).await {
                            if e.is_retryable() {
                                return Err(e);
                            }
                            refused.machines.push((id.clone(), e.to_string()));
                        }
                    }
                }
                Err(e) => refused.machines.push((batch[0].clone(), e.to_string())),
            }
        }
        Ok(refused)
    }
}

/// A state change of instances.
#[derive(Debug, Clone, Copy)]
enum Change {
    Start,
    Stop,
    Terminate,
}

impl Change {
    async fn send(self, client: &Client, ids: Vec<String>) -> Result<()> {
        let ids = Some(ids);
        let op = self.op();
        count(op);
        match self {
            Change::Start => client
                .start_instances()
                .set_instance_ids(ids)
                .send()
                .await
                .map(drop)
                .map_err(|e| crate::error::aws(op, e)),
            Change::Stop => client
                .stop_instances()
                .set_instance_ids(ids)
                .send()
                .await
                .map(drop)
                .map_err(|e| crate::error::aws(op, e)),
            Change::Terminate => client
                .terminate_instances()
                .set_instance_ids(ids)
                .send()
                .await
                .map(drop)
                .map_err(|e| crate::error::aws(op, e)),
        }
    }

    fn op(self) -> &'static str {
        match self {
            Change::Start => "ec2:StartInstances",
            Change::Stop => "ec2:StopInstances",
            Change::Terminate => "ec2:TerminateInstances",
        }
    }
}

fn machines(instances: &[Instance], want: MachineState, acts: fn(MachineState) -> bool) -> Machines {
    Machines::of(instances.iter().map(|i| (i.id.as_str(), i.state)), want, acts)
}

#[async_trait]
impl Actuator for Ec2Platform {
    async fn look_many(
        &self,
        pool: &str,
        spec: &PoolSpec,
        clusters: &[Cluster],
        now: Timestamp,
    ) -> Result<Option<BTreeMap<String, Seen>>> {
        let client = self.client(pool, spec, now).await?;
        let keys: Vec<String> = clusters.iter().map(|c| cluster_tag(&c.infra_id)).collect();
        let mut found: HashMap<String, Vec<Instance>> = HashMap::new();
        for batch in keys.chunks(FILTER_VALUES) {
            let filter = Filter::builder().name("tag-key").set_values(Some(batch.to_vec())).build();
            // Only instances the cluster owns count, as for one cluster (`tag:<key> = owned`).
            for i in self.described(&client, filter).await? {
                if let Some(infra_id) = i.infra_id.clone() {
                    found.entry(infra_id).or_default().push(i);
                }
            }
        }
        let seen = |list: &[Instance]| {
            Seen::of(list.iter().map(|i| (i.id.as_str(), i.state, i.instance_store.then_some(INSTANCE_STORE))))
        };
        Ok(Some(
            clusters.iter().map(|c| (c.id.clone(), seen(found.get(&c.infra_id).map_or(&[], Vec::as_slice)))).collect(),
        ))
    }

    async fn machines_running(&self, t: Target<'_>) -> Result<Machines> {
        let client = self.client(t.pool, t.spec, t.now).await?;
        Ok(machines(
            &self.instances(&client, &t.cluster.infra_id).await?,
            MachineState::Running,
            MachineState::start_acts,
        ))
    }

    async fn machines_stopped(&self, t: Target<'_>) -> Result<Machines> {
        let client = self.client(t.pool, t.spec, t.now).await?;
        let instances = self.instances(&client, &t.cluster.infra_id).await?;
        let mut m = machines(&instances, MachineState::Stopped, MachineState::stop_acts);
        m.unsupported = instances
            .iter()
            .filter(|i| i.instance_store && i.state != MachineState::Stopped)
            .map(|i| (i.id.clone(), INSTANCE_STORE.to_owned()))
            .collect();
        Ok(m)
    }

    async fn nodes_ready(&self, t: Target<'_>) -> Result<Nodes> {
        let client = self.client(t.pool, t.spec, t.now).await?;
        let instances = self.instances(&client, &t.cluster.infra_id).await?;
        let m = machines(&instances, MachineState::Running, MachineState::start_acts);
        if m.total == 0 || !m.not_ready.is_empty() {
            return Ok(Nodes::Machines(m));
        }
        let ids: Vec<String> = instances.into_iter().map(|i| i.id).collect();
        let mut ok = 0;
        for batch in ids.chunks(BATCH) {
            count("ec2:DescribeInstanceStatus");
            let out = client
                .describe_instance_status()
                .set_instance_ids(Some(batch.to_vec()))
                .send()
                .await
                .map_err(|e| crate::error::aws("ec2:DescribeInstanceStatus", e))?;
            ok += out
                .instance_statuses()
                .iter()
                .filter(|s| {
                    let passes = |st: Option<&SummaryStatus>| matches!(st, Some(SummaryStatus::Ok) | None);
                    passes(s.instance_status().and_then(|x| x.status()))
                        && passes(s.system_status().and_then(|x| x.status()))
                })
                .count();
        }
        Ok(if ok == ids.len() {
            Nodes::Ready
        } else {
            Nodes::NotReady(format!(
                "{} of {} instances have not passed their status checks",
                ids.len() - ok,
                ids.len()
            ))
        })
    }

    async fn machine_addresses(&self, t: Target<'_>) -> Result<Vec<Machine>> {
        let client = self.client(t.pool, t.spec, t.now).await?;
        let instances = self.instances(&client, &t.cluster.infra_id).await?;
        Ok(instances
            .into_iter()
            .map(|i| Machine { id: i.id, private_ip: i.private_ip, public_ip: i.public_ip })
            .collect())
    }

    async fn start_machines(&self, t: Target<'_>) -> Result<Refused> {
        let client = self.client(t.pool, t.spec, t.now).await?;
        self.change(&client, &t, MachineState::start_acts, Change::Start).await
    }

    async fn stop_machines(&self, t: Target<'_>) -> Result<Refused> {
        let client = self.client(t.pool, t.spec, t.now).await?;
        self.change(&client, &t, MachineState::stop_acts, Change::Stop).await
    }
}

#[async_trait]
impl Provisioner for Ec2Platform {
    async fn install_state(&self, t: Target<'_>) -> Result<Install> {
        Ok(self.machines_running(t).await?.install())
    }

    async fn provision(&self, t: Target<'_>) -> Result<Provision> {
        let Platform::Aws(aws) = &t.spec.platform else {
            return Err(Error::Config(format!("the EC2 platform was given a {} pool", t.spec.platform.kind())));
        };
        let client = self.client(t.pool, t.spec, t.now).await?;
        let c = t.cluster;
        let mut tags = vec![
            Tag::builder().key(cluster_tag(&c.infra_id)).value("owned").build(),
            Tag::builder().key(POOL_TAG).value(t.pool).build(),
            Tag::builder().key(CLUSTER_TAG).value(&c.id).build(),
            Tag::builder().key("Name").value(&c.cluster_name).build(),
        ];
        tags.extend(aws.tags.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()));
        let count_ = i32::try_from(aws.machine_count).unwrap_or(1).max(1);
        let mut req = client
            .run_instances()
            .min_count(count_)
            .max_count(count_)
            .client_token(client_token(t.pool, c))
            .tag_specifications(
                TagSpecification::builder().resource_type(ResourceType::Instance).set_tags(Some(tags)).build(),
            )
            .set_subnet_id(aws.subnet_id.clone())
            .set_image_id(aws.image_id.clone());
        if let Some(lt) = &aws.launch_template {
            req = req.launch_template(
                LaunchTemplateSpecification::builder()
                    .launch_template_id(&lt.id)
                    .set_version(lt.version.clone())
                    .build(),
            );
        }
        if let Some(it) = &aws.instance_type {
            req = req.instance_type(it.as_str().into());
        }
        count("ec2:RunInstances");
        match req.send().await {
            Ok(_) => Ok(Provision::Accepted { handle: None }),
            Err(e) => {
                let e = crate::error::aws("ec2:RunInstances", e);
                if e.is_retryable() {
                    Err(e)
                } else {
                    Ok(Provision::Refused(e.to_string()))
                }
            }
        }
    }

    async fn deprovision(&self, t: Target<'_>) -> Result<Termination> {
        let client = self.client(t.pool, t.spec, t.now).await?;
        let refused = self.change(&client, &t, MachineState::terminate_acts, Change::Terminate).await?;
        if !refused.machines.is_empty() {
            tracing::warn!(cluster = %t.cluster.id, refused = ?refused.machines, "some machines refused to terminate");
        }
        // Terminated instances are gone from the cluster's machines at once (shutting-down counts as gone): what
        // remains is what refused.
        Ok(Termination { remaining: refused.machines.len() as u32, refused: refused.machines })
    }

    /// The instances tagged `apiary:pool = <pool>` (one filtered DescribeInstances, all pages), by the infraId of
    /// their cluster tag.
    async fn marked(&self, pool: &str, spec: &PoolSpec, now: Timestamp) -> Result<Option<Vec<Marked>>> {
        let client = self.client(pool, spec, now).await?;
        let instances = self.tagged(&client, POOL_TAG, pool).await?;
        Ok(Some(instances.into_iter().filter_map(|i| Some(Marked { infra_id: i.infra_id?, machine: i.id })).collect()))
    }
}
