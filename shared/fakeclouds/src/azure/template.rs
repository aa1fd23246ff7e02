//! The part of ARM's template language cluster templates use: a template's `Microsoft.Compute/virtualMachines`
//! resources (with `copy.count`) evaluated into the VMs they make, parameters checked as ARM checks them.

use super::*;

/// A VM a template makes: name, location (when the template says), tags, whether its OS disk is ephemeral.
pub(super) type VmSpec = (String, Option<String>, Value, bool);

/// The VMs `template` makes with `given` parameters (`{name: {value}}`), or why ARM would refuse it.
pub(super) fn evaluate(template: &Value, given: &Value) -> Result<Vec<VmSpec>, String> {
    let declared = template["parameters"].as_object().cloned().unwrap_or_default();
    let given = given.as_object().cloned().unwrap_or_default();
    let unknown: Vec<&String> = given.keys().filter(|k| !declared.contains_key(*k)).collect();
    if !unknown.is_empty() {
        let names: Vec<String> = unknown.iter().map(|k| k.to_string()).collect();
        let supported: Vec<&String> = declared.keys().collect();
        return Err(format!(
            "The template parameters '{}' in the parameters file are not valid; they are not present in the original template and can therefore not be provided at deployment time. The only supported parameters for this template are '{}'.",
            names.join(", "),
            supported.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    let mut params: Map<String, Value> = Map::new();
    for (name, decl) in &declared {
        match given.get(name).map(|g| g["value"].clone()).or_else(|| decl.get("defaultValue").cloned()) {
            Some(v) => {
                params.insert(name.clone(), v);
            }
            None => return Err(format!("The value for the template parameter '{name}' is not provided.")),
        }
    }
    let resources: Vec<Value> = match &template["resources"] {
        Value::Array(a) => a.clone(),
        Value::Object(o) => o.values().cloned().collect(),
        _ => vec![],
    };
    let mut out = vec![];
    for r in resources
        .iter()
        .filter(|r| r["type"].as_str().is_some_and(|t| t.eq_ignore_ascii_case("Microsoft.Compute/virtualMachines")))
    {
        let count = match &r["copy"]["count"] {
            Value::Null => 1,
            c => as_count(&value(c, &params, 0)?)?,
        };
        for i in 0..count {
            let name = match value(&r["name"], &params, i)? {
                Value::String(n) => n,
                other => return Err(format!("a virtual machine's name is not a string: {other}")),
            };
            // `[resourceGroup().location]`, and any form the fake does not read, is the group's location.
            let location =
                r.get("location").and_then(|l| value(l, &params, i).ok()).and_then(|l| l.as_str().map(str::to_owned));
            let tags = match r.get("tags") {
                Some(Value::Object(t)) => {
                    let mut out = Map::new();
                    for (k, v) in t {
                        out.insert(k.clone(), value(v, &params, i)?);
                    }
                    Value::Object(out)
                }
                Some(other) => value(other, &params, i)?,
                None => json!({}),
            };
            let ephemeral = r["properties"]["storageProfile"]["osDisk"]["diffDiskSettings"]["option"] == "Local";
            out.push((name, location, tags, ephemeral));
        }
    }
    Ok(out)
}

fn as_count(v: &Value) -> Result<u64, String> {
    v.as_u64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .ok_or_else(|| format!("copy count {v} is not a number"))
}

/// `v` with its ARM expression (a string `[…]`) evaluated; other values as they are.
fn value(v: &Value, params: &Map<String, Value>, index: u64) -> Result<Value, String> {
    match v.as_str() {
        Some(text) if text.starts_with('[') && text.ends_with(']') && !text.starts_with("[[") => {
            let mut p = Parser { text: &text[1..text.len() - 1], at: 0, params, index };
            let out = p.expr()?;
            p.space();
            if p.at != p.text.len() {
                return Err(format!("unexpected text in the expression {text}"));
            }
            Ok(out)
        }
        _ => Ok(v.clone()),
    }
}

/// The subset of ARM's template expressions cluster templates use.
struct Parser<'a> {
    text: &'a str,
    at: usize,
    params: &'a Map<String, Value>,
    index: u64,
}

impl Parser<'_> {
    fn space(&mut self) {
        while self.text[self.at..].starts_with(' ') {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: char) -> bool {
        self.space();
        if self.text[self.at..].starts_with(c) {
            self.at += c.len_utf8();
            return true;
        }
        false
    }

    fn expr(&mut self) -> Result<Value, String> {
        self.space();
        let rest = &self.text[self.at..];
        if let Some(quoted) = rest.strip_prefix('\'') {
            let mut out = String::new();
            let mut chars = quoted.char_indices().peekable();
            while let Some((i, c)) = chars.next() {
                if c == '\'' {
                    if chars.peek().is_some_and(|(_, n)| *n == '\'') {
                        chars.next();
                        out.push('\'');
                        continue;
                    }
                    self.at += 1 + i + 1;
                    return Ok(Value::String(out));
                }
                out.push(c);
            }
            return Err("an unterminated string".into());
        }
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if !digits.is_empty() {
            self.at += digits.len();
            return digits.parse::<u64>().map(Value::from).map_err(|e| e.to_string());
        }
        let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
        self.at += name.len();
        if !self.eat('(') {
            return Err(format!("expected ( after {name:?}"));
        }
        let mut args = vec![];
        if !self.eat(')') {
            loop {
                args.push(self.expr()?);
                if self.eat(')') {
                    break;
                }
                if !self.eat(',') {
                    return Err("expected , or )".into());
                }
            }
        }
        let text = |v: &Value| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        match name.to_ascii_lowercase().as_str() {
            "parameters" => {
                let p = args.first().map(text).unwrap_or_default();
                self.params.get(&p).cloned().ok_or_else(|| format!("The template parameter '{p}' is not found."))
            }
            "copyindex" => Ok(Value::from(self.index + args.first().and_then(Value::as_u64).unwrap_or(0))),
            "concat" => Ok(Value::String(args.iter().map(text).collect())),
            "string" => Ok(Value::String(args.first().map(text).unwrap_or_default())),
            "tolower" => Ok(Value::String(args.first().map(text).unwrap_or_default().to_lowercase())),
            "format" => {
                let mut out = args.first().map(text).unwrap_or_default();
                for (i, a) in args.iter().skip(1).enumerate() {
                    out = out.replace(&format!("{{{i}}}"), &text(a));
                }
                Ok(Value::String(out))
            }
            other => Err(format!("the function '{other}' is not supported by this fake")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_names_its_vms_from_parameters_and_the_copy_index() {
        let template = json!({
            "parameters": {"infraId": {"type": "string"}, "machineCount": {"type": "int", "defaultValue": 2}},
            "resources": [
                {"type": "Microsoft.Network/virtualNetworks", "name": "[concat(parameters('infraId'), '-vnet')]"},
                {"type": "Microsoft.Compute/virtualMachines", "name": "[format('{0}-node-{1}', parameters('infraId'), copyIndex())]",
                 "copy": {"name": "nodes", "count": "[parameters('machineCount')]"},
                 "tags": {"role": "'x'", "cluster": "[parameters('infraId')]"}},
                {"type": "Microsoft.Compute/virtualMachines", "name": "[concat(parameters('infraId'), '-bootstrap')]",
                 "location": "[resourceGroup().location]",
                 "properties": {"storageProfile": {"osDisk": {"diffDiskSettings": {"option": "Local"}}}}}
            ]
        });
        let vms = evaluate(&template, &json!({"infraId": {"value": "ci-x7k2p"}})).expect("valid");
        let names: Vec<&str> = vms.iter().map(|v| v.0.as_str()).collect();
        assert_eq!(names, ["ci-x7k2p-node-0", "ci-x7k2p-node-1", "ci-x7k2p-bootstrap"]);
        assert_eq!(vms[0].2["cluster"], "ci-x7k2p");
        assert_eq!((vms[0].3, vms[2].3), (false, true));
        let unknown =
            evaluate(&template, &json!({"infraId": {"value": "a"}, "size": {"value": 1}})).expect_err("unknown");
        assert!(unknown.contains("'size'") && unknown.contains("not present in the original template"), "{unknown}");
        let missing = evaluate(&template, &json!({})).expect_err("missing");
        assert!(missing.contains("'infraId' is not provided"), "{missing}");
    }
}
