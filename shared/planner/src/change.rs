//! What a change of a pool's spec would do, by the planner's own rules, before it is made: the fields it changes,
//! and the clusters the reconcile would replace because of it (`apiary pool apply --diff`).
//!
//! A cluster is replaced for a change when it is not replaced under the spec it was made with and is under the new
//! one: it is unclaimed and not already on its way out, and either its `poolVersion` is not the new spec's
//! ([`crate::pool_version`]: the platform, `baseDomain`, the installer, the release, the install-config template)
//! or it holds an inventory name the new inventory removed or whose entry's parameters changed (seed 003). The
//! reconcile classifies by the same rules ([`crate::plan`]'s slots); it replaces them one at a time, within
//! `maxConcurrent`.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::model::{Cluster, PoolSpec};
use crate::plan::DeleteReason;
use crate::version::pool_version;

/// One field a change sets, changes or removes, as a dotted path (`platform.aws.region`, `labels.team`).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldChange {
    /// The field.
    pub field: String,
    /// Its value before, if it had one.
    pub before: Option<Value>,
    /// Its value after, if it has one.
    pub after: Option<Value>,
}

/// The fields `after` changes from `before`, in field order. Both are compared as the store keeps them (each
/// deserialized spec serialized again), so a default written out or left implicit is no change. A list is one
/// field: its entries are compared as a whole.
pub fn changed_fields(before: &PoolSpec, after: &PoolSpec) -> Vec<FieldChange> {
    let (mut old, mut new) = (BTreeMap::new(), BTreeMap::new());
    flatten("", &serde_json::to_value(before).unwrap_or_default(), &mut old);
    flatten("", &serde_json::to_value(after).unwrap_or_default(), &mut new);
    let fields: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    fields
        .into_iter()
        .filter(|f| old.get(*f) != new.get(*f))
        .map(|f| FieldChange { field: f.clone(), before: old.get(f).cloned(), after: new.get(f).cloned() })
        .collect()
}

fn flatten(path: &str, value: &Value, out: &mut BTreeMap<String, Value>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                let field = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                flatten(&field, v, out);
            }
        }
        Value::Null => {}
        _ => {
            out.insert(path.to_owned(), value.clone());
        }
    }
}

/// The clusters (by id, with why) the reconcile would replace because the pool's spec became `after` instead of
/// `before`, in the order given.
pub fn replaced(before: &PoolSpec, after: &PoolSpec, clusters: &[Cluster]) -> Vec<(String, DeleteReason)> {
    let (was, will) = (pool_version(before), pool_version(after));
    clusters
        .iter()
        .filter(|c| fate(before, &was, c).is_none())
        .filter_map(|c| fate(after, &will, c).map(|why| (c.id.clone(), why)))
        .collect()
}

/// Why the reconcile would replace `c` under `spec` (whose version is `version`), if it would: the pool's own
/// reasons only (a cluster claimed, released, broken or already deleting is not the spec's to replace).
fn fate(spec: &PoolSpec, version: &str, c: &Cluster) -> Option<DeleteReason> {
    if c.deleting || c.marked_for_deletion || c.claim.is_some() {
        return None;
    }
    if c.cluster_name != c.id && spec.inventory.is_some() {
        match spec.inventory_parameters(&c.cluster_name) {
            None => return Some(DeleteReason::InventoryNameRemoved),
            Some(p) if *p != c.parameters => return Some(DeleteReason::InventoryEntryChanged),
            Some(_) => {}
        }
    }
    (c.pool_version.as_deref() != Some(version)).then_some(DeleteReason::Stale)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use serde_json::json;

    use super::*;
    use crate::model::{FakePlatform, InventoryEntry, Platform};

    fn spec() -> PoolSpec {
        let mut s = PoolSpec::new(2, Platform::Fake(FakePlatform::default()));
        s.labels.insert("team".into(), "ci".into());
        s
    }

    fn cluster(id: &str, name: &str, version: &str) -> Cluster {
        let mut c = Cluster::new(id, name, format!("{id}-x"), chrono::Utc.timestamp_opt(0, 0).unwrap());
        c.pool_version = Some(version.to_owned());
        c
    }

    #[test]
    fn the_fields_a_change_sets_changes_and_removes_are_named_by_path() {
        let before = spec();
        let mut after = spec();
        after.size = 3;
        after.labels.clear();
        after.labels.insert("cost".into(), "ci-1".into());
        after.base_domain = Some("ci.example.com".into());
        let changed = changed_fields(&before, &after);
        let fields: Vec<&str> = changed.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["baseDomain", "labels.cost", "labels.team", "size"]);
        assert_eq!(changed[3].before, Some(json!(2)));
        assert_eq!(changed[3].after, Some(json!(3)));
        assert_eq!(changed[2].after, None, "a label removed");
        assert_eq!(changed_fields(&before, &before.clone()), []);
    }

    #[test]
    fn a_change_of_version_replaces_the_unclaimed_clusters_and_no_other() {
        let before = spec();
        let version = pool_version(&before);
        let mut claimed = cluster("c1", "c1", &version);
        claimed.claim = Some("job".into());
        let mut deleting = cluster("c3", "c3", &version);
        deleting.deleting = true;
        let older = cluster("c4", "c4", "0000000000000000");
        let clusters = [claimed, cluster("c2", "c2", &version), deleting, older];
        // Labels and size are not inputs of the version: nothing is replaced.
        let mut relabelled = spec();
        relabelled.size = 5;
        relabelled.labels.clear();
        assert_eq!(replaced(&before, &relabelled, &clusters), []);
        // A release is: the unclaimed current one goes; the one already stale was going anyway.
        let mut bumped = spec();
        bumped.release = Some("quay.io/openshift-release-dev/ocp-release:4.18.2-x86_64".into());
        assert_eq!(replaced(&before, &bumped, &clusters), [("c2".to_owned(), DeleteReason::Stale)]);
    }

    #[test]
    fn an_inventory_entry_removed_or_changed_replaces_its_holder() {
        let entry = |name: &str, workers: &str| InventoryEntry {
            name: Some(name.into()),
            parameters: BTreeMap::from([("workers".to_owned(), workers.to_owned())]),
        };
        let mut before = spec();
        before.inventory = Some(crate::model::Inventory {
            cluster_deployments: vec![entry("blue", "2"), entry("green", "2"), entry("red", "2")],
        });
        let version = pool_version(&before);
        let holder = |id: &str, name: &str| {
            let mut c = cluster(id, name, &version);
            c.parameters = BTreeMap::from([("workers".to_owned(), "2".to_owned())]);
            c
        };
        let clusters = [holder("c1", "blue"), holder("c2", "green"), holder("c3", "red")];
        let mut after = before.clone();
        after.inventory =
            Some(crate::model::Inventory { cluster_deployments: vec![entry("blue", "2"), entry("green", "3")] });
        assert_eq!(
            replaced(&before, &after, &clusters),
            [
                ("c2".to_owned(), DeleteReason::InventoryEntryChanged),
                ("c3".to_owned(), DeleteReason::InventoryNameRemoved)
            ]
        );
    }
}
