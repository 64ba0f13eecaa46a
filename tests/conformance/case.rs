//! The cases (`cases/NNN-name.yaml`), the list of known divergences, and the
//! normalisation and comparison of results, as `record.py` does them.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize as _;
use serde_json::{Value, json};

use crate::e2e::Result;

/// One case file.
pub struct Case {
    /// `042-match-condition-matches`: the trial's name.
    pub stem: String,
    /// `042`.
    pub id: String,
    pub doc: Value,
}

impl Case {
    pub fn namespace(&self) -> &str {
        self.doc["request"]["namespace"]
            .as_str()
            .unwrap_or_default()
    }

    pub fn operation(&self) -> &str {
        self.doc["request"]["operation"]
            .as_str()
            .unwrap_or_default()
    }

    pub fn policies(&self) -> Vec<Value> {
        self.doc["policies"].as_array().cloned().unwrap_or_default()
    }

    pub fn setup(&self) -> Vec<Value> {
        self.doc["setup"].as_array().cloned().unwrap_or_default()
    }

    pub fn expect(&self) -> &Value {
        &self.doc["expect"]
    }
}

/// Every case of `dir`, in file-name order.
pub fn load_cases(dir: &Path) -> Result<Vec<Case>> {
    let mut files: Vec<_> = std::fs::read_dir(dir)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    files.retain(|f| f.extension().is_some_and(|e| e == "yaml"));
    files.sort();
    let mut cases = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file)?;
        let doc = Value::deserialize(serde_yaml::Deserializer::from_str(&text))
            .map_err(|e| format!("{}: {e}", file.display()))?;
        let stem = file
            .file_stem()
            .and_then(|s| s.to_str())
            .ok_or("case file name")?
            .to_string();
        let id = stem.split('-').next().unwrap_or_default().to_string();
        cases.push(Case { stem, id, doc });
    }
    Ok(cases)
}

/// `divergences.txt`: `NNN reason` lines; blank lines and `#` comments are skipped.
pub fn load_divergences(path: &Path) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for line in std::fs::read_to_string(path)?.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (id, reason) = line.split_once(' ').unwrap_or((line, ""));
        out.insert(id.to_string(), reason.trim().to_string());
    }
    Ok(out)
}

/// Sets `metadata.namespace` on an object of a namespaced kind that has none.
pub fn with_namespace(object: &Value, namespaced: bool, namespace: &str) -> Value {
    let mut object = object.clone();
    if namespaced && object["metadata"]["namespace"].is_null() {
        object["metadata"]["namespace"] = json!(namespace);
    }
    object
}

/// Drops or masks what the apiserver makes up on every run (record.py's `normalize`).
pub fn normalize(stored: &Value, sent: &Value) -> Value {
    let mut object = stored.clone();
    if let Some(metadata) = object.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        for key in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
            "generation",
        ] {
            metadata.remove(key);
        }
        if metadata.contains_key("deletionTimestamp") {
            metadata.insert("deletionTimestamp".into(), json!("<set>"));
        }
        let generate = sent["metadata"]["generateName"]
            .as_str()
            .unwrap_or_default();
        let named = sent["metadata"]["name"]
            .as_str()
            .is_some_and(|n| !n.is_empty());
        let name = metadata.get("name").and_then(|n| n.as_str());
        if !generate.is_empty() && !named && name.is_some_and(|n| n.starts_with(generate)) {
            metadata.insert("name".into(), json!(format!("{generate}<generated>")));
        }
    }
    if object["kind"] == "Service" {
        let spec = &mut object["spec"];
        let ip = spec["clusterIP"].as_str().unwrap_or_default().to_string();
        if !spec["clusterIP"].is_null() && ip != "None" && !ip.is_empty() {
            spec["clusterIP"] = json!("<allocated>");
            let ips: Vec<Value> = spec["clusterIPs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|ip| {
                    if ip == "None" {
                        ip.clone()
                    } else {
                        json!("<allocated>")
                    }
                })
                .collect();
            spec["clusterIPs"] = json!(ips);
        }
        if let Some(ports) = spec["ports"].as_array_mut() {
            for port in ports {
                if port.get("nodePort").is_some() {
                    port["nodePort"] = json!("<allocated>");
                }
            }
        }
    }
    object
}

/// The differences between `want` and `got` as JSON-pointer paths (record.py's `diff`).
pub fn diff(want: &Value, got: &Value, path: &str, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let here = format!("{path}/{key}");
                match (a.get(key), b.get(key)) {
                    (None, Some(g)) => out.push(format!("{here}: not expected, got {g}")),
                    (Some(w), None) => out.push(format!("{here}: expected {w}, missing")),
                    (Some(w), Some(g)) => diff(w, g, &here, out),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (w, g)) in a.iter().zip(b).enumerate() {
                diff(w, g, &format!("{path}/{i}"), out);
            }
        }
        (w, g) if w != g => {
            let at = if path.is_empty() { "/" } else { path };
            out.push(format!("{at}: expected {w}, got {g}"));
        }
        _ => {}
    }
}
