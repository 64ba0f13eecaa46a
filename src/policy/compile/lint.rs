//! The compiler's lint rules: what compiles, and yet never matches, fails wherever it
//! runs, or does something else than it seems to. Each finding names the field and says
//! what would fix it.

use serde_json::Value;

use super::Compiler;
use crate::expr::Expression;
use crate::jsonpath::{JsonPath, Token};
use crate::policy::compiled::{Conditions, Operation, ResourceRule};
use crate::policy::findings::Finding;
use crate::policy::load::{ParsedDocument, locate_in};
use crate::policy::model::{self, Match, Mode};
use crate::tree::Tree;

/// Fields no policy may change: the apiserver rejects or misroutes such patches.
pub(super) const PROTECTED: [&str; 3] = ["name", "namespace", "uid"];

impl Compiler<'_> {
    /// A Pod made from a template (by a Deployment, a Job, ...) has only
    /// `metadata.generateName` when it is created, and that is what `names` compares
    /// then: a pattern without `*` never matches such a Pod. An exclude block applies
    /// within its policy's match: its empty `resources` and `operations` are the match's.
    pub(super) fn check_names(
        &mut self,
        field: &str,
        m: &Match,
        conditions: &Conditions,
        within: Option<&Conditions>,
    ) {
        let inherited = |own_is_empty: bool| own_is_empty.then_some(within).flatten();
        let operations = inherited(conditions.operations.is_empty())
            .map_or(conditions.operations, |matcher| matcher.operations);
        let resources = inherited(conditions.resources.is_empty())
            .map_or(&conditions.resources, |matcher| &matcher.resources);
        let creates = operations.is_empty() || operations.contains(Operation::Create);
        let pods = resources
            .iter()
            .any(|rule| rule.resource == "pods" || rule.resource == "*")
            || resources.is_empty();
        for (i, name) in m.names.iter().enumerate() {
            let at = format!("{field}.names[{i}]");
            if name.is_empty() {
                self.error(&at, "names", "an empty name matches nothing", None);
                continue;
            }
            if creates && pods && !name.contains('*') {
                self.warning_with_hint(
                    &at,
                    name,
                    &format!(
                        "{name:?} has no `*`: a Pod made from a template has only metadata.generateName \
                         at CREATE, which is what names compares then, so this never matches such a Pod"
                    ),
                    &format!(
                        "write {name}-* to match generated names too, or match on labels"
                    ),
                );
            }
        }
    }

    /// A built-in resource written as its kind or in the singular (`pod`, `Deployment`)
    /// never matches: the apiserver names resources in the plural, in lower case. Nor
    /// does a group and a resource without a version (`apps/statefulsets`), which reads
    /// as a resource and its subresource.
    pub(super) fn check_resource_name(&mut self, field: &str, written: &str, rule: &ResourceRule) {
        use crate::k8s::resources::{is_built_in, is_built_in_group, meant};
        if let (None, Some(subresource)) = (&rule.group, &rule.subresource)
            && !rule.resource.is_empty()
            && is_built_in_group(&rule.resource)
            && is_built_in(subresource)
        {
            let message = format!(
                "{written:?} reads as resource {:?} with subresource {subresource:?}, so this \
                 rule never matches: a group needs a version (or `*`) before the resource",
                rule.resource
            );
            let hint = format!("write {}/*/{subresource}", rule.resource);
            self.warning_with_hint(field, written, &message, &hint);
            return;
        }
        if let (None, Some(subresource)) = (&rule.group, &rule.subresource)
            && is_version(&rule.resource)
            && is_built_in(subresource)
        {
            let message = format!(
                "{written:?} reads as resource {:?} with subresource {subresource:?}, so this \
                 rule never matches: a version needs its group before it (`core` for the core \
                 group)",
                rule.resource
            );
            let version = &rule.resource;
            let hint =
                format!("write core/{version}/{subresource}, or GROUP/{version}/{subresource}");
            self.warning_with_hint(field, written, &message, &hint);
            return;
        }
        if !rule.group.as_deref().is_none_or(is_built_in_group) {
            return;
        }
        if let Some(plural) = meant(&rule.resource) {
            let message = format!(
                "{:?} is not a resource name, so this rule never matches: the apiserver names \
                 resources in the plural, in lower case",
                rule.resource
            );
            let hint = format!("write {}", written.replacen(&rule.resource, plural, 1));
            self.warning_with_hint(field, written, &message, &hint);
        }
    }

    pub(super) fn expression_warnings(&mut self, field: &str, expression: &Expression) {
        for warning in expression.warnings() {
            self.warning_with_hint(field, "has(", &warning.message, &warning.hint);
        }
    }

    /// `$.metadata.annotations.example.com/key` parses as nested keys; almost always a
    /// key with dots that should have been quoted.
    pub(super) fn check_unescaped_key(&mut self, field: &str, source: &str, tokens: &[Token]) {
        let map_names = ["labels", "annotations", "nodeSelector"];
        for (i, token) in tokens.iter().enumerate() {
            if let Token::Key(name) = token
                && map_names.contains(&name.as_str())
                && tokens.len() > i + 2
            {
                let rest: Vec<String> = tokens[i + 1..]
                    .iter()
                    .map(|t| match t {
                        Token::Key(k) => k.clone(),
                        Token::Index(n) => n.to_string(),
                    })
                    .collect();
                self.warning_with_hint(
                    field,
                    source,
                    &format!(
                        "{name} values are strings, but this path goes {} levels below {name}",
                        rest.len()
                    ),
                    &format!("quote the key: ['{}']", rest.join(".")),
                );
                return;
            }
        }
    }

    pub(super) fn check_protected_fragment(
        &mut self,
        field: &str,
        path: Option<&JsonPath>,
        fragment: &Value,
    ) {
        let at_root = path.is_none_or(JsonPath::is_root);
        let metadata = if at_root {
            fragment.get("metadata")
        } else if path
            .and_then(JsonPath::singular)
            .is_some_and(|t| t == [Token::Key("metadata".to_string())])
        {
            Some(fragment)
        } else {
            None
        };
        if let Some(protected) =
            metadata.and_then(|m| PROTECTED.iter().find(|k| m.get(**k).is_some()))
        {
            self.error(
                field,
                protected,
                format!("policies may not change metadata.{protected}"),
                None,
            );
        }
    }

    /// An item of a list Kubernetes merges by key, without that key, fails the merge
    /// wherever it runs (the merge finds items by their key): an error here, where the
    /// fragment is a literal and its location known (no `foreach`, a path to one place or
    /// none), and the merge not `ifAbsent`. The walk is the one a merge makes through a fragment: null values are
    /// removals, other lists are replaced whole.
    pub(super) fn check_merge_keys(
        &mut self,
        field: &str,
        path: Option<&JsonPath>,
        fragment: &Tree<'_>,
    ) {
        let mut location = match path {
            None => Vec::new(),
            Some(path) => match path.singular() {
                Some(tokens) => tokens.to_vec(),
                None => return,
            },
        };
        let written = location.len();
        let Some((key, item)) = missing_merge_key(fragment, &mut location) else {
            return;
        };
        let at = crate::jsonpath::display(&location);
        // The item's place in the value as written (`….value.spec.containers[0]`), where
        // every key below the path is a plain name.
        let mut item_field = field.to_string();
        for token in location.get(written..).unwrap_or_default() {
            match token {
                Token::Key(name) if !name.is_empty() && !name.contains(['.', '[', ']']) => {
                    item_field.push('.');
                    item_field.push_str(name);
                }
                Token::Index(index) => item_field.push_str(&format!("[{index}]")),
                Token::Key(_) => {
                    item_field = field.to_string();
                    break;
                }
            }
        }
        if item_field != field {
            item_field.push_str(&format!("[{item}]"));
        }
        self.error(
            &item_field,
            key,
            format!(
                "cannot merge into {at}: Kubernetes merges this list by {key:?}, and item {item} \
                 of the value has no {key:?}, so the merge fails wherever it runs"
            ),
            Some(&format!("give every item of {at} its {key}")),
        );
    }

    /// Raw JSON Patch operations that write the object whole, all of metadata or a
    /// protected field are errors; an `add` below labels or annotations, which fails
    /// where the map is absent, a warning. Whether the operations may be compiled.
    pub(super) fn check_json_patch(
        &mut self,
        field: &str,
        operations: &[model::JsonPatchOperation],
    ) -> bool {
        let mut valid = true;
        for (i, operation) in operations.iter().enumerate() {
            let at = format!("{field}[{i}]");
            let pointer_tokens = |pointer: &str| -> Vec<String> {
                pointer.split('/').skip(1).map(unescape_pointer).collect()
            };
            let tokens = pointer_tokens(&operation.path);
            // Where the operation writes, and for a move where it removes from: either
            // may be a protected field, or hold them all (the object, its metadata).
            let mut changed = Vec::new();
            if operation.op != "test" {
                changed.push(("path", &operation.path, tokens.clone()));
            }
            if let (Some(from), "move") = (&operation.from, operation.op.as_str()) {
                changed.push(("from", from, pointer_tokens(from)));
            }
            for (part, pointer, tokens) in changed {
                let reason = match tokens.as_slice() {
                    [] => "this operation replaces the whole object".to_string(),
                    [metadata] if metadata == "metadata" => {
                        "this operation replaces metadata whole".to_string()
                    }
                    [metadata, name]
                        if metadata == "metadata" && PROTECTED.contains(&name.as_str()) =>
                    {
                        format!("policies may not change metadata.{name}")
                    }
                    _ => continue,
                };
                let reason = if reason.starts_with("policies") {
                    reason
                } else {
                    format!(
                        "policies may not change metadata.name, metadata.namespace or \
                     metadata.uid, and {reason}"
                    )
                };
                self.error(&format!("{at}.{part}"), pointer, reason, None);
                valid = false;
            }
            let under_map = tokens.len() >= 3
                && tokens[0] == "metadata"
                && (tokens[1] == "labels" || tokens[1] == "annotations");
            if operation.op == "add" && under_map {
                self.warning_with_hint(
                    &format!("{at}.path"),
                    &operation.path,
                    &format!(
                        "add {} fails when /metadata/{} does not exist",
                        operation.path, tokens[1]
                    ),
                    "use a set mutation, which creates missing parents",
                );
            }
        }
        valid
    }
}

/// The first item of a list merged by key that lacks its key, below `location`: the key
/// and the item's index, with `location` left at the list.
fn missing_merge_key(value: &Tree<'_>, location: &mut Vec<Token>) -> Option<(&'static str, usize)> {
    match value {
        Tree::Map(map) => map.iter().find_map(|(key, entry)| {
            if entry.is_null() {
                return None;
            }
            location.push(Token::Key(key.to_string()));
            let missing = missing_merge_key(entry, location);
            if missing.is_none() {
                location.pop();
            }
            missing
        }),
        Tree::List(items) => {
            let key = crate::k8s::merge_keys::at(location)?;
            items.iter().enumerate().find_map(|(index, item)| {
                if item.get(key).is_none_or(Tree::is_null) {
                    return Some((key, index));
                }
                location.push(Token::Index(index as i64));
                let missing = missing_merge_key(item, location);
                if missing.is_none() {
                    location.pop();
                }
                missing
            })
        }
        _ => None,
    }
}

/// Whether a merge fragment holds a `null` map value anywhere.
pub(super) fn holds_null(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.values().any(|v| v.is_null() || holds_null(v)),
        Value::Array(items) => items.iter().any(holds_null),
        _ => false,
    }
}

pub(super) fn protected_field(tokens: &[Token]) -> Option<&'static str> {
    match tokens {
        [Token::Key(metadata), Token::Key(field), ..] if metadata == "metadata" => {
            PROTECTED.into_iter().find(|p| p == field)
        }
        [Token::Key(metadata)] if metadata == "metadata" => Some("name"),
        _ => None,
    }
}

/// Audit-mode policies with Fail would deny without applying: refuse that combination.
pub fn check_mode(parsed: &ParsedDocument, findings: &mut Vec<Finding>) {
    let spec = &parsed.document.spec;
    if spec.mode == Mode::Audit && spec.failure_policy == model::FailurePolicy::Fail {
        findings.push(
            Finding::warning(
                &parsed.file,
                "an Audit policy with failurePolicy Fail still denies requests when it fails",
            )
            .at_line(locate_in(&parsed.text, parsed.first_line, "mode"))
            .in_policy(parsed.document.metadata.name.clone())
            .at_field("spec.failurePolicy")
            .with_hint("use failurePolicy: Ignore while auditing"),
        );
    }
}

/// A Kubernetes API version: `v1`, `v2`, `v1beta1`, `v1alpha3`.
fn is_version(text: &str) -> bool {
    let Some(rest) = text.strip_prefix('v') else {
        return false;
    };
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let (number, stage) = rest.split_at(digits);
    if number.is_empty() {
        return false;
    }
    match stage
        .strip_prefix("alpha")
        .or_else(|| stage.strip_prefix("beta"))
    {
        None => stage.is_empty(),
        Some(level) => !level.is_empty() && level.chars().all(|c| c.is_ascii_digit()),
    }
}

fn unescape_pointer(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    fn warnings(text: &str) -> Vec<String> {
        crate::policy::load_str(Path::new("p.yaml"), text)
            .expect("the policy loads")
            .warnings
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn policy(resources: &str, operations: &str, exclude: &str) -> String {
        format!(
            "apiVersion: graft.dev/v1alpha1\nkind: MutationPolicy\nmetadata:\n  name: p\nspec:\n  \
             match:\n    resources: {resources}\n    operations: {operations}\n  exclude:\n{exclude}  \
             mutations:\n    - set:\n        path: $.metadata.labels.seen\n        value: \"yes\"\n"
        )
    }

    /// An exclude block's `names` are compared within the policy's match: with no
    /// resources or operations of its own, it has the match's, so a policy on Namespaces
    /// excluding `kube-system` is not warned about Pods made from templates.
    #[test]
    fn exclude_names_are_checked_against_the_resources_the_policy_matches() {
        let names_only = "    names: [kube-system]\n";
        assert_eq!(
            warnings(&policy("[namespaces]", "[CREATE]", names_only)),
            Vec::<String>::new()
        );
        assert_eq!(
            warnings(&policy("[pods]", "[UPDATE]", names_only)),
            Vec::<String>::new()
        );
        // Pods at CREATE: the warning holds, for match and exclude alike.
        let warned = warnings(&policy("[pods]", "[CREATE]", names_only));
        assert_eq!(warned.len(), 1, "{warned:?}");
        assert!(
            warned[0].contains("spec.exclude.names[0]") && warned[0].contains("has no `*`"),
            "{warned:?}"
        );
        // An exclude block's own resources and operations are its own.
        let own = "    resources: [pods]\n    operations: [CREATE]\n    names: [web]\n";
        let warned = warnings(&policy("[pods, namespaces]", "[CREATE, UPDATE]", own));
        assert_eq!(warned.len(), 1, "{warned:?}");
        let own_update = "    resources: [pods]\n    operations: [UPDATE]\n    names: [web]\n";
        assert_eq!(
            warnings(&policy("[pods]", "[CREATE, UPDATE]", own_update)),
            Vec::<String>::new()
        );
    }
}
