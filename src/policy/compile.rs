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
use super::model::{self, LabelSelector, Match, Mode, Mutation, SelectorOperator};
use crate::expr::template::Template;
use crate::expr::{Declarations, ExprError, Expression, Needs};
use crate::jsonpath::{JsonPath, Token};

/// Fields no policy may change: the apiserver rejects or misroutes such patches.
const PROTECTED: [&str; 3] = ["name", "namespace", "uid"];

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
        compiler.conditions("spec.exclude", exclude)
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
    if compiler.failed {
        return None;
    }
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
        label_gate: None,
    })
}

/// The field path of a map entry: `labels.app`, or `labels['example.com/team']` for a
/// key that is not a plain name.
fn map_entry(field: &str, key: &str) -> String {
    if !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        format!("{field}.{key}")
    } else {
        format!("{field}['{key}']")
    }
}

/// What a selector reads: label syntax is checked only for labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Over {
    Labels,
    Annotations,
}

/// Checks a label key as Kubernetes does: an optional DNS-subdomain prefix and `/`, then
/// a name.
fn label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        let label = |part: &str| {
            !part.is_empty()
                && part.len() <= 63
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        };
        if prefix.len() > 253 || !prefix.split('.').all(label) {
            return Err(format!(
                "the prefix {prefix:?} is not a lowercase DNS subdomain"
            ));
        }
    }
    if name.is_empty() {
        return Err("the name is empty".to_string());
    }
    label_value(name)
}

/// Checks a label value (also the name part of a key): at most 63 characters of
/// letters, digits, `-`, `_` and `.`, beginning and ending with a letter or digit.
fn label_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    if value.len() > 63 {
        return Err(format!("{} characters, at most 63", value.len()));
    }
    let alphanumeric = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !alphanumeric(value.chars().next()) || !alphanumeric(value.chars().last()) {
        return Err("it must begin and end with a letter or digit".to_string());
    }
    match value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        Some(c) => Err(format!("{c:?} is not allowed")),
        None => Ok(()),
    }
}

fn is_empty_match(m: &Match) -> bool {
    m.resources.is_empty()
        && m.operations.is_empty()
        && m.namespaces.is_empty()
        && m.names.is_empty()
        && m.namespace_selector.is_none()
        && m.labels.is_empty()
        && m.label_selector.is_none()
        && m.annotations.is_empty()
        && m.annotation_selector.is_none()
        && m.fields.is_empty()
        && m.cel.is_none()
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

    /// A built-in resource written as its kind or in the singular (`pod`, `Deployment`)
    /// never matches: the apiserver names resources in the plural, in lower case. Nor
    /// does a group and a resource without a version (`apps/statefulsets`), which reads
    /// as a resource and its subresource.
    fn check_resource_name(&mut self, field: &str, written: &str, rule: &ResourceRule) {
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

    fn expression_warnings(&mut self, field: &str, expression: &Expression) {
        for warning in expression.warnings() {
            self.warning_with_hint(field, "has(", &warning.message, &warning.hint);
        }
    }

    fn template(&mut self, field: &str, value: &Value) -> Option<ValueSource> {
        match Template::compile(value, &self.declarations()) {
            Ok(template) if template.is_static() => Some(ValueSource::Literal(Tree::from(value))),
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
        self.check_names(field, m, &conditions);
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

    /// A Pod made from a template (by a Deployment, a Job, ...) has only
    /// `metadata.generateName` when it is created, and that is what `names` compares
    /// then: a pattern without `*` never matches such a Pod.
    fn check_names(&mut self, field: &str, m: &Match, conditions: &Conditions) {
        let creates =
            conditions.operations.is_empty() || conditions.operations.contains(Operation::Create);
        let pods = conditions
            .resources
            .iter()
            .any(|rule| rule.resource == "pods" || rule.resource == "*")
            || conditions.resources.is_empty();
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

    fn check_label<'v>(
        &mut self,
        over: Over,
        field: &str,
        key: &str,
        values: impl IntoIterator<Item = &'v String>,
    ) {
        if over != Over::Labels {
            return;
        }
        if let Err(reason) = label_key(key) {
            self.warning_with_hint(
                field,
                key,
                &format!("{key:?} is not a valid label key: {reason}"),
                "label keys are [prefix/]name: a DNS subdomain prefix, a name of up to 63 letters, digits, '-', '_' or '.'",
            );
        }
        for value in values {
            if let Err(reason) = label_value(value) {
                self.warning_with_hint(
                    field,
                    value,
                    &format!("{value:?} is not a valid label value: {reason}"),
                    "label values are empty or up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
                );
            }
        }
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

    /// `$.metadata.annotations.example.com/key` parses as nested keys; almost always a
    /// key with dots that should have been quoted.
    fn check_unescaped_key(&mut self, field: &str, source: &str, tokens: &[Token]) {
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

    fn check_protected_fragment(&mut self, field: &str, path: Option<&JsonPath>, fragment: &Value) {
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
    fn check_merge_keys(&mut self, field: &str, path: Option<&JsonPath>, fragment: &Tree<'_>) {
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

    fn json_patch(
        &mut self,
        field: &str,
        operations: &[model::JsonPatchOperation],
    ) -> Option<json_patch::Patch> {
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
fn holds_null(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.values().any(|v| v.is_null() || holds_null(v)),
        Value::Array(items) => items.iter().any(holds_null),
        _ => false,
    }
}

fn unescape_pointer(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn protected_field(tokens: &[Token]) -> Option<&'static str> {
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
