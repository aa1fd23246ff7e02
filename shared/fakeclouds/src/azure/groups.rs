//! Resource groups: created, read, listed by tag in pages, and deleted with everything in them.

use super::*;

pub(super) fn group_not_found(name: &str) -> Response {
    error(404, "ResourceGroupNotFound", &format!("Resource group '{name}' could not be found."))
}

/// A 202 whose `Location` is `path` again (still running).
pub(super) fn accepted(status: u16, base: &str, path: &str) -> Response {
    Response::json(status, &json!({}))
        .header("location", &format!("{base}{path}?api-version=2021-04-01"))
        .header("retry-after", "1")
}

pub(super) fn put_group(s: &mut State, sub: &str, name: &str, req: &Request) -> Response {
    let body = req.json();
    let Some(location) = body["location"].as_str().filter(|l| !l.is_empty()) else {
        return error(400, "LocationRequired", "The location property is required for this definition.");
    };
    let k = rg_key(sub, name);
    let status = match s.groups.get_mut(&k) {
        Some(rg) if rg.deleting.is_some() => {
            return error(
                409,
                "ResourceGroupBeingDeleted",
                &format!("The resource group '{name}' is in deprovisioning state and cannot perform this operation."),
            );
        }
        Some(rg) => {
            rg.tags = body.get("tags").cloned().unwrap_or_else(|| json!({}));
            200
        }
        None => {
            let tags = body.get("tags").cloned().unwrap_or_else(|| json!({}));
            s.groups
                .insert(k.clone(), Rg { name: name.to_owned(), location: location.to_owned(), tags, deleting: None });
            201
        }
    };
    let rg = s.groups.get(&k).cloned();
    Response::json(status, &rg.map(|g| s.rg_json(sub, &g)).unwrap_or_default())
}

pub(super) fn delete_group(s: &mut State, sub: &str, rg: &str, name: &str) -> Response {
    let k = rg_key(sub, rg);
    if !s.groups.contains_key(&k) {
        return group_not_found(name);
    }
    if s.locked.contains(rg) {
        return error(
            409,
            "ScopeLocked",
            &format!("The scope '/subscriptions/{sub}/resourceGroups/{name}' cannot perform delete operation because following scope(s) are locked: '/subscriptions/{sub}/resourceGroups/{name}'. Please remove the lock and try again."),
        );
    }
    let op = match s.groups.get(&k).and_then(|g| g.deleting.clone()) {
        Some((_, op)) => op,
        None => {
            let op = s.operation(Operation::RgDeletion(k.clone()));
            let at = s.now() + s.timings.delete;
            if let Some(g) = s.groups.get_mut(&k) {
                g.deleting = Some((at, op.clone()));
            }
            for ((su, r, _), vm) in s.vms.iter_mut() {
                if (su, r) == (&k.0, &k.1) {
                    vm.provisioning = "deleting".into();
                    vm.next = None;
                }
            }
            op
        }
    };
    accepted(202, &s.base, &format!("/subscriptions/{sub}/operationresults/{op}"))
}

/// The subscription's resource groups, in pages, filtered as ARM filters them by tag:
/// `$filter=tagName eq 'K' and tagValue eq 'V'` (or `tagName eq 'K'` alone); another filter is refused.
pub(super) fn list_groups(s: &State, sub: &str, req: &Request) -> Response {
    let tag = match req.param("$filter") {
        None => None,
        Some(f) => match tag_filter(f) {
            Some(t) => Some(t),
            None => {
                return error(
                    400,
                    "InvalidFilterInQueryString",
                    &format!("Invalid $filter '{f}' specified in the query string."),
                )
            }
        },
    };
    let all: Vec<&Rg> = s
        .groups
        .iter()
        .filter(|((su, _), _)| su.as_str() == sub)
        .map(|(_, rg)| rg)
        .filter(|rg| match &tag {
            None => true,
            Some((k, v)) => rg.tags.get(k.as_str()).is_some_and(|t| v.as_ref().is_none_or(|v| t == v.as_str())),
        })
        .collect();
    let from: usize = req.param("$skiptoken").and_then(|t| t.parse().ok()).unwrap_or(0);
    let page: Vec<Value> = all.iter().skip(from).take(s.page_size).map(|rg| s.rg_json(sub, rg)).collect();
    let mut body = json!({"value": page});
    if from + s.page_size < all.len() {
        let filter = req
            .param("$filter")
            .map(|f| format!("&$filter={}", form_urlencoded::byte_serialize(f.as_bytes()).collect::<String>()))
            .unwrap_or_default();
        body["nextLink"] = json!(format!(
            "{}/subscriptions/{sub}/resourcegroups?api-version={}{filter}&$skiptoken={}",
            s.base,
            req.param(API_VERSION).unwrap_or_default(),
            from + s.page_size
        ));
    }
    Response::json(200, &body)
}

/// `tagName eq 'K'` with an optional ` and tagValue eq 'V'` (quotes doubled inside a literal): the tag and value.
pub(super) fn tag_filter(f: &str) -> Option<(String, Option<String>)> {
    pub(super) fn literal(text: &str, field: &str) -> Option<String> {
        let rest = text.trim().strip_prefix(field)?.trim_start().strip_prefix("eq")?.trim();
        let inner = rest.strip_prefix('\'')?.strip_suffix('\'')?;
        Some(inner.replace("''", "'"))
    }
    match f.split_once(" and ") {
        None => Some((literal(f, "tagName")?, None)),
        Some((name, value)) => Some((literal(name, "tagName")?, Some(literal(value, "tagValue")?))),
    }
}

impl State {
    pub(super) fn rg_json(&self, sub: &str, rg: &Rg) -> Value {
        let state = if rg.deleting.is_some() { "Deleting" } else { "Succeeded" };
        json!({
            "id": format!("/subscriptions/{sub}/resourceGroups/{}", rg.name),
            "name": rg.name,
            "type": "Microsoft.Resources/resourceGroups",
            "location": rg.location,
            "tags": rg.tags,
            "properties": {"provisioningState": state},
        })
    }
}
