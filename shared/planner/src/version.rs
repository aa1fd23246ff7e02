//! `poolVersion`: which spec inputs a cluster was made from, to find stale clusters.
//!
//! SHA-256 over canonical JSON of the inputs that shape a cluster (platform, baseDomain, an external installer's
//! URL, the release it installs and the install-config template it renders), plus a fixed
//! marker when an inventory is present — never the inventory's contents (seed 003), so adding or removing an
//! entry does not make every cluster stale. Size, runningCount, timeouts, lifetimes, labels and schedules are
//! not inputs. The algorithm is fixed: the same spec gives the same version on every build and release.

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::model::{Platform, PoolSpec};

/// Appended before hashing when the pool has an inventory (seed 003).
const INVENTORY_MARKER: &str = "apiary:inventory:v1";

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Inputs<'a> {
    platform: &'a Platform,
    base_domain: Option<&'a str>,
    /// The external installer's URL (not its signing secret, which may rotate): absent, the version is what it
    /// was before pools could name one.
    #[serde(skip_serializing_if = "Option::is_none")]
    installer: Option<&'a str>,
    /// The release the installer installs: absent, the version is what it was before pools could name one.
    #[serde(skip_serializing_if = "Option::is_none")]
    release: Option<&'a str>,
    /// The install-config template it renders, by reference: absent, the version is what it was before pools
    /// could name one.
    #[serde(skip_serializing_if = "Option::is_none")]
    install_config_template: Option<&'a str>,
}

/// The pool version of `spec`: 16 hex digits.
pub fn pool_version(spec: &PoolSpec) -> String {
    let installer = spec.provisioner.as_ref().and_then(|p| p.webhook.as_ref()).map(|w| w.url.as_str());
    let inputs = Inputs {
        platform: &spec.platform,
        base_domain: spec.base_domain.as_deref(),
        installer,
        release: spec.release.as_deref(),
        install_config_template: spec.install_config_template.as_deref(),
    };
    // Struct fields serialize in declaration order and maps are BTreeMaps: the JSON is canonical.
    let json = serde_json::to_vec(&inputs).unwrap_or_default();
    let mut hasher = Sha256::new();
    hasher.update(&json);
    if spec.inventory.is_some() {
        hasher.update(INVENTORY_MARKER.as_bytes());
    }
    hasher.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect()
}
