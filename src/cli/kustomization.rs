//! The ConfigMap a policy directory's kustomization generates must carry every policy
//! file graft loads from that directory: a file copied in but not listed under the
//! generator's `files` would pass lint and the golden tests locally and be silently
//! missing in the cluster.

use std::path::{Path, PathBuf};

use crate::policy::Finding;
use crate::policy::load::is_policy_file_name;

/// The names kustomize reads a kustomization from.
const KUSTOMIZATION_NAMES: &[&str] = &["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// An error for each policy file in `dir` that a `configMapGenerator` of the
/// directory's kustomization leaves out. Only generators that list at least one of the
/// directory's policy files are held to it (a kustomization may generate other
/// ConfigMaps too); a directory without a kustomization has nothing to check.
pub fn unlisted_policy_files(dir: &Path) -> Vec<Finding> {
    let Some(kustomization) = KUSTOMIZATION_NAMES
        .iter()
        .map(|name| dir.join(name))
        .find(|path| path.is_file())
    else {
        return Vec::new();
    };
    let Ok(text) = std::fs::read_to_string(&kustomization) else {
        return vec![Finding::error(
            &kustomization,
            "cannot read the kustomization",
        )];
    };
    let document: serde_yaml::Value = match serde_yaml::from_str(&text) {
        Ok(document) => document,
        Err(error) => {
            return vec![Finding::error(
                &kustomization,
                format!("the kustomization is not valid YAML: {error}"),
            )];
        }
    };
    let policy_files = policy_files(dir, &kustomization);
    let mut findings = Vec::new();
    let generators = document
        .get("configMapGenerator")
        .and_then(serde_yaml::Value::as_sequence)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (index, generator) in generators.iter().enumerate() {
        let listed: Vec<String> = generator
            .get("files")
            .and_then(serde_yaml::Value::as_sequence)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(serde_yaml::Value::as_str)
            .map(listed_file)
            .collect();
        if !policy_files.iter().any(|file| listed.contains(file)) {
            continue;
        }
        let name = generator
            .get("name")
            .and_then(serde_yaml::Value::as_str)
            .unwrap_or("(unnamed)");
        let line = text
            .lines()
            .position(|line| line.trim_start().starts_with("configMapGenerator"))
            .map(|at| at + 1);
        for file in policy_files.iter().filter(|file| !listed.contains(file)) {
            let finding = Finding::error(
                &kustomization,
                format!(
                    "policy file {file} is not listed in configMapGenerator[{index}] ({name}) files: \
                     the generated ConfigMap leaves it out, so the cluster never loads it"
                ),
            )
            .with_hint(format!("add `- {file}` under its files"))
            .at_line(line);
            findings.push(finding);
        }
    }
    findings
}

/// The file a `files` entry names: `key=path` or `path`, relative to the directory.
fn listed_file(entry: &str) -> String {
    let path = entry.split_once('=').map_or(entry, |(_, path)| path);
    path.trim_start_matches("./").to_string()
}

/// The names of the policy files graft loads from `dir`, sorted.
fn policy_files(dir: &Path, kustomization: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.is_file() && path != kustomization)
        .filter_map(|path: PathBuf| path.file_name()?.to_str().map(str::to_string))
        .filter(|name| is_policy_file_name(name))
        .collect();
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        dir
    }

    const GENERATOR: &str = "configMapGenerator:\n  - name: graft-policies\n    files:\n      - a.yaml\n      - key=./b.yaml\n";

    #[test]
    fn every_policy_file_listed_is_clean() {
        let dir = dir_with(&[("Kustomization", GENERATOR), ("a.yaml", ""), ("b.yaml", "")]);
        assert!(unlisted_policy_files(dir.path()).is_empty());
    }

    #[test]
    fn an_unlisted_policy_file_is_an_error_naming_it() {
        let dir = dir_with(&[
            ("Kustomization", GENERATOR),
            ("a.yaml", ""),
            ("b.yaml", ""),
            ("c.yml", ""),
            (".hidden.yaml", ""),
            ("notes.txt", ""),
        ]);
        let findings = unlisted_policy_files(dir.path());
        assert_eq!(findings.len(), 1, "{findings:?}");
        let text = findings[0].to_string();
        assert!(
            text.contains(
                "policy file c.yml is not listed in configMapGenerator[0] (graft-policies)"
            ),
            "{text}"
        );
        assert!(text.contains(":1: "), "{text}");
    }

    #[test]
    fn directories_without_a_policy_generator_are_not_checked() {
        let other = "configMapGenerator:\n  - name: other\n    files: [settings.json]\n";
        let dir = dir_with(&[("kustomization.yaml", other), ("a.yaml", "")]);
        assert!(unlisted_policy_files(dir.path()).is_empty());
        let dir = dir_with(&[("a.yaml", "")]);
        assert!(unlisted_policy_files(dir.path()).is_empty());
    }
}
