//! The names of claims by labels: a claim made by selector has a name that is the stack's, held by an entry apart
//! from every pool's partition that says which pool holds the claim ([`apiary_ports::store::ClaimName`]).

use apiary_planner::{Claim, Pool};
use apiary_ports::store::Cond;
use apiary_ports::Deps;

use crate::error::ApiError;
use crate::pools::get_pool_item;

/// Who holds a claim's name.
pub(crate) enum NameHolder {
    /// The claim exists, in this pool.
    Claim(Box<Pool>, Box<Claim>),
    /// Nobody: a new claim writes the name's entry on this condition (absent, or naming the pool of a claim by
    /// that name no longer there, or one made there by its pool's name).
    Nobody { write_entry_if: Cond },
}

/// Who holds claim name `claim` now, read strongly. The entry is the authority: the claim of that name in the pool
/// it names is the name's if it is the claim made with the entry (the same owner, made at the time the entry
/// keeps), even when a reconcile of a release that does not know `selector` rewrote it without one; an entry from
/// before the time was kept goes by the claim's `selector`.
pub(crate) async fn name_holder(deps: &Deps, claim: &str) -> Result<NameHolder, ApiError> {
    let Some(entry) = deps.store.claim_name(claim).await? else {
        return Ok(NameHolder::Nobody { write_entry_if: Cond::Absent });
    };
    let same = |c: &Claim| match entry.created_at {
        Some(at) => c.created_at == at && c.owner == entry.owner,
        None => c.selector.is_some(),
    };
    match deps.store.get_claim(&entry.holder, claim).await? {
        Some(existing) if same(&existing) => {
            let pool = get_pool_item(deps, &entry.holder).await?;
            Ok(NameHolder::Claim(Box::new(pool), Box::new(existing)))
        }
        _ => Ok(NameHolder::Nobody { write_entry_if: Cond::Holder(entry.holder) }),
    }
}
