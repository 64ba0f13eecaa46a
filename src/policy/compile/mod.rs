//! Compiling a parsed document: every path, regex and expression is checked here,
//! and every problem becomes a finding naming the file, line, policy and field.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::tree::Tree;

use super::compiled::{
    CompiledMutation, CompiledPolicy, CompiledValidation, CompiledVariable, Conditions, FieldCheck,
    FieldTest, Foreach, MutationKind, NamePattern, Operation, Operations, Requirement,
    ResourceRule, ValueSource,
};
use super::findings::Finding;
use super::load::{ParsedDocument, locate_field, locate_in};
use super::model::{self, LabelSelector, Match, Mutation, SelectorOperator};
use crate::expr::template::Template;
use crate::expr::{Declarations, ExprError, Expression, Needs};
use crate::jsonpath::JsonPath;

mod blast_radius;
mod labels;
mod lint;
mod types;

use labels::{Over, map_entry};
pub use lint::check_mode;
use lint::{holds_null, protected_field};
use types::Written;

/// Longest regex source accepted; the `regex` crate is linear-time, this bounds its size.
const MAX_REGEX_CHARS: usize = 4096;

/// Collects findings for one document.
struct Compiler<'a> {
    parsed: &'a ParsedDocument,
    /// `spec.params` as a tree: what expressions are checked and folded against, and
    /// what they read at admission.
    params: Tree<'static>,
    findings: &'a mut Vec<Finding>,
    needs: Needs,
    uses_cel: bool,
    failed: bool,
    /// The variables compiled so far: those an expression compiled now may refer to.
    visible_variables: Vec<String>,
    all_variables: Vec<String>,
    /// True while compiling a mutation with `foreach`: only there are `element` and
    /// `index` bound.
    in_foreach: bool,
    /// The `foreach` path of the mutation compiled now, which its paths are below.
    foreach_path: Option<JsonPath>,
    /// The kinds of the resources the policy matches, which its literal values are
    /// checked against.
    kinds: Vec<crate::k8s::schema::ResourceKind<'static>>,
}

/// Compiles one document; `None` when it has errors (all of them are in `findings`).
pub fn compile(parsed: &ParsedDocument, findings: &mut Vec<Finding>) -> Option<CompiledPolicy> {
    let mut compiler = Compiler {
        parsed,
        params: Tree::from(&parsed.document.spec.params),
        findings,
        needs: Needs::default(),
        uses_cel: false,
        failed: false,
        visible_variables: Vec::new(),
        all_variables: parsed
            .document
            .spec
            .variables
            .iter()
            .map(|v| v.name.clone())
            .collect(),
        in_foreach: false,
        foreach_path: None,
        kinds: Vec::new(),
    };
    let spec = &parsed.document.spec;
    if spec.match_.resources.is_empty() {
        compiler.error(
            "spec.match.resources",
            "",
            "no resources: the policy would never match",
            Some("list plural resource names, e.g. [pods] or [nodes/status]"),
        );
    }
    let matcher = compiler.conditions("spec.match", &spec.match_);
    compiler.kinds = types::matched_kinds(&matcher.resources, &parsed.file, compiler.findings);
    compiler.check_names("spec.match", &spec.match_, &matcher, None);
    let matches_pods = matcher.resources.iter().any(|rule| {
        rule.group.as_deref().is_none_or(str::is_empty)
            && (rule.resource == "pods" || rule.resource == "*")
            && rule.subresource.is_none()
    });
    if spec.pod_controllers && !matches_pods {
        compiler.error(
            "spec.podControllers",
            "podControllers",
            "podControllers applies a Pod policy to pod templates, and match.resources does not list pods",
            Some("add pods to match.resources, or remove podControllers"),
        );
    }
    let exclude = spec.exclude.as_ref().map(|exclude| {
        if is_empty_match(exclude) {
            compiler.error(
                "spec.exclude",
                "exclude",
                "an empty exclude block excludes every request",
                Some("remove it, or give at least one condition"),
            );
        }
        let conditions = compiler.conditions("spec.exclude", exclude);
        compiler.check_names("spec.exclude", exclude, &conditions, Some(&matcher));
        conditions
    });
    let variables = compiler.variables(&spec.variables);
    let validations = compiler.validations(&spec.validations);
    let mutations = compiler.mutations(&spec.mutations);
    if spec.mutations.is_empty() {
        compiler.warning(
            "spec.mutations",
            "mutations",
            "no mutations: the policy never changes anything",
        );
    }
    compiler.check_blast_radius(&matcher, exclude.as_ref());
    if compiler.failed {
        return None;
    }
    let templated = mutations.iter().any(|m| match &m.kind {
        MutationKind::Set { value, .. }
        | MutationKind::Merge { value, .. }
        | MutationKind::Append { value, .. } => matches!(value, ValueSource::Template(_)),
        MutationKind::Remove { .. } | MutationKind::JsonPatch(_) => false,
    });
    let untyped = matcher
        .resources
        .iter()
        .any(|rule| rule.resource == "*" || rule.subresource.as_deref() == Some("*"));
    let checks_written_types = templated || untyped || compiler.kinds.is_empty();
    Some(CompiledPolicy {
        name: parsed.document.metadata.name.clone(),
        order: spec.order,
        failure_policy: spec.failure_policy,
        mode: spec.mode,
        pod_controllers: spec.pod_controllers,
        file: parsed.file.clone(),
        matcher,
        exclude,
        params: compiler.params,
        variables,
        validations,
        mutations,
        needs: compiler.needs,
        uses_cel: compiler.uses_cel,
        checks_written_types,
        label_gate: None,
    })
}

fn is_empty_match(m: &Match) -> bool {
    m.resources.is_empty() && m.operations.is_empty() && blast_radius::matches_every_object(m)
}

impl Compiler<'_> {
    fn finding(&mut self, finding: Finding, field: &str, needle: &str) {
        let line = locate_field(&self.parsed.text, self.parsed.first_line, field)
            .or_else(|| locate_in(&self.parsed.text, self.parsed.first_line, needle))
            .or(Some(self.parsed.first_line));
        self.findings.push(
            finding
                .at_line(line)
                .in_policy(self.parsed.document.metadata.name.clone())
                .at_field(field),
        );
    }

    fn error(&mut self, field: &str, needle: &str, message: impl Into<String>, hint: Option<&str>) {
        self.failed = true;
        let mut finding = Finding::error(&self.parsed.file, message);
        if let Some(hint) = hint {
            finding = finding.with_hint(hint);
        }
        self.finding(finding, field, needle);
    }

    fn warning(&mut self, field: &str, needle: &str, message: impl Into<String>) {
        let finding = Finding::warning(&self.parsed.file, message);
        self.finding(finding, field, needle);
    }

    fn warning_with_hint(&mut self, field: &str, needle: &str, message: &str, hint: &str) {
        let finding = Finding::warning(&self.parsed.file, message).with_hint(hint);
        self.finding(finding, field, needle);
    }

    /// What the policy declares for its expressions, as seen from the one compiled now.
    fn declarations(&self) -> Declarations<'_> {
        Declarations {
            params: &self.params,
            variables: &self.visible_variables,
            all_variables: &self.all_variables,
            object: match self.kinds.as_slice() {
                [only] => Some(only.ty),
                _ => None,
            },
        }
    }

    fn expression_error(&mut self, field: &str, needle: &str, error: &ExprError) {
        self.error(field, needle, error.to_string(), error.hint());
    }

    fn expression(&mut self, field: &str, source: &str) -> Option<Expression> {
        match Expression::compile(source, &self.declarations()) {
            Ok(expression) => {
                if !self.element_bound(field, source, expression.needs()) {
                    return None;
                }
                self.needs = self.needs.union(expression.needs());
                self.uses_cel = true;
                self.expression_warnings(field, &expression);
                Some(expression)
            }
            Err(error) => {
                self.expression_error(field, source, &error);
                None
            }
        }
    }

    /// `element` and `index` exist only under `foreach`; elsewhere CEL would fail on
    /// every request with an undeclared reference.
    fn element_bound(&mut self, field: &str, needle: &str, needs: Needs) -> bool {
        if needs.element && !self.in_foreach {
            self.error(
                field,
                needle,
                "`element` and `index` are bound only in a mutation with foreach",
                Some("add foreach: <JSONPath> to the mutation, or read the value from object"),
            );
            return false;
        }
        true
    }

    fn template(&mut self, field: &str, value: &Value) -> Option<ValueSource> {
        let value = Tree::from(value);
        match Template::compile(&value, &self.declarations()) {
            Ok(template) if template.is_static() => Some(ValueSource::Literal(value)),
            Ok(template) => {
                if !self.element_bound(field, "{{", template.needs()) {
                    return None;
                }
                self.needs = self.needs.union(template.needs());
                self.uses_cel = true;
                for (path, expression) in template.expressions() {
                    let at = if path.is_empty() {
                        field.to_string()
                    } else {
                        format!("{field}.{path}")
                    };
                    self.expression_warnings(&at, expression);
                }
                Some(ValueSource::Template(Box::new(template)))
            }
            Err(error) => {
                let at = if error.path.is_empty() {
                    field.to_string()
                } else {
                    format!("{field}.{}", error.path)
                };
                self.expression_error(&at, "{{", &error.error);
                None
            }
        }
    }

    fn path(&mut self, field: &str, source: &str) -> Option<JsonPath> {
        match JsonPath::compile(source) {
            Ok(path) => Some(path),
            Err(error) => {
                self.error(
                    field,
                    source,
                    error.to_string(),
                    Some("JSONPath starts with $; quote keys with dots or slashes: $.metadata.annotations['example.com/key']"),
                );
                None
            }
        }
    }

    fn conditions(&mut self, field: &str, m: &Match) -> Conditions {
        let mut conditions = Conditions::default();
        for (i, resource) in m.resources.iter().enumerate() {
            match ResourceRule::parse(resource) {
                Ok(rule) => {
                    self.check_resource_name(&format!("{field}.resources[{i}]"), resource, &rule);
                    conditions.resources.push(rule);
                }
                Err(reason) => self.error(
                    &format!("{field}.resources[{i}]"),
                    resource,
                    format!("invalid resource {resource:?}: {reason}"),
                    None,
                ),
            }
        }
        conditions.operations = self.operations(&format!("{field}.operations"), &m.operations);
        conditions.namespaces = m
            .namespaces
            .iter()
            .map(|n| NamePattern(n.clone()))
            .collect();
        conditions.names = m.names.iter().map(|n| NamePattern(n.clone())).collect();
        conditions.namespace_selector = m.namespace_selector.as_ref().map(|selector| {
            let at = format!("{field}.namespaceSelector");
            let requirements =
                self.selector(Over::Labels, (&at, &BTreeMap::new()), &at, Some(selector));
            if requirements.is_empty() && selector.match_expressions.is_empty() {
                let effect = if field == "spec.match" {
                    "it changes nothing"
                } else {
                    "the exclude block skips every namespaced request and every Namespace"
                };
                self.warning(
                    &at,
                    "namespaceSelector",
                    format!("an empty namespaceSelector selects every namespace: {effect}"),
                );
            }
            requirements
        });
        conditions.labels = self.selector(
            Over::Labels,
            (&format!("{field}.labels"), &m.labels),
            &format!("{field}.labelSelector"),
            m.label_selector.as_ref(),
        );
        conditions.annotations = self.selector(
            Over::Annotations,
            (&format!("{field}.annotations"), &m.annotations),
            &format!("{field}.annotationSelector"),
            m.annotation_selector.as_ref(),
        );
        for (i, test) in m.fields.iter().enumerate() {
            if let Some(test) = self.field_test(&format!("{field}.fields[{i}]"), test) {
                conditions.fields.push(test);
            }
        }
        conditions.cel = m
            .cel
            .as_ref()
            .and_then(|source| self.expression(&format!("{field}.cel"), source));
        conditions
    }

    fn operations(&mut self, field: &str, operations: &[String]) -> Operations {
        let mut set = Operations::default();
        for (i, text) in operations.iter().enumerate() {
            if text == "*" {
                return Operations::ALL;
            }
            match Operation::parse(text) {
                Some(op) => set.insert(op),
                None => self.error(
                    &format!("{field}[{i}]"),
                    text,
                    format!("unknown operation {text:?}"),
                    Some("use CREATE, UPDATE, DELETE, CONNECT or *"),
                ),
            }
        }
        set
    }

    /// Compiles a shorthand map (`labels`, `annotations`) and a selector into one list of
    /// requirements. Label selectors (object labels, namespace labels) also get a warning
    /// for a key or value no Kubernetes label can have: such a requirement never holds
    /// (or, for NotIn and DoesNotExist, always does).
    fn selector(
        &mut self,
        over: Over,
        (shorthand_field, shorthand): (&str, &BTreeMap<String, String>),
        field: &str,
        selector: Option<&LabelSelector>,
    ) -> Vec<Requirement> {
        let mut requirements = Vec::new();
        for (key, value) in shorthand {
            self.check_label(over, &map_entry(shorthand_field, key), key, [value]);
            requirements.push(Requirement::In(key.clone(), vec![value.clone()]));
        }
        let Some(selector) = selector else {
            return requirements;
        };
        for (key, value) in &selector.match_labels {
            let at = map_entry(&format!("{field}.matchLabels"), key);
            self.check_label(over, &at, key, [value]);
            requirements.push(Requirement::In(key.clone(), vec![value.clone()]));
        }
        for (i, expression) in selector.match_expressions.iter().enumerate() {
            let at = format!("{field}.matchExpressions[{i}]");
            let key = expression.key.clone();
            let values = expression.values.clone();
            self.check_label(over, &at, &key, &values);
            let requirement = match expression.operator {
                SelectorOperator::In | SelectorOperator::NotIn if values.is_empty() => {
                    self.error(&at, &key, "In and NotIn need at least one value", None);
                    continue;
                }
                SelectorOperator::Exists | SelectorOperator::DoesNotExist if !values.is_empty() => {
                    self.error(&at, &key, "Exists and DoesNotExist take no values", None);
                    continue;
                }
                SelectorOperator::In => Requirement::In(key, values),
                SelectorOperator::NotIn => Requirement::NotIn(key, values),
                SelectorOperator::Exists => Requirement::Exists(key),
                SelectorOperator::DoesNotExist => Requirement::DoesNotExist(key),
            };
            requirements.push(requirement);
        }
        requirements
    }

    fn field_test(&mut self, field: &str, test: &model::FieldTest) -> Option<FieldTest> {
        let path = self.path(&format!("{field}.path"), &test.path);
        let mut checks = Vec::new();
        if let Some(value) = &test.equals {
            checks.push(FieldCheck::Equals(Tree::from(value)));
        }
        if let Some(values) = &test.in_ {
            checks.push(FieldCheck::In(values.iter().map(Tree::from).collect()));
        }
        if let Some(values) = &test.not_in {
            checks.push(FieldCheck::NotIn(values.iter().map(Tree::from).collect()));
        }
        match (test.exists, test.not_exists) {
            (Some(true), _) | (_, Some(false)) => checks.push(FieldCheck::Exists),
            (Some(false), _) | (_, Some(true)) => checks.push(FieldCheck::NotExists),
            (None, None) => {}
        }
        if let Some(source) = &test.regex {
            if source.len() > MAX_REGEX_CHARS {
                self.error(
                    &format!("{field}.regex"),
                    "regex",
                    format!("regex longer than {MAX_REGEX_CHARS} characters"),
                    None,
                );
            } else {
                match regex::RegexBuilder::new(source).size_limit(1 << 20).build() {
                    Ok(regex) => checks.push(FieldCheck::Regex(regex)),
                    Err(error) => {
                        self.error(
                            &format!("{field}.regex"),
                            source,
                            format!("invalid regex: {error}"),
                            None,
                        );
                        return None;
                    }
                }
            }
        }
        if checks.len() != 1 {
            self.error(
                field,
                &test.path,
                format!("a field test needs exactly one of equals, in, notIn, exists, notExists, regex; found {}", checks.len()),
                None,
            );
            return None;
        }
        Some(FieldTest {
            field: format!("{field}.path"),
            path: path?,
            check: checks.pop()?,
        })
    }

    fn variables(&mut self, variables: &[model::Variable]) -> Vec<CompiledVariable> {
        let mut compiled: Vec<CompiledVariable> = Vec::new();
        for (i, variable) in variables.iter().enumerate() {
            let field = format!("spec.variables[{i}]");
            let valid_name = variable
                .name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && variable
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid_name {
                self.error(
                    &format!("{field}.name"),
                    &variable.name,
                    format!("invalid variable name {:?}", variable.name),
                    Some("use a CEL identifier: letters, digits and _"),
                );
                continue;
            }
            if compiled.iter().any(|v| v.name == variable.name) {
                self.error(
                    &format!("{field}.name"),
                    &variable.name,
                    "duplicate variable name",
                    None,
                );
                continue;
            }
            let expression = self.expression(&format!("{field}.expression"), &variable.expression);
            // Visible to the expressions after it even when it failed, which is reported.
            self.visible_variables.push(variable.name.clone());
            if let Some(expression) = expression {
                compiled.push(CompiledVariable {
                    name: variable.name.clone(),
                    expression,
                });
            }
        }
        compiled
    }

    fn validations(&mut self, validations: &[model::Validation]) -> Vec<CompiledValidation> {
        validations
            .iter()
            .enumerate()
            .filter_map(|(i, validation)| {
                let expression = self.expression(
                    &format!("spec.validations[{i}].expression"),
                    &validation.expression,
                )?;
                Some(CompiledValidation {
                    expression,
                    message: validation.message.clone(),
                })
            })
            .collect()
    }

    fn mutations(&mut self, mutations: &[Mutation]) -> Vec<CompiledMutation> {
        mutations
            .iter()
            .enumerate()
            .filter_map(|(i, mutation)| self.mutation(i, mutation))
            .collect()
    }

    fn mutation(&mut self, i: usize, mutation: &Mutation) -> Option<CompiledMutation> {
        let base = format!("spec.mutations[{i}]");
        let given = [
            mutation.set.is_some(),
            mutation.merge.is_some(),
            mutation.append.is_some(),
            mutation.remove.is_some(),
            mutation.json_patch.is_some(),
        ];
        if given.iter().filter(|g| **g).count() != 1 {
            self.error(
                &base,
                "mutations",
                "a mutation needs exactly one of set, merge, append, remove, jsonPatch",
                Some("split it into one list item per change"),
            );
            return None;
        }
        let foreach = match &mutation.foreach {
            Some(source) => {
                let field = format!("{base}.foreach");
                if source.trim_start().starts_with('@') {
                    self.error(
                        &field,
                        source,
                        "foreach selects from the object: its path starts with $",
                        Some("for example $.spec['containers','initContainers'][*]"),
                    );
                    return None;
                }
                let path = self.path(&field, source)?;
                Some(Foreach { field, path })
            }
            None => None,
        };
        self.in_foreach = foreach.is_some();
        self.foreach_path = foreach.as_ref().map(|f| f.path.clone());
        let compiled = self.mutation_kind(&base, mutation);
        let when = match mutation.when.as_deref() {
            Some(source) => self.expression(&format!("{base}.when"), source),
            None => None,
        };
        self.in_foreach = false;
        let (field, kind) = compiled?;
        if mutation.when.is_some() && when.is_none() {
            return None;
        }
        Some(CompiledMutation {
            field,
            foreach,
            when,
            kind,
        })
    }

    fn mutation_kind(&mut self, base: &str, mutation: &Mutation) -> Option<(String, MutationKind)> {
        if let Some(set) = &mutation.set {
            let field = format!("{base}.set");
            let path = self.target_path(&format!("{field}.path"), &set.path, false)?;
            let value = self.template(&format!("{field}.value"), &set.value)?;
            self.check_written(
                &format!("{field}.value"),
                self.foreach_path.clone().as_ref(),
                Some(&path),
                &set.value,
                Written::Whole,
            );
            let if_absent = set.if_absent;
            Some((
                field,
                MutationKind::Set {
                    path,
                    value,
                    if_absent,
                },
            ))
        } else if let Some(merge) = &mutation.merge {
            let field = format!("{base}.merge");
            let path = match &merge.path {
                Some(source) => Some(self.target_path(&format!("{field}.path"), source, true)?),
                None => None,
            };
            if !self.in_foreach {
                self.check_protected_fragment(
                    &format!("{field}.value"),
                    path.as_ref(),
                    &merge.value,
                );
            }
            if merge.if_absent && holds_null(&merge.value) {
                self.warning_with_hint(
                    &format!("{field}.value"),
                    "null",
                    "with ifAbsent a null removes nothing: the key is left as it is",
                    "drop the null, or remove the key in a merge without ifAbsent",
                );
            }
            let value = self.template(&format!("{field}.value"), &merge.value)?;
            // A merge into the object of a value that is not a map is refused below.
            let into_object = path.is_none() && !self.in_foreach;
            if !into_object || merge.value.is_object() {
                self.check_written(
                    &format!("{field}.value"),
                    self.foreach_path.clone().as_ref(),
                    path.as_ref(),
                    &merge.value,
                    Written::Whole,
                );
            }
            // Without a path the merge is into the object itself, which only an object
            // merges into (under `foreach`, into the element, which may be anything).
            if path.is_none()
                && !self.in_foreach
                && let ValueSource::Literal(fragment) = &value
                && fragment.as_map().is_none()
            {
                self.error(
                    &format!("{field}.value"),
                    "value",
                    "a merge without a path merges into the object, and takes an object",
                    Some("write the fields to merge from the top (value: {metadata: {labels: {team: a}}}), or give a path"),
                );
                return None;
            }
            // With ifAbsent an item already there is not looked into, so the merge fails
            // only where the item is absent: not refused.
            if !self.in_foreach
                && !merge.if_absent
                && let ValueSource::Literal(fragment) = &value
            {
                self.check_merge_keys(&format!("{field}.value"), path.as_ref(), fragment);
            }
            Some((
                field,
                MutationKind::Merge {
                    path,
                    value,
                    if_absent: merge.if_absent,
                    position: merge.position,
                },
            ))
        } else if let Some(append) = &mutation.append {
            let field = format!("{base}.append");
            let path = self.target_path(&format!("{field}.path"), &append.path, self.in_foreach)?;
            if !append.value.is_array() && !append.value.is_string() {
                self.error(
                    &format!("{field}.value"),
                    "value",
                    "append takes a list of the items to add",
                    Some("wrap the item in a list: value: [{key: example, operator: Exists}]"),
                );
                return None;
            }
            let value = self.template(&format!("{field}.value"), &append.value)?;
            self.check_written(
                &format!("{field}.value"),
                self.foreach_path.clone().as_ref(),
                Some(&path),
                &append.value,
                Written::Items,
            );
            if let ValueSource::Literal(literal) = &value
                && literal.as_list().is_none()
            {
                self.error(
                    &format!("{field}.value"),
                    "value",
                    "append takes a list of the items to add",
                    Some("wrap the item in a list, or make the value one {{ expr }} giving a list"),
                );
                return None;
            }
            Some((
                field,
                MutationKind::Append {
                    path,
                    value,
                    position: append.position,
                },
            ))
        } else if let Some(remove) = &mutation.remove {
            let field = format!("{base}.remove");
            let path = self.target_path(&format!("{field}.path"), &remove.path, false)?;
            Some((field, MutationKind::Remove { path }))
        } else {
            let field = format!("{base}.jsonPatch");
            if self.in_foreach {
                self.error(
                    &field,
                    "jsonPatch",
                    "jsonPatch cannot run under foreach: its pointers are not relative to an element",
                    Some("use set, merge, append or remove, whose paths start at the element with @"),
                );
                return None;
            }
            let operations = mutation.json_patch.as_deref().unwrap_or_default();
            self.check_json_patch_values(&field, operations);
            let patch = self.json_patch(&field, operations)?;
            Some((field, MutationKind::JsonPatch(patch)))
        }
    }

    /// A path a mutation writes through: no descendant segments, not the root (except
    /// for merge, and under `foreach`, where the root is the element, except for
    /// remove), and never a protected metadata field. Under `foreach` the path starts
    /// with `@`, the element; elsewhere with `$`.
    fn target_path(&mut self, field: &str, source: &str, root_allowed: bool) -> Option<JsonPath> {
        let trimmed = source.trim_start();
        let relative = trimmed.starts_with('@');
        if self.in_foreach != relative {
            let (message, hint) = if self.in_foreach {
                (
                    "under foreach, paths start at the element with @",
                    format!("write @{}", trimmed.trim_start_matches('$')),
                )
            } else {
                (
                    "a path starting with @ is relative to a foreach element, and this mutation has no foreach",
                    format!("write ${}, or add foreach", trimmed.trim_start_matches('@')),
                )
            };
            self.error(field, source, message, Some(&hint));
            return None;
        }
        let absolute = if relative {
            format!("${}", &trimmed[1..])
        } else {
            source.to_string()
        };
        let path = self.path(field, &absolute)?;
        if path.has_descendant() {
            self.error(
                field,
                source,
                "a mutation path cannot use `..` (descendant) segments",
                None,
            );
            return None;
        }
        let is_remove = field.ends_with(".remove.path");
        if path.is_root() && relative && is_remove {
            self.error(
                field,
                source,
                "a foreach mutation cannot remove its element",
                Some("remove with a filter instead: remove: {path: \"$.spec.containers[?@.name == 'debug']\"}"),
            );
            return None;
        }
        if path.is_root() && !root_allowed && !relative {
            self.error(
                field,
                source,
                "a mutation cannot replace the whole object",
                Some("set a field below $"),
            );
            return None;
        }
        if let Some(tokens) = path.singular()
            && !relative
        {
            if let Some(protected) = protected_field(tokens) {
                self.error(
                    field,
                    source,
                    format!("policies may not change metadata.{protected}"),
                    None,
                );
                return None;
            }
            self.check_unescaped_key(field, source, tokens);
        }
        Some(path)
    }

    fn json_patch(
        &mut self,
        field: &str,
        operations: &[model::JsonPatchOperation],
    ) -> Option<json_patch::Patch> {
        let valid = self.check_json_patch(field, operations);
        let value = match serde_json::to_value(operations) {
            Ok(value) => value,
            Err(error) => {
                self.error(field, "jsonPatch", error.to_string(), None);
                return None;
            }
        };
        match serde_json::from_value::<json_patch::Patch>(value) {
            Ok(patch) if valid => Some(patch),
            Ok(_) => None,
            Err(error) => {
                self.error(field, "jsonPatch", format!("invalid JSON Patch: {error}"), Some("each operation needs op, path and, for add/replace/test, value; paths are JSON Pointers such as /metadata/labels/app"));
                None
            }
        }
    }
}
