//! Running one policy against the current state of the object.

use std::cell::OnceCell;

use serde_json::{Map, Value, json};

use super::edit::{self, Editor, MergeOptions};
use super::matching::{
    Block, Blocker, ConditionError, RequestFacts, exclude_holds, namespace_selector_holds,
    object_blocker, request_matches,
};
use crate::expr::{Bindings, Expression, RequestFields, Scope, request_fields};
use crate::jsonpath::{self, Token};
use crate::k8s::admission_request::AdmissionRequest;
use crate::k8s::merge_keys;
use crate::policy::compiled::{
    CompiledMutation, CompiledPolicy, Foreach, MutationKind, ValueSource,
};
use crate::policy::model::{FailurePolicy, Mode};
use crate::tree::{self, Tree};

use super::{Failure, PolicyResult};

/// What one look at a policy found: that it is not for the request, that the object
/// does not match it, or, when it matched, its result (the one type the evaluation
/// reports).
#[derive(Debug)]
pub enum PolicyRun<'p> {
    /// The request itself (resource, operation, namespace) is not the policy's: no
    /// change to the object can make it match.
    NotForRequest,
    /// The object does not match, as it is now, because of this condition.
    NotMatched(Blocker<'p>),
    Matched(PolicyResult),
}

fn failure(field: impl Into<String>, reason: impl ToString) -> Failure {
    Failure {
        field: field.into(),
        reason: reason.to_string(),
    }
}

/// The `request` variable CEL expressions see, with the fields in `fields`: those the
/// review's candidate policies can read (`expr::request_fields`).
pub fn request_binding(request: &AdmissionRequest<'_>, fields: RequestFields) -> Value {
    let mut binding = Map::new();
    for field in request_fields::FIELDS {
        if fields.includes(field) {
            binding.insert(field.to_string(), request_field(request, field));
        }
    }
    Value::Object(binding)
}

/// One field of the `request` binding.
fn request_field(request: &AdmissionRequest<'_>, field: &str) -> Value {
    let text = |value: &Option<String>| Value::String(value.clone().unwrap_or_default());
    match field {
        "uid" => Value::String(request.uid.clone()),
        "kind" => json!(request.kind),
        "resource" => json!(request.resource),
        "subResource" => text(&request.sub_resource),
        "name" => text(&request.name),
        "namespace" => text(&request.namespace),
        "operation" => Value::String(request.operation.clone()),
        "userInfo" => request.user_info.clone(),
        "dryRun" => Value::Bool(request.dry_run.unwrap_or(false)),
        // `request_fields::FIELDS` names no other field.
        _ => Value::Null,
    }
}

/// The bindings one review shares between its policies, each built on first use: most
/// policies use no CEL, and then no review pays for them.
pub struct SharedBindings {
    /// The fields of `request` the review's candidates can read.
    request_fields: RequestFields,
    request: OnceCell<Tree<'static>>,
    /// `None` for a cluster-scoped request (CEL `null`).
    namespace_object: OnceCell<Option<Tree<'static>>>,
}

impl SharedBindings {
    /// Bindings whose `request` holds `request_fields`.
    pub fn new(request_fields: RequestFields) -> SharedBindings {
        SharedBindings {
            request_fields,
            request: OnceCell::new(),
            namespace_object: OnceCell::new(),
        }
    }

    fn request(&self, request: &AdmissionRequest<'_>) -> &Tree<'static> {
        self.request
            .get_or_init(|| Tree::from(request_binding(request, self.request_fields)))
    }

    /// `namespaceObject`, or why the namespace's data is missing.
    fn namespace_object(&self, facts: &RequestFacts<'_>) -> Result<Option<&Tree<'static>>, String> {
        if let Some(built) = self.namespace_object.get() {
            return Ok(built.as_ref());
        }
        let built = if facts.namespace.is_empty() {
            None
        } else {
            Some(Tree::from(
                facts.namespace_data.known(facts.namespace)?.to_object(),
            ))
        };
        Ok(self.namespace_object.get_or_init(|| built).as_ref())
    }
}

/// A mutation with its values rendered, ready to apply.
struct Planned<'p> {
    field: &'p str,
    kind: &'p MutationKind,
    /// Under `foreach`: the `foreach` and every element location it selected, so the
    /// apply phase can tell when an earlier mutation moved the elements.
    foreach: Option<(&'p Foreach, Vec<Vec<Token>>)>,
    /// Where the mutation applies: once at the root, or once per element whose `when`
    /// held.
    targets: Vec<Target>,
}

/// One application of a mutation.
struct Target {
    /// Where its paths start: the root, or a `foreach` element.
    base: Vec<Token>,
    /// The rendered value, for the kinds that take one.
    value: Option<Tree<'static>>,
}

/// What a request's policies see as `object`. DELETE carries only `oldObject`:
/// policies match on it and read it, and cannot change it. This type is where the
/// engine tells the two apart; `run_policy` stops before writing for a read-only one.
pub enum Subject<'a, 't> {
    /// The request's object, changed by replacing its root.
    Changeable(&'a mut Tree<'t>),
    /// At DELETE, the old object.
    ReadOnly(&'a Tree<'t>),
}

impl<'a, 't> Subject<'a, 't> {
    /// The request's [`AdmissionRequest::subject`]: its object, changed through `object`
    /// (the evaluation's own handle of the request's root), or at DELETE its old object,
    /// read-only. `None` when the request carries neither.
    pub fn of(object: Option<&'a mut Tree<'t>>, request: &'a AdmissionRequest<'t>) -> Option<Self> {
        match object {
            Some(object) => Some(Subject::Changeable(object)),
            None => request.subject().map(Subject::ReadOnly),
        }
    }

    /// The object as it is now.
    pub fn view(&self) -> &Tree<'t> {
        match self {
            Subject::Changeable(object) => object,
            Subject::ReadOnly(object) => object,
        }
    }
}

/// The object under evaluation, and its root at each version: as the request has it,
/// then after each policy that changed it. An edit copies only the path to what it
/// changes, so a kept root holds that version of the object at the cost of a reference
/// count, and every subtree no policy wrote is shared by all of them.
pub struct EditedObject<'a, 't> {
    pub subject: Subject<'a, 't>,
    /// Never empty: the request's root comes first.
    versions: Vec<Tree<'t>>,
}

impl<'a, 't> EditedObject<'a, 't> {
    pub fn new(subject: Subject<'a, 't>) -> Self {
        let versions = vec![subject.view().clone()];
        EditedObject { subject, versions }
    }

    /// The number of kept versions after the request's.
    pub fn version(&self) -> usize {
        self.versions.len() - 1
    }

    /// The object at `version` (the object as it is now, past the last kept one).
    pub fn at(&self, version: usize) -> &Tree<'t> {
        self.versions
            .get(version)
            .unwrap_or_else(|| self.subject.view())
    }

    /// Keeps the object as it is now as the next version.
    pub fn keep_version(&mut self) {
        let now = self.subject.view().clone();
        self.versions.push(now);
    }

    /// Undoes every write the policies made, for a denied request.
    pub fn rollback_all(&mut self) {
        let original = self.at(0).clone();
        if let Subject::Changeable(object) = &mut self.subject {
            **object = original;
        }
    }

    /// The patch from the request's object to the object as the policies left it.
    pub fn patch(&self) -> tree::Patch<'t> {
        tree::diff(self.at(0), self.subject.view())
    }
}

/// Matches, evaluates and applies one policy. The edited object is left as it was when
/// the policy fails or only audits; otherwise the object keeps its new root.
/// A failure is `Failed` or `Ignored` by the policy's `failurePolicy`.
pub fn run_policy<'p>(
    policy: &'p CompiledPolicy,
    facts: &RequestFacts<'_>,
    request: &AdmissionRequest<'_>,
    shared: &SharedBindings,
    edited: &mut EditedObject<'_, '_>,
) -> PolicyRun<'p> {
    match look(policy, facts, request, shared, edited) {
        Ok(run) => run,
        Err(failure) => PolicyRun::Matched(match policy.failure_policy {
            FailurePolicy::Fail => PolicyResult::Failed(failure),
            FailurePolicy::Ignore => PolicyResult::Ignored(failure),
        }),
    }
}

/// [`run_policy`], with a failure as the error.
fn look<'p>(
    policy: &'p CompiledPolicy,
    facts: &RequestFacts<'_>,
    request: &AdmissionRequest<'_>,
    shared: &SharedBindings,
    edited: &mut EditedObject<'_, '_>,
) -> Result<PolicyRun<'p>, Failure> {
    let subject = &mut edited.subject;
    let view = subject.view();
    if !request_matches(&policy.matcher, facts) {
        return Ok(PolicyRun::NotForRequest);
    }
    match object_blocker(&policy.matcher, view) {
        Ok(None) => {}
        Ok(Some(blocker)) => return Ok(PolicyRun::NotMatched(blocker)),
        Err(error) => return Err(failure(error.field, error.error)),
    }
    // Last of the declarative conditions, so a namespace's data is needed only when the
    // answer depends on it. A namespaced request's namespace does not change; a
    // Namespace's own labels may, as the label selector's do. Missing data fails the
    // policy unless the exclude block's declarative part skips it: the CEL conditions
    // come later, as they may read `namespaceObject`.
    let missing_namespace =
        match namespace_selector_holds(&policy.matcher, facts, view, Block::Match) {
            Ok(true) => None,
            Ok(false) if facts.is_namespace() => {
                return Ok(PolicyRun::NotMatched(Blocker::Labels));
            }
            Ok(false) => return Ok(PolicyRun::NotForRequest),
            Err(reason) => Some(failure("spec.match.namespaceSelector", reason)),
        };
    // An exclude block holds when all its conditions do; its CEL part, if any, is
    // evaluated in phase 1 and only when the declarative part already holds.
    let excluded_declaratively = match &policy.exclude {
        None => false,
        Some(exclude) => match exclude_holds(exclude, facts, view) {
            Ok(holds) => holds,
            Err(ConditionError::FieldTest(error)) => {
                return Err(failure(error.field, error.error));
            }
            Err(ConditionError::Namespace(reason)) => {
                return Err(missing_namespace
                    .unwrap_or_else(|| failure("spec.exclude.namespaceSelector", reason)));
            }
        },
    };
    if excluded_declaratively && policy.exclude.as_ref().is_some_and(|e| e.cel.is_none()) {
        return Ok(PolicyRun::NotMatched(Blocker::Excluded));
    }
    if let Some(missing) = missing_namespace {
        return Err(missing);
    }
    let namespace_object = if policy.needs.namespace_object {
        match shared.namespace_object(facts) {
            Ok(namespace_object) => namespace_object,
            Err(reason) => return Err(failure("namespaceObject", reason)),
        }
    } else {
        None
    };

    // Phase 1: read-only evaluation of every expression against the object as it is now.
    let plan = {
        let mut scope = policy.uses_cel.then(|| {
            let bindings = Bindings {
                object: view,
                old_object: request.old_object.as_ref(),
                namespace_object,
                request: shared.request(request),
                params: &policy.params,
            };
            Scope::new(bindings)
        });
        match plan_policy(policy, view, excluded_declaratively, scope.as_mut()) {
            Ok(Ok(plan)) => plan,
            Ok(Err(blocker)) => return Ok(PolicyRun::NotMatched(blocker)),
            Err(error) => return Err(error),
        }
    };
    let Subject::Changeable(object) = subject else {
        return Ok(PolicyRun::Matched(PolicyResult::Unchanged));
    };

    // Phase 2: apply. Keeping the root the policy started from is what undoes its
    // writes when it fails or only audits.
    let before = object.clone();
    let applied = apply(&mut Editor::new(object), plan, &before);
    if let Err(error) = applied {
        **object = before;
        return Err(error);
    }
    if protected_values(&before) != protected_values(object) {
        **object = before;
        return Err(failure(
            "spec.mutations",
            "policies may not change metadata.name, metadata.namespace or metadata.uid",
        ));
    }
    if policy.mode == Mode::Audit {
        let patch = tree::diff(&before, object).to_json_patch();
        **object = before;
        return Ok(PolicyRun::Matched(if patch.0.is_empty() {
            PolicyResult::Unchanged
        } else {
            PolicyResult::Audited { patch }
        }));
    }
    Ok(PolicyRun::Matched(if before == **object {
        PolicyResult::Unchanged
    } else {
        PolicyResult::Applied
    }))
}

/// Evaluates the CEL parts: match and exclude conditions, variables, validations,
/// `when` guards and templates. `Ok(Err(blocker))` when the CEL conditions say the
/// policy does not apply.
fn plan_policy<'p, 'a>(
    policy: &'p CompiledPolicy,
    object: &'a Tree<'a>,
    excluded_declaratively: bool,
    mut scope: Option<&mut Scope<'a>>,
) -> Result<Result<Vec<Planned<'p>>, Blocker<'p>>, Failure> {
    if let Some(condition) = &policy.matcher.cel
        && !condition_holds(scope.as_deref(), condition, || "spec.match.cel".into())?
    {
        return Ok(Err(Blocker::MatchCel));
    }
    if let Some(exclude) = &policy.exclude
        && excluded_declaratively
        && let Some(condition) = &exclude.cel
        && condition_holds(scope.as_deref(), condition, || "spec.exclude.cel".into())?
    {
        return Ok(Err(Blocker::Excluded));
    }
    for (i, variable) in policy.variables.iter().enumerate() {
        let Some(scope) = scope.as_deref_mut() else {
            break;
        };
        let value = scope
            .evaluate(&variable.expression)
            .map_err(|e| failure(format!("spec.variables[{i}] ({})", variable.name), e))?;
        scope.set_variable(&variable.name, value);
    }
    for (i, validation) in policy.validations.iter().enumerate() {
        let field = || format!("spec.validations[{i}]");
        if !condition_holds(scope.as_deref(), &validation.expression, field)? {
            return Err(failure(field(), &validation.message));
        }
    }
    let mut plan = Vec::with_capacity(policy.mutations.len());
    for mutation in &policy.mutations {
        let planned = match &mutation.foreach {
            None => {
                plan_target(mutation, Vec::new(), scope.as_deref(), false)?.map(|target| Planned {
                    field: &mutation.field,
                    kind: &mutation.kind,
                    foreach: None,
                    targets: vec![target],
                })
            }
            Some(foreach) => Some(plan_foreach(
                mutation,
                foreach,
                object,
                scope.as_deref_mut(),
            )?),
        };
        plan.extend(planned);
    }
    Ok(Ok(plan))
}

/// Plans a `foreach` mutation: `element` and `index` are bound for each selected
/// element in turn, and unbound afterwards.
fn plan_foreach<'p, 'a>(
    mutation: &'p CompiledMutation,
    foreach: &'p Foreach,
    object: &'a Tree<'a>,
    mut scope: Option<&mut Scope<'a>>,
) -> Result<Planned<'p>, Failure> {
    let locations = foreach
        .path
        .locations(object)
        .map_err(|e| failure(&foreach.field, e))?;
    let mut targets = Vec::with_capacity(locations.len());
    let mut planned = Ok(());
    for (position, location) in locations.iter().enumerate() {
        let element = jsonpath::get(object, location).unwrap_or(&Tree::Null);
        // An element's index is its position in its list; a value of a map has none,
        // and gets its position in the selection.
        let index = match location.last() {
            Some(Token::Index(index)) => *index,
            _ => position as i64,
        };
        // A view of the element where it is: binding it costs nothing the mutation's
        // CEL does not read.
        if let Some(scope) = scope.as_deref_mut() {
            scope.set_element(Some((element, index)));
        }
        match plan_target(mutation, location.clone(), scope.as_deref(), true) {
            Ok(target) => targets.extend(target),
            Err(error) => {
                planned = Err(error);
                break;
            }
        }
    }
    if let Some(scope) = scope {
        scope.set_element(None);
    }
    planned?;
    Ok(Planned {
        field: &mutation.field,
        kind: &mutation.kind,
        foreach: Some((foreach, locations)),
        targets,
    })
}

/// Evaluates a mutation's `when` and renders its value for one target; `None` when
/// `when` is false. Under `foreach`, `base` is the element, which messages name.
fn plan_target(
    mutation: &CompiledMutation,
    base: Vec<Token>,
    scope: Option<&Scope<'_>>,
    foreach: bool,
) -> Result<Option<Target>, Failure> {
    // Written only for a message: a review that fails nothing formats nothing.
    let element = || {
        if foreach {
            format!(" (element {})", jsonpath::display(&base))
        } else {
            String::new()
        }
    };
    if let Some(when) = &mutation.when
        && !condition_holds(scope, when, || {
            format!("{}{}", when_field(&mutation.field), element())
        })?
    {
        return Ok(None);
    }
    let source = match &mutation.kind {
        MutationKind::Set { value, .. }
        | MutationKind::Merge { value, .. }
        | MutationKind::Append { value, .. } => Some(value),
        MutationKind::Remove { .. } | MutationKind::JsonPatch(_) => None,
    };
    let value = match source {
        Some(ValueSource::Literal(value)) => Some(value.clone()),
        Some(ValueSource::Template(template)) => {
            let scope =
                scope.ok_or_else(|| failure(&mutation.field, "template needs a CEL scope"))?;
            Some(
                template
                    .render(scope)
                    .map_err(|e| failure(format!("{}.value{}", mutation.field, element()), e))?,
            )
        }
        None => None,
    };
    Ok(Some(Target { base, value }))
}

/// Evaluates `condition`; `field` names it in the failure, if there is one.
fn condition_holds(
    scope: Option<&Scope<'_>>,
    condition: &Expression,
    field: impl Fn() -> String,
) -> Result<bool, Failure> {
    let scope = scope.ok_or_else(|| failure(field(), "expression needs a CEL scope"))?;
    scope
        .evaluate_bool(condition)
        .map_err(|e| failure(field(), e))
}

/// Applies the plan made against `before`, the object as the policy found it.
fn apply(
    editor: &mut Editor<'_, '_>,
    plan: Vec<Planned<'_>>,
    before: &Tree<'_>,
) -> Result<(), Failure> {
    for planned in plan {
        if let Some((foreach, selected)) = &planned.foreach {
            check_elements(before, editor.object(), foreach, selected)?;
        }
        for target in planned.targets {
            apply_target(editor, (planned.field, planned.kind), target)?;
        }
    }
    Ok(())
}

/// The elements a `foreach` planned for (in `before`) must still be where they were in
/// `object`: an earlier mutation of the same policy that added or removed some would
/// send the writes to the wrong element, and one that replaced an item of a keyed list
/// (a container by another of another name) would write what was planned for the item
/// it replaced.
fn check_elements(
    before: &Tree<'_>,
    object: &Tree<'_>,
    foreach: &Foreach,
    selected: &[Vec<Token>],
) -> Result<(), Failure> {
    let now = foreach
        .path
        .locations(object)
        .map_err(|e| failure(&foreach.field, e))?;
    let refused = |what: String| {
        failure(
            &foreach.field,
            format!(
                "an earlier mutation of this policy {what}, and foreach reads them as the policy \
                 found the object; put this mutation first, or in a policy of its own with a \
                 higher order"
            ),
        )
    };
    if now != selected {
        return Err(refused(format!(
            "changed the elements {} selects ({} before, {} now)",
            foreach.path.source(),
            selected.len(),
            now.len()
        )));
    }
    let replaced = selected.iter().find_map(|location| {
        let (Token::Index(_), list) = location.split_last()? else {
            return None;
        };
        let key = merge_keys::at(list)?;
        let key_of = |root| jsonpath::get(root, location).and_then(|item| item.get(key));
        (key_of(before) != key_of(object)).then_some(key)
    });
    if let Some(key) = replaced {
        return Err(refused(format!(
            "replaced an element {} selects (its {key:?} changed)",
            foreach.path.source()
        )));
    }
    Ok(())
}

/// The locations `path` selects for writing below `base`, as absolute locations.
fn below(
    object: &Tree<'_>,
    base: &[Token],
    path: &jsonpath::JsonPath,
    write: bool,
) -> Result<Vec<Vec<Token>>, jsonpath::PathError> {
    let Some(start) = jsonpath::get(object, base) else {
        return Ok(Vec::new());
    };
    let relative = if write {
        path.write_locations(start)?
    } else {
        path.locations(start)?
    };
    Ok(relative
        .into_iter()
        .map(|tail| base.iter().cloned().chain(tail).collect())
        .collect())
}

/// Writes `value` at each location `skip` does not turn down (asked just before the
/// write), a copy while more locations follow and the value itself at the last: most
/// mutations have one location.
fn write_each<'e, 't, T: Clone>(
    editor: &mut Editor<'e, 't>,
    locations: Vec<Vec<Token>>,
    value: T,
    skip: impl Fn(&Editor<'e, 't>, &[Token]) -> bool,
    mut write: impl FnMut(&mut Editor<'e, 't>, &[Token], T) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let mut value = Some(value);
    let mut locations = locations.into_iter().peekable();
    while let Some(location) = locations.next() {
        if skip(editor, &location) {
            continue;
        }
        let copy = if locations.peek().is_some() {
            value.clone()
        } else {
            value.take()
        };
        let Some(copy) = copy else { break };
        write(editor, &location, copy)?;
    }
    Ok(())
}

fn apply_target(
    editor: &mut Editor<'_, '_>,
    (field, kind): (&str, &MutationKind),
    target: Target,
) -> Result<(), Failure> {
    let Target { base, value } = target;
    match (kind, value) {
        (
            MutationKind::Set {
                path, if_absent, ..
            },
            Some(value),
        ) => {
            let locations = below(editor.object(), &base, path, true)
                .map_err(|e| failure(format!("{field}.path"), e))?;
            let present = |editor: &Editor<'_, '_>, at: &[Token]| {
                *if_absent && jsonpath::get(editor.object(), at).is_some_and(|v| !v.is_null())
            };
            write_each(editor, locations, value, present, |editor, at, value| {
                editor
                    .set(at, value)
                    .map_err(|e| failure(format!("{field}.path"), e))
            })?;
        }
        (
            MutationKind::Merge {
                path,
                if_absent,
                position,
                ..
            },
            Some(value),
        ) => {
            let locations = match path {
                None => vec![base],
                Some(path) => below(editor.object(), &base, path, true)
                    .map_err(|e| failure(format!("{field}.path"), e))?,
            };
            let options = MergeOptions {
                if_absent: *if_absent,
                position: *position,
            };
            write_each(
                editor,
                locations,
                value,
                |_, _| false,
                |editor, at, value| {
                    editor
                        .merge_with(at, value, options)
                        .map_err(|e| failure(format!("{field}.value"), e))
                },
            )?;
        }
        (MutationKind::Append { path, position, .. }, Some(value)) => {
            let Some(items) = value.as_list() else {
                return Err(failure(
                    format!("{field}.value"),
                    // The value's type only: a template's value may hold the object's
                    // contents, which are never logged.
                    format!(
                        "append takes a list of the items to add, and the value is {}",
                        edit::kind_of(&value)
                    ),
                ));
            };
            let items = items.clone();
            let locations = below(editor.object(), &base, path, true)
                .map_err(|e| failure(format!("{field}.path"), e))?;
            write_each(
                editor,
                locations,
                items,
                |_, _| false,
                |editor, at, items| {
                    editor
                        .append(at, items, *position)
                        .map_err(|e| failure(format!("{field}.path"), e))
                },
            )?;
        }
        (MutationKind::Remove { path }, _) => {
            let locations = below(editor.object(), &base, path, false)
                .map_err(|e| failure(format!("{field}.path"), e))?;
            // Later locations first, so list indices stay valid while removing.
            for location in locations.iter().rev() {
                editor.remove(location);
            }
        }
        (MutationKind::JsonPatch(patch), _) => {
            editor.json_patch(patch).map_err(|e| failure(field, e))?;
        }
        (
            MutationKind::Set { .. } | MutationKind::Merge { .. } | MutationKind::Append { .. },
            None,
        ) => {}
    }
    Ok(())
}

/// The fields of `metadata` no policy may change.
const PROTECTED: [&str; 3] = ["name", "namespace", "uid"];

/// The protected fields, to compare before and after a policy's writes: a policy that
/// wrote none of them left them shared, and the comparison is three pointer checks.
fn protected_values<'a, 't>(object: &'a Tree<'t>) -> [Option<&'a Tree<'t>>; 3] {
    let metadata = object.get("metadata");
    PROTECTED.map(|key| metadata.and_then(|m| m.get(key)))
}

/// `spec.mutations[0].set` -> `spec.mutations[0].when`.
fn when_field(field: &str) -> String {
    let base = field.rsplit_once('.').map_or(field, |(base, _)| base);
    format!("{base}.when")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request() -> AdmissionRequest<'static> {
        let text = json!({
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "subResource": "scale",
            "name": "web",
            "namespace": "team-a",
            "operation": "UPDATE",
            "userInfo": {"username": "admin", "uid": "0", "groups": ["system:masters"],
                         "extra": {"scopes": ["a", "b"]}},
            "dryRun": true
        })
        .to_string();
        serde_json::from_str::<AdmissionRequest<'_>>(&text)
            .unwrap()
            .into_owned()
    }

    /// Every field, in order, as serde writes the request.
    #[test]
    fn the_whole_request_binding_is_the_request_as_serde_writes_it() {
        let bare = AdmissionRequest {
            uid: "u".to_string(),
            ..AdmissionRequest::default()
        };
        for request in [request(), bare] {
            let serde = json!({
                "uid": request.uid,
                "kind": request.kind,
                "resource": request.resource,
                "subResource": request.sub_resource.clone().unwrap_or_default(),
                "name": request.name.clone().unwrap_or_default(),
                "namespace": request.namespace.clone().unwrap_or_default(),
                "operation": request.operation,
                "userInfo": request.user_info,
                "dryRun": request.dry_run.unwrap_or(false),
            });
            let binding = request_binding(&request, RequestFields::ALL);
            assert_eq!(binding.to_string(), serde.to_string());
        }
    }

    /// Only the fields the candidates read, with the values the whole binding has.
    #[test]
    fn a_request_binding_holds_the_fields_read() {
        let request = request();
        let whole = request_binding(&request, RequestFields::ALL);
        let program = cel::Env::stdlib()
            .compile("request.namespace == '' || request.userInfo.username == ''")
            .unwrap();
        let fields = crate::expr::request_fields::analyse(program.expression());
        assert_eq!(
            request_binding(&request, fields),
            json!({"namespace": whole["namespace"], "userInfo": whole["userInfo"]})
        );
        assert_eq!(
            request_binding(&request, RequestFields::default()),
            json!({})
        );
    }
}
