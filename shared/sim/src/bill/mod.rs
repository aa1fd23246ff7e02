//! What Apiary itself costs to run on AWS: the simulated pool's operations turned into AWS requests and priced at
//! list prices.
//!
//! The operations come from the simulation (reconciles, power-function runs, the sweep's runs, claims and their
//! waits, table writes, each at its write units: [`crate::units`]). The AWS requests per operation are the ones the
//! adapters count against the emulator (BENCHMARKS.md, "AWS calls per operation"): a reconcile is one strongly
//! consistent Query of the pool's partition plus its writes; a claim reads the pool item, small pages of the
//! partition's `assign` index (the oldest pending claim, then spares) and the spare it takes, then writes one
//! transaction and sends one SQS message; each message to a function is a send and a delete. What no emulator can
//! measure (how long a function runs on Lambda) is an assumption, named in [`Assumptions`]; the Lambda lines are
//! small beside the requests either way, but for a request that waits (a `GET ?wait=`), billed for its wait.
//!
//! The table is billed on demand, by the units used, unless the stack provisions it (`TableCapacity`): then
//! [`provisioned`] prices the capacity auto scaling holds for the units each simulated minute asks for
//! ([`crate::capacity`]).

use chrono::TimeDelta;

use apiary_planner::duration::hours;
use apiary_planner::{waiting, Timestamp};
use apiary_ports::metrics::{metric_names, Monitoring, ALARMED};
use serde_json::Value;

use crate::capacity::{provision, Scaling};
use crate::report::{Meter, Outcome};
use crate::units::Parts;

mod provisioned;
mod render;

pub use provisioned::*;
pub use render::*;

/// Hours in a month (AWS's 730).
pub const MONTH_HOURS: f64 = 730.0;

/// List prices, us-east-1, $.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prices {
    /// Lambda on arm64, per GB-second.
    pub lambda_gb_second: f64,
    /// Lambda, per request.
    pub lambda_request: f64,
    /// DynamoDB on demand, per write request unit.
    pub write_unit: f64,
    /// DynamoDB on demand, per read request unit.
    pub read_unit: f64,
    /// DynamoDB provisioned, per write capacity unit-hour.
    pub write_capacity_hour: f64,
    /// DynamoDB provisioned, per read capacity unit-hour.
    pub read_capacity_hour: f64,
    /// SQS standard, per request (the power queue).
    pub sqs_request: f64,
    /// SQS FIFO, per request (the reconcile queue).
    pub sqs_fifo_request: f64,
    /// EventBridge Scheduler, per invocation.
    pub scheduler_invocation: f64,
    /// API Gateway REST API, per request.
    pub api_request: f64,
    /// CloudWatch Logs ingestion, per GB.
    pub log_gb: f64,
    /// A CloudWatch custom metric series (one name and set of dimension values), per month: billed by the hour,
    /// for each hour it gets data.
    pub metric_month: f64,
    /// A CloudWatch alarm (standard resolution), per month.
    pub alarm_month: f64,
    /// A CloudWatch dashboard, per month.
    pub dashboard_month: f64,
    /// An always-on Hive: EKS control plane, per hour.
    pub eks_hour: f64,
    /// And a worker node (m6i.large on demand), per hour.
    pub node_hour: f64,
}

impl Default for Prices {
    fn default() -> Self {
        Self {
            lambda_gb_second: 0.000_013_333_4,
            lambda_request: 0.20e-6,
            write_unit: 0.625e-6,
            read_unit: 0.125e-6,
            write_capacity_hour: 0.000_65,
            read_capacity_hour: 0.000_13,
            sqs_request: 0.40e-6,
            sqs_fifo_request: 0.50e-6,
            scheduler_invocation: 1.00e-6,
            api_request: 3.50e-6,
            log_gb: 0.50,
            metric_month: 0.30,
            alarm_month: 0.10,
            dashboard_month: 3.00,
            eks_hour: 0.10,
            node_hour: 0.096,
        }
    }
}

/// What is assumed rather than counted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Assumptions {
    /// Billed duration of a reconcile.
    pub reconcile: TimeDelta,
    /// Of a power run: a cloud call or two.
    pub power: TimeDelta,
    /// Added to a tick's by each further cluster it looks at (the looks run at once: each adds its share of the
    /// work, not its wait).
    pub look: TimeDelta,
    /// Log bytes each look of a tick adds, at `LogLevel` info.
    pub look_log_bytes: f64,
    /// Of a claim request.
    pub api: TimeDelta,
    /// Of a timeouts sweep.
    pub sweep: TimeDelta,
    /// Each function's memory, as the template sets it (`MemorySize`): a run is billed by its duration times this.
    pub memory: Memory,
    /// Sweeps (the timeouts function) per hour: the template's default rate(1 minute).
    pub sweeps_per_hour: f64,
    /// Log bytes per invocation at `LogLevel` info: the function's lines and Lambda's START, END and REPORT. At the
    /// stack's default, warn, a run that goes well logs none of them: only its metrics ([`emf_bytes`]).
    pub log_bytes: f64,
    /// The stack logs at info (`LogLevel`; warn by default).
    pub log_info: bool,
    /// How a waiting claimant looks at its claim. `false`, as the CLI does: one request answered at once at each
    /// look [`waiting`] sets (0.25, 0.75, 1.75, 3.75 s after the claim, then every 2 s). `true`, as a script may:
    /// `GET ?wait=20s` again and again ([`LONG_POLL`]), each taking the same looks inside the request, and
    /// holding the claim API function until its deadline or the claim is Ready.
    pub long_polls: bool,
    /// The pollers Lambda's event source mapping keeps on the reconcile queue (FIFO) while it is empty, each a 20 s
    /// long poll after another ([`POLLS_PER_POLLER_HOUR`]): [`POLLERS`].
    pub reconcile_pollers: f64,
    /// The same on the power queue (standard): [`POLLERS`], or as few as [`FEWEST_POLLERS`] while traffic is low.
    pub power_pollers: f64,
    /// Worker nodes of an always-on Hive.
    pub hive_nodes: f64,
    /// The metric series the stack publishes (its `Monitoring`; `alarms` by default).
    pub monitoring: Monitoring,
    /// The stack-wide series `dashboard` publishes, each with data every hour: the pools' ten gauges (at every
    /// reconcile), the claims' assignment delay, the resumes' and the stops' durations, the reaper's two counts
    /// (every half hour). `alarms` publishes [`ALARMED`] of them.
    pub stack_series: f64,
    /// The template's alarms: the two dead-letter queues, broken clusters, a pending claim, orphaned machines.
    pub alarms: f64,
    /// Callers reach the claim API at the function's own URL (`ClaimEndpoint` `function-url`), which bills nothing
    /// but the function's runs, instead of through API Gateway (the default), which bills each request.
    pub function_url: bool,
}

/// The pollers an SQS event source mapping keeps on an empty queue: five, as Lambda's documentation says it scales
/// back to when traffic is low.
pub const POLLERS: f64 = 5.0;
/// As few pollers as Lambda may keep on a standard queue with low traffic, by the same documentation: an
/// optimization it makes, not one it promises, and never where the mapping sets `MaximumConcurrency` (the
/// template's set none). Not said of FIFO queues, so the reconcile queue keeps [`POLLERS`].
pub const FEWEST_POLLERS: f64 = 2.0;
/// Receives one poller makes an hour on an empty queue: a 20 s long poll after another.
pub const POLLS_PER_POLLER_HOUR: f64 = 180.0;

impl Default for Assumptions {
    fn default() -> Self {
        Self {
            reconcile: TimeDelta::milliseconds(150),
            power: TimeDelta::milliseconds(300),
            look: TimeDelta::milliseconds(20),
            look_log_bytes: 200.0,
            api: TimeDelta::milliseconds(60),
            sweep: TimeDelta::milliseconds(100),
            memory: Memory::TEMPLATE,
            sweeps_per_hour: 60.0,
            log_bytes: 1024.0,
            log_info: false,
            long_polls: false,
            reconcile_pollers: POLLERS,
            power_pollers: POLLERS,
            hive_nodes: 2.0,
            monitoring: Monitoring::default(),
            stack_series: Documents::new().iter().map(|d| metric_names(d).len()).sum::<usize>() as f64,
            alarms: 5.0,
            function_url: false,
        }
    }
}

/// Each function's memory in MB (its `MemorySize` in `infra/template.yaml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// The claim API: the one a caller waits on, at twice the power function's CPU (Lambda gives CPU in
    /// proportion to memory).
    pub claim_api: u32,
    /// The reconcile: a pool's whole partition, read a page at a time, and its plan.
    pub reconcile: u32,
    /// The power function: a cluster, or a tick's hundred at most, and cloud calls.
    pub power: u32,
    /// The timeouts sweep: the pools' items.
    pub timeouts: u32,
}

impl Memory {
    /// What the template gives each function.
    pub const TEMPLATE: Self = Self { claim_api: 256, reconcile: 256, power: 128, timeouts: 128 };

    /// `mb` in GB as Lambda bills it (1 024 MB each).
    fn gb(self, mb: u32) -> f64 {
        f64::from(mb) / 1024.0
    }
}

/// The on-demand table's lines.
const WRITE_UNITS: &str = "DynamoDB write units";
const READ_UNITS: &str = "DynamoDB read units";

/// One line of the bill.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// What.
    pub item: &'static str,
    /// How many per month for one pool.
    pub per_pool: f64,
    /// How many per month for the stack, whatever the pools.
    pub fixed: f64,
    /// $ each.
    pub price: f64,
    /// How many at most, whatever the pools: a stack-wide series is billed a month at most, however many pools
    /// feed it ([`f64::INFINITY`]: no bound).
    pub cap: f64,
}

impl Line {
    /// A line without a bound.
    fn new(item: &'static str, per_pool: f64, fixed: f64, price: f64) -> Self {
        Self { item, per_pool, fixed, price, cap: f64::INFINITY }
    }

    /// How many per month for `pools` pools.
    pub fn count(&self, pools: f64) -> f64 {
        (self.per_pool * pools + self.fixed).min(self.cap)
    }
}

/// The read units of each operation that reads the table.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ReadCosts {
    /// A claim made and released.
    claim: f64,
    /// A 20 s long poll of a waiting claim.
    poll: f64,
    /// A nudge.
    nudge: f64,
    /// A tick link.
    tick: f64,
    /// A look a tick takes.
    look: f64,
    /// The sweep's read of the pool item, through the `pools` index.
    sweep: f64,
}

impl ReadCosts {
    fn of(o: &Outcome, a: &Assumptions) -> Self {
        // Strongly consistent reads: a unit per 4 KB of an item, one per index page (keys only, 16 to a page). A
        // cluster or claim item is one: a few hundred bytes, never near 4 KB.
        let pool_read = (o.usage.pool_item_bytes as f64 / 4096.0).ceil().max(1.0);
        let item_read = 1.0;
        // Create: the pool item, the oldest pending claim's page, a page of spares (two queries when it wraps
        // around the index), the spare. Release: the pool item and the claim. A poll: the pool item, then at each
        // look the claim and its cluster, or for a claim waiting for one, the pool's tick item (for its hint).
        let create = pool_read + 3.0 + item_read;
        let release = pool_read + item_read;
        Self {
            claim: create + release,
            poll: pool_read + 2.0 * item_read * looks_per_poll(a),
            // A nudge reads the pool item, the cluster and the tick item; a tick the pool item, the tick item and a
            // page of the index of clusters in motion (keys only), all strongly; then the clusters it looks at, in
            // one batch read eventually consistently (half a unit each).
            nudge: pool_read + item_read + 1.0,
            tick: pool_read + 2.0,
            look: item_read / 2.0,
            // Each sweep reads every pool item through the `pools` index (eventually consistent: half a unit per
            // 4 KB).
            sweep: o.usage.pool_item_bytes as f64 / 4096.0 / 2.0,
        }
    }
}

/// A month of one pool's DynamoDB read units, by what reads them.
pub fn reads(o: &Outcome, measured: TimeDelta, a: &Assumptions) -> [(&'static str, f64); 6] {
    let scale = MONTH_HOURS / hours(measured).max(1e-9);
    let u = &o.usage;
    let r = ReadCosts::of(o, a);
    let sweeps = a.sweeps_per_hour * MONTH_HOURS;
    let told = o.usage.claims_made_after_others as f64;
    [
        // A reconcile's Query reads the whole partition, the pool's tick item with it (`query_units` weighs it); a
        // claim request reads single items and index pages, never the partition.
        ("reconcile: the partition", u.query_units as f64 * scale),
        // A claim made while older ones wait for the tick reads the tick item too, for its answer's hint.
        ("claim API: make, release, wait", (o.claims as f64 * r.claim + told + polls(o, a) * r.poll) * scale),
        ("power: nudges", u.nudges as f64 * r.nudge * scale),
        ("power: ticks", u.ticks as f64 * r.tick * scale),
        ("power: the ticks' looks", u.tick_looks as f64 * r.look * scale),
        ("sweep: the pool item", sweeps * r.sweep),
    ]
}

/// How long a long-polling claimant's `GET ?wait=` waits at most ([`Assumptions::long_polls`]).
pub const LONG_POLL: TimeDelta = TimeDelta::seconds(20);

/// The claims' polls: the requests their waits took.
fn polls(o: &Outcome, a: &Assumptions) -> f64 {
    if !a.long_polls {
        return o.looks.len() as f64;
    }
    poll_times(o, a).len() as f64
}

/// When each poll of a waiting claim was made: long-polling, one every [`LONG_POLL`] from the claim's making until
/// it was given its cluster; else each look its claimant took as the CLI takes them, on the claim API's hints or
/// its own gaps ([`crate::claimant`]).
fn poll_times(o: &Outcome, a: &Assumptions) -> Vec<Timestamp> {
    if !a.long_polls {
        return o.looks.clone();
    }
    let mut at = Vec::new();
    for (made, wait) in &o.waits {
        let n = (wait.num_seconds() as f64 / LONG_POLL.num_seconds() as f64).ceil() as i32;
        at.extend((0..n).map(|k| *made + LONG_POLL * k));
    }
    at
}

/// The looks at the claim in one poll: one when each is a request; long-polling, one at once, each [`waiting`]
/// sets before the deadline, and one at it (14 in 20 s).
fn looks_per_poll(a: &Assumptions) -> f64 {
    if !a.long_polls {
        return 1.0;
    }
    let deadline = LONG_POLL.to_std().unwrap_or_default();
    (2 + waiting::times().take_while(|t| *t < deadline).count()) as f64
}

/// A month of one pool's operations, as priced lines.
pub fn lines(o: &Outcome, measured: TimeDelta, prices: &Prices, a: &Assumptions) -> Vec<Line> {
    let scale = MONTH_HOURS / hours(measured).max(1e-9);
    let u = &o.usage;
    let claims = o.claims as f64;
    // A claim: create, the polls of its wait, release.
    let api_requests = 2.0 * claims + polls(o, a);
    let reconciles = o.reconciles as f64;
    let power = u.power_runs as f64;
    let looks = u.tick_looks as f64;
    // Writes: counted write by write as the functions send them ([`crate::units`]), and the tick item's.
    let write_units = (u.write_units + u.tick_write_units) as f64;
    let invocations = reconciles + power + api_requests;
    let m = a.memory;
    // A request's work, and long-polling, a waiting claim's polls held besides for its whole wait (each until its
    // deadline, the last until the claim is Ready): Lambda bills a run by its duration, waiting or not.
    let waited: f64 = if a.long_polls { o.waits.iter().map(|(_, w)| w.as_seconds_f64()).sum() } else { 0.0 };
    let gb_seconds = reconciles * m.gb(m.reconcile) * a.reconcile.as_seconds_f64()
        + power * m.gb(m.power) * a.power.as_seconds_f64()
        + looks * m.gb(m.power) * a.look.as_seconds_f64()
        + (api_requests * a.api.as_seconds_f64() + waited) * m.gb(m.claim_api);
    let sweeps = a.sweeps_per_hour * MONTH_HOURS;
    let mut lines = vec![
        Line::new("Lambda requests", invocations * scale, sweeps, prices.lambda_request),
        Line::new(
            "Lambda GB-seconds",
            gb_seconds * scale,
            sweeps * m.gb(m.timeouts) * a.sweep.as_seconds_f64(),
            prices.lambda_gb_second,
        ),
        Line::new(WRITE_UNITS, write_units * scale, 0.0, prices.write_unit),
        // Each sweep reads its record, whatever the pools.
        Line::new(READ_UNITS, reads(o, measured, a).iter().map(|(_, n)| n).sum(), sweeps, prices.read_unit),
        // A send and a delete a message: each one that asked for a reconcile (claims and releases, the power
        // function's news, the sweep's), and each power run; and each queue's pollers, empty or not.
        Line::new(
            "SQS requests, reconcile queue (FIFO)",
            2.0 * u.reconcile_messages as f64 * scale,
            a.reconcile_pollers * POLLS_PER_POLLER_HOUR * MONTH_HOURS,
            prices.sqs_fifo_request,
        ),
        // A tick link that goes on in its own message puts it back (a request), and neither sends the next nor has
        // this one deleted (two fewer). A reconcile's nudges are sent ten to a request.
        Line::new(
            "SQS requests, power queue",
            (2.0 * power - u.tick_returns as f64 - (u.nudges - u.nudge_sends) as f64) * scale,
            a.power_pollers * POLLS_PER_POLLER_HOUR * MONTH_HOURS,
            prices.sqs_request,
        ),
        // The sweep's schedule; a pool wakes through the sweep (its `nextWakeAt`), never a schedule of its own. (A
        // pool's `schedules` are each a schedule of their own; the simulated pools have none.)
        Line::new("Scheduler invocations", 0.0, sweeps, prices.scheduler_invocation),
        Line::new(
            "API Gateway requests",
            if a.function_url { 0.0 } else { api_requests * scale },
            0.0,
            prices.api_request,
        ),
    ];
    lines.extend(cloudwatch_lines(o, measured, prices, a, invocations, looks));
    lines
}

/// A month of one pool's CloudWatch lines: its logs (metrics are log lines), its metric series, the alarms and the
/// dashboard, as the stack's `Monitoring` and `LogLevel` make them.
fn cloudwatch_lines(
    o: &Outcome,
    measured: TimeDelta,
    prices: &Prices,
    a: &Assumptions,
    invocations: f64,
    looks: f64,
) -> Vec<Line> {
    let scale = MONTH_HOURS / hours(measured).max(1e-9);
    let u = &o.usage;
    let claims = o.claims as f64;
    let reconciles = o.reconciles as f64;
    let sweeps = a.sweeps_per_hour * MONTH_HOURS;
    // Metrics are log lines: the pool's gauges at each reconcile, a timing at each assignment, resume and stop, the
    // reaper's counts every half hour; each as the stack's `Monitoring` publishes it.
    // With `alarms`, a gauges line is written only when a value in it could fire an alarm (`usage.alarmLines`), and
    // the reaper's only when it found orphans, which the simulation has none of.
    let (gauges, timing, orphans) = emf_bytes(a.monitoring);
    let gauge_lines = if a.monitoring == Monitoring::Alarms { u.alarm_lines as f64 } else { reconciles };
    let transitions = (o.calls.start + o.calls.stop) as f64;
    let emf = gauge_lines * gauges + (claims + transitions) * timing + hours(measured) * 2.0 * orphans;
    let info = if a.log_info { 1.0 } else { 0.0 };
    vec![
        Line::new(
            "CloudWatch Logs GB",
            (emf + info * (invocations * a.log_bytes + looks * a.look_log_bytes)) / 1e9 * scale,
            info * sweeps * a.log_bytes / 1e9,
            prices.log_gb,
        ),
        Line {
            item: "CloudWatch metric series",
            // A series is billed a month for each 730 hours it has data: with `pools` each pool's own; with `alarms`
            // the three stack-wide ones the alarms read, which get data only when a value could fire an alarm,
            // counted for each pool as if no two pools' such hours fell together (at most the three).
            per_pool: match a.monitoring {
                Monitoring::Pools => u.metric_hours as f64 / hours(measured).max(1e-9),
                Monitoring::Alarms => u.alarm_hours as f64 / hours(measured).max(1e-9),
                Monitoring::Dashboard => 0.0,
            },
            fixed: match a.monitoring {
                Monitoring::Alarms => 0.0,
                _ => a.stack_series,
            },
            price: prices.metric_month,
            cap: match a.monitoring {
                Monitoring::Alarms => ALARMED.len() as f64,
                _ => f64::INFINITY,
            },
        },
        Line::new("CloudWatch alarms", 0.0, a.alarms, prices.alarm_month),
        Line::new(
            "CloudWatch dashboard",
            0.0,
            if a.monitoring == Monitoring::Alarms { 0.0 } else { 1.0 },
            prices.dashboard_month,
        ),
    ]
}

/// One metrics document of each kind the functions write for a pool, as `metrics` builds them: what the bill
/// sizes and counts series by.
#[derive(Debug, Clone)]
pub struct Documents {
    /// The pool's gauges (each reconcile).
    pub gauges: Value,
    /// A claim's assignment delay.
    pub assigned: Value,
    /// A resume's duration (`Transition` `Resume`).
    pub resumed: Value,
    /// A stop's duration (`Transition` `Hibernate`).
    pub stopped: Value,
    /// The reaper's counts.
    pub orphans: Value,
}

impl Documents {
    /// The documents of a pool of 50 with a few clusters of each kind (one broken, and a claim waiting).
    pub fn new() -> Self {
        use apiary_planner::{Claim, Cluster, Pool, PoolStatus, PowerState, Snapshot};
        use apiary_ports::metrics::{claim_assigned, orphans, pool_status, power_transition};
        let at = crate::trace::default_start();
        let pool = Pool {
            name: "sim".into(),
            spec: crate::base_spec(50),
            status: PoolStatus::default(),
            next_wake_at: None,
            deletion_requested_at: None,
            created_at: at,
            rev: 0,
            later: Default::default(),
        };
        // A broken cluster and a claim waiting five minutes: a line `alarms` writes (the bill counts how often).
        let status =
            PoolStatus { standby: 40, ready: 3, claimed: 7, broken: 1, pending_claims: 1, ..PoolStatus::default() };
        let waiting = Claim::new("k00002", "me", at - chrono::TimeDelta::minutes(5));
        let snapshot = Snapshot { pool, clusters: vec![], claims: vec![waiting], leases: vec![] };
        let moving = Cluster { transition_started_at: Some(at), ..Cluster::new("sim-1", "sim-1", "sim-1-x", at) };
        let ended = |state| {
            let after = Cluster { transition_started_at: None, power_state: Some(state), ..moving.clone() };
            power_transition("apiary", "sim", &moving, &after, at).unwrap_or_default()
        };
        Self {
            gauges: pool_status("apiary", &snapshot, &status, at),
            assigned: claim_assigned("apiary", "sim", &Claim::new("k00001", "me", at), at),
            resumed: ended(PowerState::Running),
            stopped: ended(PowerState::Hibernating),
            orphans: orphans("apiary", "sim", 0, 0, at),
        }
    }

    /// Each of them.
    pub fn iter(&self) -> impl Iterator<Item = &Value> {
        [&self.gauges, &self.assigned, &self.resumed, &self.stopped, &self.orphans].into_iter()
    }
}

impl Default for Documents {
    fn default() -> Self {
        Self::new()
    }
}

/// The bytes of one metrics line of each kind, as `monitoring` publishes it (none when it publishes none of its
/// series): the pool's gauges, a timing (a claim's assignment delay; a resume's or a stop's duration is the same
/// size within a few bytes), the reaper's counts.
pub fn emf_bytes(monitoring: Monitoring) -> (f64, f64, f64) {
    use apiary_ports::metrics::published;
    let docs = Documents::new();
    let bytes = |doc: &Value| published(doc.clone(), monitoring).map_or(0.0, |d| d.to_string().len() as f64 + 1.0);
    (bytes(&docs.gauges), bytes(&docs.assigned), bytes(&docs.orphans))
}

/// The month's bill for `pools` pools like this one.
pub fn monthly(lines: &[Line], pools: f64) -> f64 {
    lines.iter().map(|l| l.count(pools) * l.price).sum()
}

/// An always-on Hive's month: the EKS control plane and its nodes, whatever the pools.
pub fn hive_monthly(prices: &Prices, a: &Assumptions) -> f64 {
    (prices.eks_hour + a.hive_nodes * prices.node_hour) * MONTH_HOURS
}
