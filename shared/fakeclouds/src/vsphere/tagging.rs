//! vCenter's tagging: categories and tags (listed, read, created, deleted) and their attachment to VMs.

use super::*;

/// A call on tagging: categories, tags and their associations.
pub(super) fn route(s: &mut State, req: &Request, parts: &[&str], action: &str) -> Response {
    match (req.method.as_str(), parts) {
        ("GET", ["api", "cis", "tagging", "category"]) => {
            Response::json(200, &Value::Array(s.categories.keys().map(|k| json!(k)).collect()))
        }
        ("GET", ["api", "cis", "tagging", "category", id]) => match s.categories.get(*id) {
            Some(c) => Response::json(
                200,
                &json!({"id": id, "name": c.name, "description": c.description, "cardinality": "SINGLE", "associable_types": ["VirtualMachine"], "used_by": []}),
            ),
            None => not_found(&format!("Category '{id}'")),
        },
        ("POST", ["api", "cis", "tagging", "category"]) => create_category(s, req),
        ("DELETE", ["api", "cis", "tagging", "category", id]) => {
            if s.categories.remove(*id).is_none() {
                return not_found(&format!("Category '{id}'"));
            }
            s.tags.retain(|_, t| t.category != *id);
            Response { status: 204, headers: vec![], body: vec![] }
        }
        ("POST", ["api", "cis", "tagging", "tag"]) if action == "list-tags-for-category" => {
            let cat = req.json()["category_id"].as_str().unwrap_or_default().to_owned();
            if !s.categories.contains_key(&cat) {
                return not_found(&format!("Category '{cat}'"));
            }
            let ids: Vec<Value> = s.tags.iter().filter(|(_, t)| t.category == cat).map(|(id, _)| json!(id)).collect();
            Response::json(200, &Value::Array(ids))
        }
        ("POST", ["api", "cis", "tagging", "tag"]) => create_tag(s, req),
        ("GET", ["api", "cis", "tagging", "tag", id]) => match s.tags.get(*id) {
            Some(t) => {
                Response::json(200, &json!({"id": id, "name": t.name, "category_id": t.category, "description": ""}))
            }
            None => not_found(&format!("Tag '{id}'")),
        },
        ("DELETE", ["api", "cis", "tagging", "tag", id]) => match s.tags.remove(*id) {
            Some(_) => Response { status: 204, headers: vec![], body: vec![] },
            None => not_found(&format!("Tag '{id}'")),
        },
        ("POST", ["api", "cis", "tagging", "tag-association"]) if action == "list-attached-objects-on-tags" => {
            attached_on_tags(s, req)
        }
        ("POST", ["api", "cis", "tagging", "tag-association", tag]) => associate(s, tag, action, req),
        _ => no_route(req),
    }
}

pub(super) fn create_category(s: &mut State, req: &Request) -> Response {
    let body = req.json();
    let name = body["name"].as_str().unwrap_or_default().to_owned();
    if s.categories.values().any(|c| c.name == name) {
        return error(400, "ALREADY_EXISTS", &format!("Category with name '{name}' already exists."));
    }
    let id = s.id("urn:vmomi:InventoryServiceCategory:");
    let description = body["description"].as_str().unwrap_or_default().to_owned();
    s.categories.insert(id.clone(), Category { name, description });
    Response::json(201, &json!(id))
}

pub(super) fn create_tag(s: &mut State, req: &Request) -> Response {
    let body = req.json();
    let name = body["name"].as_str().unwrap_or_default().to_owned();
    let category = body["category_id"].as_str().unwrap_or_default().to_owned();
    if !s.categories.contains_key(&category) {
        return not_found(&format!("Category '{category}'"));
    }
    if s.tags.values().any(|t| t.name == name && t.category == category) {
        return error(400, "ALREADY_EXISTS", &format!("Tag with name '{name}' already exists in the category."));
    }
    let id = s.id("urn:vmomi:InventoryServiceTag:");
    s.tags.insert(id.clone(), Tag { name, category, attached: BTreeSet::new() });
    Response::json(201, &json!(id))
}

/// `list-attached-objects-on-tags`: each tag asked for that exists, with the objects it is attached to; one that
/// does not is left out.
pub(super) fn attached_on_tags(s: &State, req: &Request) -> Response {
    let body = req.json();
    let Some(ids) = body["tag_ids"].as_array() else { return error(400, "INVALID_ARGUMENT", "tag_ids is required") };
    let found: Vec<Value> = ids
        .iter()
        .filter_map(Value::as_str)
        .filter_map(|id| s.tags.get(id).map(|t| (id, t)))
        .map(|(id, t)| {
            let objects: Vec<Value> = t.attached.iter().map(|vm| json!({"type": "VirtualMachine", "id": vm})).collect();
            json!({"tag_id": id, "object_ids": objects})
        })
        .collect();
    Response::json(200, &Value::Array(found))
}

pub(super) fn associate(s: &mut State, tag: &str, action: &str, req: &Request) -> Response {
    let body = req.json();
    let known_vms: BTreeSet<String> = s.vms.keys().cloned().collect();
    let Some(t) = s.tags.get_mut(tag) else { return not_found(&format!("Tag '{tag}'")) };
    let ids: Vec<String> = match action {
        "attach" => vec![body["object_id"]["id"].as_str().unwrap_or_default().to_owned()],
        "attach-tag-to-multiple-objects" => body["object_ids"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|o| o["id"].as_str().map(str::to_owned))
            .collect(),
        "list-attached-objects" => {
            let objects: Vec<Value> = t.attached.iter().map(|id| json!({"type": "VirtualMachine", "id": id})).collect();
            return Response::json(200, &Value::Array(objects));
        }
        other => return error(400, "INVALID_ARGUMENT", &format!("unknown action {other}")),
    };
    if let Some(missing) = ids.iter().find(|id| !known_vms.contains(*id)) {
        return not_found(&format!("Virtual machine '{missing}'"));
    }
    t.attached.extend(ids);
    if action == "attach" {
        Response { status: 204, headers: vec![], body: vec![] }
    } else {
        Response::json(200, &json!({"success": true, "error_messages": []}))
    }
}
