//! The table provisioned (`TableCapacity` `provisioned`): the capacity auto scaling holds for the units each
//! simulated minute asks for, and what it costs a month.

use super::*;

/// What the table's capacity costs a month provisioned (`TableCapacity` `provisioned`) for `pools` pools like this
/// one, under the template's auto scaling ([`crate::capacity`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Provisioning {
    /// The capacity's month, $: the table's and its `pools` index's, reads and writes.
    pub capacity: f64,
    /// The alarms auto scaling keeps on them (four a dimension), $ a month.
    pub alarms: f64,
    /// Of the units asked for, the share neither the capacity nor its burst covered in its minute.
    pub throttled: f64,
    /// The table's highest write and read capacity, units a second.
    pub peak: (f64, f64),
    /// Write and read units asked for in the measured weeks, the table's and its index's.
    pub asked: (f64, f64),
}

/// Dimensions auto scaling keeps: the table's reads and writes (its local `assign` index shares them), and its
/// `pools` index's.
pub const SCALED_DIMENSIONS: f64 = 4.0;

/// The alarms target tracking keeps on each dimension: the units used over and under the target, the capacity
/// over and under its bounds.
pub const ALARMS_PER_DIMENSION: f64 = 4.0;

/// [`Provisioning`] for `pools` pools like this one; `None` for a simulation that measured no minutes.
///
/// The pools have the same weeks and their busy hours together, as one company's pools have them, but not their
/// minutes: no two pools reconcile in the same instants. Each minute's use is the simulated pool's, summed over
/// the pools at offsets spread over an hour (the `k`th of `n` pools `⌊60 k / n⌋` minutes later, the weeks wrapping
/// around).
pub fn provisioned(o: &Outcome, pools: usize, prices: &Prices, a: &Assumptions, s: &Scaling) -> Option<Provisioning> {
    let from = o.minutes_from?;
    let minutes: Vec<Meter> = o.minutes.windows(2).map(|w| w[0].since(w[1])).collect();
    let r = ReadCosts::of(o, a);
    let (mut polls, mut told) = (vec![0.0; minutes.len()], vec![0.0; minutes.len()]);
    for (times, per_minute) in [(poll_times(o, a), &mut polls), (o.made_after_others.clone(), &mut told)] {
        for at in times {
            let minute = (at - from).num_minutes();
            if let Some(p) = usize::try_from(minute).ok().and_then(|m| per_minute.get_mut(m)) {
                *p += 1.0;
            }
        }
    }
    // Each sweep (one a minute) reads its record from the table, and every pool item from the index.
    let per_minute_sweeps = a.sweeps_per_hour / 60.0;
    let len = minutes.len();
    let offsets: Vec<usize> = (0..pools).map(|k| 60 * k / pools.max(1)).collect();
    let series = |f: &dyn Fn(usize, &Meter) -> f64| -> Vec<f64> {
        let one: Vec<f64> = minutes.iter().enumerate().map(|(i, m)| f(i, m)).collect();
        (0..len).map(|i| offsets.iter().map(|k| one[(i + len - k % len.max(1)) % len]).sum()).collect()
    };
    let table_writes = series(&|_, m| m.table_writes as f64);
    let index_writes = series(&|_, m| m.index_writes as f64);
    let table_reads: Vec<f64> = series(&|i, m| {
        m.query_units as f64
            + m.claims as f64 * r.claim
            + told[i]
            + polls[i] * r.poll
            + m.nudges as f64 * r.nudge
            + m.ticks as f64 * r.tick
            + m.looks as f64 * r.look
    })
    .into_iter()
    .map(|u| u + per_minute_sweeps)
    .collect();
    let index_reads = vec![pools as f64 * r.sweep * per_minute_sweeps; len];
    let [tw, tr] = [&table_writes, &table_reads].map(|u| provision(u, s));
    let [iw, ir] = [&index_writes, &index_reads].map(|u| provision(u, &s.index()));
    let scale = MONTH_HOURS / (len as f64 / 60.0).max(1e-9);
    let capacity = ((tw.unit_hours + iw.unit_hours) * prices.write_capacity_hour
        + (tr.unit_hours + ir.unit_hours) * prices.read_capacity_hour)
        * scale;
    let used: f64 = [tw, iw, tr, ir].iter().map(|p| p.used).sum();
    let throttled: f64 = [tw, iw, tr, ir].iter().map(|p| p.throttled).sum();
    Some(Provisioning {
        capacity,
        alarms: SCALED_DIMENSIONS * ALARMS_PER_DIMENSION * prices.alarm_month,
        throttled: throttled / used.max(1e-9),
        peak: (tw.peak, tr.peak),
        asked: (tw.used + iw.used, tr.used + ir.used),
    })
}

/// The month's bill for `pools` pools like this one with the table provisioned: the on-demand units' lines
/// replaced by the capacity and its alarms.
pub fn monthly_provisioned(lines: &[Line], p: &Provisioning, pools: usize) -> f64 {
    let pools = pools as f64;
    let on_demand = |item| lines.iter().find(|l| l.item == item).map_or(0.0, |l| l.count(pools) * l.price);
    monthly(lines, pools) - on_demand(WRITE_UNITS) - on_demand(READ_UNITS) + p.capacity + p.alarms
}
