//! What a simulation measured: waits, cluster-hours, cost, calls; as a table row, as JSON, and as a picture.

use std::fmt::Write as _;

use chrono::TimeDelta;
use serde::Serialize;

use apiary_planner::Timestamp;

use crate::units::Parts;

/// What a cluster-hour costs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Costs {
    /// $ per hour with machines running (installing, resuming, Running, stopping).
    pub running_per_hour: f64,
    /// $ per hour hibernated (disks only).
    pub hibernated_per_hour: f64,
}

impl Default for Costs {
    fn default() -> Self {
        Self { running_per_hour: 1.5, hibernated_per_hour: 0.1 }
    }
}

/// Actuator calls made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Calls {
    /// Clusters provisioned.
    pub provision: usize,
    /// Start calls.
    pub start: usize,
    /// Stop calls.
    pub stop: usize,
    /// Clusters deprovisioned.
    pub deprovision: usize,
}

/// What the pool asked of Apiary's own functions in the measured period, for its AWS bill.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Power function invocations: one per cluster a reconcile touches (a nudge), one per tick link.
    pub power_runs: usize,
    /// Of those, nudges.
    pub nudges: usize,
    /// The requests that sent them: a reconcile sends its nudges ten to a request (SendMessageBatch).
    pub nudge_sends: usize,
    /// Of those, tick links (stale and superseded ones included).
    pub ticks: usize,
    /// Looks the ticks took at clusters in motion.
    pub tick_looks: usize,
    /// Tick links that went on in a new message (its send is billed as the next link's run).
    pub tick_sends: usize,
    /// Tick links that went on in their own message, put back in the queue until the next look
    /// (ChangeMessageVisibility, while the message has receives to spare: `chain::carries_on`): one request to the
    /// queue instead of two, the next link's send and the event source mapping's delete of this one.
    pub tick_returns: usize,
    /// Writes of the pool's tick item (each tick, and each nudge that started or brought it forward): not in the
    /// outcome's writes.
    pub tick_writes: usize,
    /// Their write units (a unit per KB of the item).
    pub tick_write_units: usize,
    /// Hours of the pool's own metric series with data in them, summed over its series (its gauges, claims'
    /// assignment delays, resumes' and stops' durations, the reaper's counts): what CloudWatch bills when the stack
    /// publishes each pool's metrics (`Monitoring` `pools`), a series a month for each 730 of them.
    pub metric_hours: usize,
    /// Reconciles whose gauges line the stack writes at its default `Monitoring`, `alarms`: those with a value an
    /// alarm could fire on ([`apiary_ports::metrics::could_alarm`]), a broken cluster or a claim waiting over a
    /// minute; a healthy pool's lines publish no series and are not written.
    pub alarm_lines: usize,
    /// Hours of the alarms' series with data in them, summed over the series: what CloudWatch bills for them at
    /// `alarms`, a series a month for each 730.
    pub alarm_hours: usize,
    /// Resumes whose kubelets' certificates had expired while the cluster slept (seed 004): each took one look
    /// more, the look that approved its nodes' certificate requests.
    pub certificate_resumes: usize,
    /// Messages a reconcile's nudges sent back to it: a cluster they stepped reached a state the pool acts on.
    pub news: usize,
    /// Messages to the reconcile queue: a claim made or released, a power look or deprovision that the pool acts
    /// on, a sweep that found the pool due. A reconcile answers one or more of them.
    pub reconcile_messages: usize,
    /// Runs of the timeouts sweep (every minute).
    pub sweeps: usize,
    /// Of those, full passes (every pool enqueued).
    pub full_sweeps: usize,
    /// Sweeps that enqueued this pool: its full passes, and the runs that found it due between them.
    pub sweep_reconciles: usize,
    /// DynamoDB write units of the table writes the functions send, counted write by write ([`crate::units`]):
    /// the reconcile's, the power function's, the claim API's. The tick item's are counted apart.
    pub write_units: usize,
    /// The same units by the function and step that sent them, and by what they wrote.
    pub written: Written,
    /// Read units of the reconciles' Queries of the pool's partition, each a unit per 4 KB of all its items
    /// ([`crate::units::Partition`]).
    pub query_units: usize,
    /// Reconciles that rewrote the pool item (its status).
    pub pool_writes: usize,
    /// The pool item's size when last written, bytes as DynamoDB counts them (`item_bytes`), without the forecast
    /// profile's buckets (kept in their own item).
    pub pool_item_bytes: usize,
    /// Of the pool writes, those that wrote the profile's item too (its buckets changed: a bucket closed).
    pub profile_writes: usize,
    /// The profile item's size when last written, bytes as DynamoDB counts them.
    pub profile_item_bytes: usize,
    /// Clusters in the pool at the end.
    pub clusters: usize,
    /// Looks the claimants of claims that waited took, each a request to the claim API, following its hints
    /// ([`crate::claimant`]).
    pub claim_looks: usize,
    /// The looks they would have taken on their own gaps alone, every 2 s.
    pub claim_looks_unhinted: usize,
    /// Of the claims that waited, those made while older ones waited for the pool's tick: the claim API read the
    /// tick item for the answer to their making too.
    pub claims_made_after_others: usize,
}

/// What the pool had asked of the table by the start of one minute of the measured weeks: the counters a
/// provisioned table's capacity follows ([`crate::capacity`]), each summed from the measured weeks' start. A
/// minute's own is the next minute's reading less its own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Meter {
    /// Write units of the table's items and events (the tick item's included): the `assign` index is local, so
    /// its entries are the table's too.
    pub table_writes: usize,
    /// Write units of the pool items' copies in the `pools` index, a global one with its own capacity.
    pub index_writes: usize,
    /// Read units of the reconciles' Queries.
    pub query_units: usize,
    /// Claims made.
    pub claims: usize,
    /// Nudges.
    pub nudges: usize,
    /// Tick links.
    pub ticks: usize,
    /// Looks.
    pub looks: usize,
}

impl Meter {
    /// What was asked between `self` and the later reading `then`.
    pub fn since(self, then: Self) -> Self {
        Self {
            table_writes: then.table_writes - self.table_writes,
            index_writes: then.index_writes - self.index_writes,
            query_units: then.query_units - self.query_units,
            claims: then.claims - self.claims,
            nudges: then.nudges - self.nudges,
            ticks: then.ticks - self.ticks,
            looks: then.looks - self.looks,
        }
    }
}

/// Write units by what sent them ([`Usage::written`]), each by what it wrote ([`Parts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Written {
    /// The claim API: a claim made (with its cluster when one is ready, or pending) and a release asked for.
    pub claim_api: Parts,
    /// The reconcile's plans: assignments of waiting claims, clusters created, deleted and powered, claims
    /// released, the pool item (and its profile's).
    pub reconcile: Parts,
    /// The power function's intents, written before each cloud call.
    pub power_intents: Parts,
    /// Its outcomes: what a call or a look changed.
    pub power_outcomes: Parts,
    /// Its removal of a deprovisioned cluster's item.
    pub deprovisions: Parts,
}

impl Written {
    /// Each source with its name.
    pub fn each(&self) -> [(&'static str, Parts); 5] {
        [
            ("claim API", self.claim_api),
            ("reconcile", self.reconcile),
            ("power: intents", self.power_intents),
            ("power: outcomes", self.power_outcomes),
            ("power: deprovisions", self.deprovisions),
        ]
    }

    /// All of them.
    pub fn total(&self) -> Parts {
        let mut all = Parts::default();
        for (_, parts) in self.each() {
            all += parts;
        }
        all
    }
}

/// How long after a transition's machines were done the power function's next look came: what its look
/// schedule adds before the pool can act (hand the cluster to a claim, stop an installed one, count it Hibernated).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Noticed {
    /// Installs.
    pub install: Lateness,
    /// Resumes.
    pub resume: Lateness,
    /// Stops.
    pub stop: Lateness,
    /// Resumes done while a claim waited: what the claim waited longer (the simulation serves it at once).
    pub resume_waited_on: Lateness,
    /// Installs done while a claim waited.
    pub install_waited_on: Lateness,
    /// Deprovisions: from the machines gone to the look that deletes the cluster's item (it counts against the
    /// pool's size and concurrency until then).
    pub deprovision: Lateness,
    /// Claims that waited: from being readable Ready to their claimant's look that saw it, following the claim
    /// API's hints ([`crate::claimant`]).
    pub claim_seen: Lateness,
    /// The same, on the claimant's own gaps alone.
    pub claim_seen_unhinted: Lateness,
}

/// Delays, summarised.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lateness {
    /// Transitions measured.
    pub count: usize,
    /// Mean, seconds.
    pub mean_s: f64,
    /// Median.
    pub p50_s: f64,
    /// 95th percentile.
    pub p95_s: f64,
    /// The latest.
    pub max_s: f64,
}

impl Lateness {
    /// The summary of `secs`.
    pub fn of(mut secs: Vec<f64>) -> Self {
        if secs.is_empty() {
            return Self::default();
        }
        secs.sort_by(f64::total_cmp);
        Self {
            count: secs.len(),
            mean_s: secs.iter().sum::<f64>() / secs.len() as f64,
            p50_s: percentile(&secs, 0.5),
            p95_s: percentile(&secs, 0.95),
            max_s: secs[secs.len() - 1],
        }
    }
}

/// The `q` percentile of `sorted` (nearest rank); 0 when it is empty.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// Cluster-hours by what the machines were doing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hours {
    /// Unclaimed with machines running (Running spares, and resumes and stops under way): what the running-count
    /// policy controls.
    pub spare_running: f64,
    /// Installing (machines running).
    pub installing: f64,
    /// Machines stopped.
    pub hibernated: f64,
    /// Claimed with machines running: the claimants' time, the same under every policy.
    pub claimed: f64,
}

/// The pool at one instant, for the picture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// When.
    pub at: Timestamp,
    /// Unclaimed clusters with machines running.
    pub running: usize,
    /// Clusters hibernated.
    pub hibernating: usize,
    /// Clusters installing.
    pub installing: usize,
    /// Clusters claimed.
    pub claimed: usize,
}

/// One policy's result on one trace.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// Policy name.
    pub policy: String,
    /// Trace name.
    pub trace: String,
    /// Claims made.
    pub claims: usize,
    /// Claims still waiting at the end (counted with their wait so far).
    pub unserved: usize,
    /// Share of claims given a Running cluster at once, in percent.
    pub instant_percent: f64,
    /// Claim wait percentiles and maximum, seconds.
    pub wait_p50_s: f64,
    /// 95th percentile.
    pub wait_p95_s: f64,
    /// 99th percentile.
    pub wait_p99_s: f64,
    /// Longest.
    pub wait_max_s: f64,
    /// Cluster-hours.
    pub hours: Hours,
    /// Cost of the pool (spares, installs, hibernated clusters), $.
    pub pool_cost: f64,
    /// Pool cost plus the claimed clusters' running time, $.
    pub total_cost: f64,
    /// Clusters created.
    pub installs: usize,
    /// Clusters that broke (install failed or a power transition timed out).
    pub broken: usize,
    /// Claims that waited longer than the pool's resume timeout: they waited on a resume that broke (or, with
    /// the pool exhausted, on an install).
    pub claims_hit_broken: usize,
    /// Actuator calls.
    pub calls: Calls,
    /// Conditional writes to the table (planner writes and power-state writes).
    pub store_writes: usize,
    /// What Apiary's functions did.
    pub usage: Usage,
    /// How late the power function's looks noticed transitions done.
    pub noticed: Noticed,
    /// Reconciles run.
    pub reconciles: usize,
    /// The pool over time.
    #[serde(skip)]
    pub samples: Vec<Sample>,
    /// Each claim's arrival and wait.
    #[serde(skip)]
    pub waits: Vec<(Timestamp, TimeDelta)>,
    /// When each look of a waiting claim's claimant came ([`Usage::claim_looks`]), in order.
    #[serde(skip)]
    pub looks: Vec<Timestamp>,
    /// When each claim made while older ones waited for the tick was made ([`Usage::claims_made_after_others`]).
    #[serde(skip)]
    pub made_after_others: Vec<Timestamp>,
    /// The table's counters at the start of each minute of the measured weeks, and at their end.
    #[serde(skip)]
    pub minutes: Vec<Meter>,
    /// When the first of those minutes began.
    #[serde(skip)]
    pub minutes_from: Option<Timestamp>,
}

impl Outcome {
    /// Summarises a finished simulation.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        policy: &str,
        trace: &str,
        claims: usize,
        unserved: usize,
        waits: Vec<(Timestamp, TimeDelta)>,
        hours: Hours,
        costs: Costs,
        installs: usize,
        broken: usize,
        calls: Calls,
        store_writes: usize,
        reconciles: usize,
        samples: Vec<Sample>,
    ) -> Self {
        let mut secs: Vec<f64> = waits.iter().map(|(_, w)| w.num_milliseconds() as f64 / 1000.0).collect();
        secs.sort_by(f64::total_cmp);
        let pct = |q| percentile(&secs, q);
        let instant = secs.iter().filter(|s| **s == 0.0).count();
        let pool_cost = (hours.spare_running + hours.installing) * costs.running_per_hour
            + hours.hibernated * costs.hibernated_per_hour;
        Self {
            policy: policy.to_string(),
            trace: trace.to_string(),
            claims,
            unserved,
            instant_percent: if secs.is_empty() { 100.0 } else { 100.0 * instant as f64 / secs.len() as f64 },
            wait_p50_s: pct(0.50),
            wait_p95_s: pct(0.95),
            wait_p99_s: pct(0.99),
            wait_max_s: secs.last().copied().unwrap_or(0.0),
            hours,
            pool_cost,
            total_cost: pool_cost + hours.claimed * costs.running_per_hour,
            installs,
            broken,
            claims_hit_broken: 0,
            calls,
            store_writes,
            usage: Usage::default(),
            noticed: Noticed::default(),
            reconciles,
            samples,
            waits,
            looks: Vec::new(),
            made_after_others: Vec::new(),
            minutes: Vec::new(),
            minutes_from: None,
        }
    }
}

/// The comparison table of one trace's outcomes, as Markdown.
pub fn table(outcomes: &[Outcome]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| policy | instant | wait p50 | p95 | p99 | max | spare running h | installing h | hibernated h | installs | broken | pool cost $ | total cost $ | start/stop calls | writes |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for o in outcomes {
        let _ = writeln!(
            out,
            "| {} | {:.1}% | {} | {} | {} | {} | {:.0} | {:.0} | {:.0} | {} | {} | {:.0} | {:.0} | {}/{} | {} |",
            o.policy,
            o.instant_percent,
            secs(o.wait_p50_s),
            secs(o.wait_p95_s),
            secs(o.wait_p99_s),
            secs(o.wait_max_s),
            o.hours.spare_running,
            o.hours.installing,
            o.hours.hibernated,
            o.installs,
            o.broken,
            o.pool_cost,
            o.total_cost,
            o.calls.start,
            o.calls.stop,
            o.store_writes,
        );
    }
    out
}

/// The canary comparison, as Markdown: per policy, without and with canaries.
pub fn canary_table(pairs: &[(Outcome, Outcome)]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| policy | claims waiting out a broken resume: without / with | clusters broken: without / with | canary resumes | spare running h added | pool cost added $ |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
    for (without, with) in pairs {
        let _ = writeln!(
            out,
            "| {} | {} / {} | {} / {} | {} | {:.0} | {:.0} |",
            without.policy,
            without.claims_hit_broken,
            with.claims_hit_broken,
            without.broken,
            with.broken,
            with.calls.start as i64 - without.calls.start as i64,
            with.hours.spare_running - without.hours.spare_running,
            with.pool_cost - without.pool_cost,
        );
    }
    out
}

fn secs(s: f64) -> String {
    if s < 60.0 {
        format!("{s:.0}s")
    } else if s < 3600.0 {
        format!("{:.1}m", s / 60.0)
    } else {
        format!("{:.1}h", s / 3600.0)
    }
}

/// A picture of the simulated period: running spares, hibernated, installing and claimed clusters over time,
/// and each claim's wait as a red mark below (taller is longer, the top of the strip is 10 minutes or more).
pub fn svg(o: &Outcome, start: Timestamp, length: TimeDelta) -> String {
    let (w, h, left, top, plot_h, strip_h) = (1400.0, 520.0, 60.0, 40.0, 360.0, 60.0);
    let plot_w = w - left - 20.0;
    let span = length.num_seconds().max(1) as f64;
    let x = |t: Timestamp| left + plot_w * ((t - start).num_seconds() as f64 / span);
    let end = start + length;
    let samples: Vec<&Sample> = o.samples.iter().filter(|s| s.at >= start && s.at <= end).collect();
    let max = samples.iter().map(|s| s.running.max(s.hibernating).max(s.installing).max(s.claimed)).max().unwrap_or(1);
    let max = (max.max(1) as f64 * 1.1).ceil();
    let y = |v: usize| top + plot_h - plot_h * (v as f64 / max);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{left}" y="22" font-size="15">{} on {}: {:.1}% instant, wait p95 {}, {:.0} spare running h, pool cost ${:.0} (the measured weeks)</text>"#,
        o.policy,
        o.trace,
        o.instant_percent,
        secs(o.wait_p95_s),
        o.hours.spare_running,
        o.pool_cost
    );
    // A grid of days, or of two hours for a day's picture.
    let (step, label) = if span <= 86_400.0 { (TimeDelta::hours(2), "%H:%M") } else { (TimeDelta::days(1), "%a %d") };
    let steps = (span / step.num_seconds() as f64).ceil() as i32;
    for d in 0..=steps {
        let t = start + step * d;
        let xd = x(t);
        if xd > left + plot_w - 30.0 {
            break;
        }
        let _ = writeln!(
            out,
            r##"<line x1="{xd:.1}" y1="{top}" x2="{xd:.1}" y2="{:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" fill="#666">{}</text>"##,
            top + plot_h + strip_h,
            xd + 3.0,
            top + plot_h + strip_h + 16.0,
            t.format(label)
        );
    }
    for v in [0.0, max / 2.0, max] {
        let yv = top + plot_h - plot_h * (v / max);
        let _ = writeln!(
            out,
            r##"<line x1="{left}" y1="{yv:.1}" x2="{:.1}" y2="{yv:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" text-anchor="end" fill="#666">{v:.0}</text>"##,
            left + plot_w,
            left - 6.0,
            yv + 4.0
        );
    }
    type Series = (&'static str, &'static str, fn(&Sample) -> usize);
    let series: [Series; 4] = [
        ("running spares", "#2e9e44", |s| s.running),
        ("hibernating", "#3a6fd8", |s| s.hibernating),
        ("installing", "#e08a00", |s| s.installing),
        ("claimed", "#8a3ab9", |s| s.claimed),
    ];
    for (i, (name, colour, value)) in series.iter().enumerate() {
        let points: Vec<String> = samples.iter().map(|s| format!("{:.1},{:.1}", x(s.at), y(value(s)))).collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{}"/>"#,
            points.join(" ")
        );
        let lx = left + 10.0 + 140.0 * i as f64;
        let _ = writeln!(
            out,
            r#"<rect x="{lx}" y="{:.1}" width="12" height="3" fill="{colour}"/><text x="{:.1}" y="{:.1}">{name}</text>"#,
            top + 8.0,
            lx + 16.0,
            top + 13.0
        );
    }
    let strip_top = top + plot_h + 4.0;
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#c00">waits</text>"##,
        left - 6.0,
        strip_top + strip_h / 2.0
    );
    for (at, wait) in o.waits.iter().filter(|(at, w)| *w > TimeDelta::zero() && *at >= start && *at <= end) {
        let frac = (wait.num_seconds() as f64 / 600.0).min(1.0);
        let xa = x(*at);
        let _ = writeln!(
            out,
            r##"<line x1="{xa:.1}" y1="{:.1}" x2="{xa:.1}" y2="{:.1}" stroke="#c00" stroke-opacity="0.6"/>"##,
            strip_top + strip_h,
            strip_top + strip_h - (strip_h - 4.0) * frac.max(0.05)
        );
    }
    out.push_str("</svg>\n");
    out
}
