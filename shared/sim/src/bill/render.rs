//! The bill as text: a pool's lines, the table of pools and stacks `make bill` writes to docs/bill.md, and what
//! each setting changes, with the writes and reads behind them.

use std::fmt::Write as _;

use super::*;

/// The month's bill of pools like each of `rows` (a name, its outcome, the period it measured), for 1, 10 and
/// 100 of them, beside an always-on Hive: the summary of `apiary-sim bill`, as BENCHMARKS.md keeps it.
pub fn summary(rows: &[(String, &Outcome, TimeDelta)]) -> String {
    let (prices, a) = (Prices::default(), Assumptions::default());
    let hive = hive_monthly(&prices, &a);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| pools like (50 clusters each) | claims a month each | 1 pool | 10 pools | 100 pools | 100 pools, `TableCapacity` provisioned, `ClaimEndpoint` function-url | and `ProvisionedTargetUtilization` 90 | always-on Hive |"
    );
    let cheapest = Assumptions { function_url: true, ..a };
    let fullest = Scaling { target: Scaling::FULLEST, ..Scaling::TEMPLATE };
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for (name, o, measured) in rows {
        let lines = lines(o, *measured, &prices, &a);
        let claims = o.claims as f64 * MONTH_HOURS / hours(*measured).max(1e-9);
        let [one, ten, hundred] = [1.0, 10.0, 100.0].map(|n| monthly(&lines, n));
        let without_gateway = self::lines(o, *measured, &prices, &cheapest);
        let [provisioned, fuller] = [&Scaling::TEMPLATE, &fullest].map(|s| {
            provisioned(o, 100, &prices, &cheapest, s)
                .map_or("–".to_string(), |p| format!("${:.2}", monthly_provisioned(&without_gateway, &p, 100)))
        });
        let _ = writeln!(
            out,
            "| {name} | {} | ${one:.2} | ${ten:.2} | ${hundred:.2} | {provisioned} | {fuller} | ${hive:.0} |",
            two_figures(claims)
        );
    }
    out
}

/// `n` to two significant figures, its thousands set apart by spaces (`8 700`, `520`).
pub(super) fn two_figures(n: f64) -> String {
    if n < 1.0 {
        return format!("{n:.0}");
    }
    let step = 10f64.powi(n.log10().floor() as i32 - 1).max(1.0);
    dollars((n / step).round() * step)
}

/// `n` rounded to a whole number, its thousands set apart by spaces (`7 138`).
pub fn dollars(n: f64) -> String {
    let digits = format!("{n:.0}");
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// The bill as Markdown: each line for one pool, then 1, 10 and 100 pools beside Hive.
pub fn table(o: &Outcome, measured: TimeDelta) -> String {
    let (prices, a) = (Prices::default(), Assumptions::default());
    let lines = lines(o, measured, &prices, &a);
    let mut out = String::new();
    let _ = writeln!(out, "| per month | per pool | stack, fixed | price | $ for 1 pool | $ for 10 | $ for 100 |");
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
    for l in &lines {
        let cost = |n: f64| l.count(n) * l.price;
        // A pool's share of a stack-wide series is a fraction of one; a bound says how many at most.
        let per_pool = if l.per_pool > 0.0 && l.per_pool < 10.0 && l.per_pool.fract() != 0.0 {
            format!("{:.2}", l.per_pool)
        } else {
            format!("{:.0}", l.per_pool)
        };
        let fixed =
            if l.cap.is_finite() { format!("{:.0}, at most {:.0}", l.fixed, l.cap) } else { format!("{:.0}", l.fixed) };
        let _ = writeln!(
            out,
            "| {} | {per_pool} | {fixed} | ${:.3e} | {:.2} | {:.2} | {:.2} |",
            l.item,
            l.price,
            cost(1.0),
            cost(10.0),
            cost(100.0)
        );
    }
    let _ = writeln!(
        out,
        "| **Apiary** | | | | **{:.2}** | **{:.2}** | **{:.2}** |",
        monthly(&lines, 1.0),
        monthly(&lines, 10.0),
        monthly(&lines, 100.0)
    );
    for c in changes(o, measured) {
        let (per_pool, fixed) = match (c.series, c.alarms) {
            (Some((p, f)), _) => (format!("{p:.1} series"), format!("{f:.0} series")),
            (None, Some(alarms)) => (String::new(), format!("{alarms:.0} alarms")),
            (None, None) => (String::new(), String::new()),
        };
        let [one, ten, hundred] = c.by.map(signed);
        let _ = writeln!(out, "| {} | {per_pool} | {fixed} | | {one} | {ten} | {hundred} |", c.what);
    }
    let hive = hive_monthly(&prices, &a);
    let _ = writeln!(
        out,
        "| always-on Hive (EKS + {} × m6i.large) | | | | {hive:.2} | {hive:.2} | {hive:.2} |",
        a.hive_nodes
    );
    let fuller = Scaling { target: Scaling::FULLEST, ..Scaling::TEMPLATE };
    let hundred = |scaling: &Scaling| provisioned(o, 100, &prices, &a, scaling);
    if let (Some(p), Some(f)) = (hundred(&Scaling::TEMPLATE), hundred(&fuller)) {
        let _ = writeln!(
            out,
            "\nProvisioned for 100 pools: the table's capacity peaks at {:.0} write and {:.0} read units a second; {:.3} % of \
             the units asked for were beyond the capacity and its burst within their minute (throttled, and retried). \
             At {:.0} % use: {:.0} and {:.0}, {:.3} % throttled.",
            p.peak.0,
            p.peak.1,
            100.0 * p.throttled,
            100.0 * Scaling::FULLEST,
            f.peak.0,
            f.peak.1,
            100.0 * f.throttled
        );
    }
    out
}

/// What one stack setting changes in the bill of pools like an outcome's ([`changes`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// A short name for it, as docs/bill.md keys its row.
    pub key: &'static str,
    /// What the setting is, as the bill's table says it.
    pub what: String,
    /// The metric series it publishes, per pool and for the stack, when it changes them.
    pub series: Option<(f64, f64)>,
    /// The alarms it adds, when it adds some.
    pub alarms: Option<f64>,
    /// How much more (or, below zero, less) a month for one, ten and a hundred pools.
    pub by: [f64; 3],
}

/// What each stack setting changes in the bill of pools like `o` (measured over `measured`) against the stack's
/// defaults: those that cost more (waiters long-polling, `LogLevel` info, `Monitoring` dashboard and pools), the
/// table provisioned (and at the fullest use auto scaling allows, against provisioned at the template's), the claim
/// API at its function's URL, and the power queue polled by as few pollers as Lambda may keep.
pub fn changes(o: &Outcome, measured: TimeDelta) -> Vec<Change> {
    let (prices, a) = (Prices::default(), Assumptions::default());
    let base = lines(o, measured, &prices, &a);
    let pools = [1.0, 10.0, 100.0];
    let against = |more: &[Line]| pools.map(|n| monthly(more, n) - monthly(&base, n));
    let mut out = vec![];
    let costlier = [
        (
            "long-polls",
            "waiters long-polling (`GET ?wait=20s`), not the CLI's requests answered at once",
            Assumptions { long_polls: true, ..a },
        ),
        ("log-info", "`LogLevel` info: each run's lines", Assumptions { log_info: true, ..a }),
        (
            "monitoring-dashboard",
            "`Monitoring` dashboard: every series stack-wide, the dashboard",
            Assumptions { monitoring: Monitoring::Dashboard, ..a },
        ),
        (
            "monitoring-pools",
            "`Monitoring` pools: and each pool's own series",
            Assumptions { monitoring: Monitoring::Pools, ..a },
        ),
    ];
    for (key, what, setting) in costlier {
        let more = lines(o, measured, &prices, &setting);
        let series = more
            .iter()
            .find(|l| l.item == "CloudWatch metric series")
            .map(|l| (l.per_pool, l.fixed))
            .filter(|_| setting.monitoring != a.monitoring);
        out.push(Change { key, what: format!("with {what}"), series, alarms: None, by: against(&more) });
    }
    let provisioned = [1, 10, 100].map(|n| provisioned(o, n, &prices, &a, &Scaling::TEMPLATE));
    let fuller = Scaling { target: Scaling::FULLEST, ..Scaling::TEMPLATE };
    let fullest = [1, 10, 100].map(|n| self::provisioned(o, n, &prices, &a, &fuller));
    if let ([Some(p1), Some(p10), Some(p100)], [Some(f1), Some(f10), Some(f100)]) = (provisioned, fullest) {
        let on = |p: &Provisioning, n: usize| monthly_provisioned(&base, p, n);
        out.push(Change {
            key: "provisioned",
            what: "with `TableCapacity` provisioned: the table's capacity under auto scaling, for the units above"
                .into(),
            series: None,
            alarms: Some(SCALED_DIMENSIONS * ALARMS_PER_DIMENSION),
            by: [
                on(&p1, 1) - monthly(&base, 1.0),
                on(&p10, 10) - monthly(&base, 10.0),
                on(&p100, 100) - monthly(&base, 100.0),
            ],
        });
        out.push(Change {
            key: "provisioned-90",
            what: format!(
                "and with `ProvisionedTargetUtilization` {:.0}: the capacity kept at that use, not {:.0} %",
                100.0 * Scaling::FULLEST,
                100.0 * Scaling::TEMPLATE.target
            ),
            series: None,
            alarms: None,
            by: [on(&f1, 1) - on(&p1, 1), on(&f10, 10) - on(&p10, 10), on(&f100, 100) - on(&p100, 100)],
        });
    }
    let url = lines(o, measured, &prices, &Assumptions { function_url: true, ..a });
    out.push(Change {
        key: "function-url",
        what: "with `ClaimEndpoint` function-url: the claim API at its function's URL, not API Gateway".into(),
        series: None,
        alarms: None,
        by: against(&url),
    });
    let fewest = lines(o, measured, &prices, &Assumptions { power_pollers: FEWEST_POLLERS, ..a });
    out.push(Change {
        key: "two-pollers",
        what: format!(
            "with the power queue polled by {FEWEST_POLLERS:.0} of Lambda's pollers, not {POLLERS:.0}: as few as it may keep on a standard queue while traffic is low (never where a mapping sets `MaximumConcurrency`; the template's set none)"
        ),
        series: None,
        alarms: None,
        by: against(&fewest),
    });
    out
}

/// `x` with its sign, to the cent: `+0.12`, `-3.40`; under half a cent either way, `0.00`.
pub(super) fn signed(x: f64) -> String {
    if x.abs() < 0.005 {
        "0.00".to_string()
    } else if x < 0.0 {
        format!("-{:.2}", -x)
    } else {
        format!("+{x:.2}")
    }
}

/// Where the bill's write units go, as Markdown: a month of one pool's, by what sent them (each function and
/// step, and the tick item) and by what they wrote (the items, the pool items' copies in the `pools` index, the
/// `assign` index's entries, the events). Transactions count twice throughout.
pub fn writes_table(o: &Outcome, measured: TimeDelta) -> String {
    let scale = MONTH_HOURS / hours(measured).max(1e-9);
    let written = o.usage.written;
    let tick = Parts { items: o.usage.tick_write_units, ..Parts::default() };
    let all = written.total().total() + tick.total();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| write units a month, one pool | items | `pools` index | `assign` index | events | all | share |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
    let mut row = |what: &str, p: Parts| {
        let month = |n: usize| format!("{:.0}", n as f64 * scale);
        let share = 100.0 * p.total() as f64 / all.max(1) as f64;
        let _ = writeln!(
            out,
            "| {what} | {} | {} | {} | {} | {} | {share:.1} % |",
            month(p.items),
            month(p.copies),
            month(p.entries),
            month(p.events),
            month(p.total())
        );
    };
    for (what, parts) in written.each() {
        row(what, parts);
    }
    row("power: the tick item", tick);
    let mut total = written.total();
    total += tick;
    row("**all**", total);
    out
}

/// Where the bill's read units go, as Markdown: a month of one pool's, by what reads them.
pub fn reads_table(o: &Outcome, measured: TimeDelta) -> String {
    let reads = reads(o, measured, &Assumptions::default());
    let all: f64 = reads.iter().map(|(_, n)| n).sum();
    let mut out = String::new();
    let _ = writeln!(out, "| read units a month, one pool | units | share |");
    let _ = writeln!(out, "|---|---:|---:|");
    for (what, n) in reads {
        let _ = writeln!(out, "| {what} | {n:.0} | {:.1} % |", 100.0 * n / all.max(1e-9));
    }
    let _ = writeln!(out, "| **all** | {all:.0} | 100.0 % |");
    out
}

#[cfg(test)]
mod tests {
    use super::two_figures;

    #[test]
    fn claims_are_shown_to_two_figures_with_their_thousands_apart() {
        let shown: Vec<String> =
            [0.4, 7.0, 52.0, 518.6, 8_712.0, 8_650.0, 87_120.0, 1_234_567.0].map(two_figures).into();
        assert_eq!(shown, ["0", "7", "52", "520", "8 700", "8 700", "87 000", "1 200 000"]);
    }
}
