//! Phase 1 of a policy: every expression evaluated, read-only, against the object as
//! the policy found it (conditions, variables, validations, `when` guards, templates),
//! into a plan of the writes to make.

use super::Failure;
use super::matching::Blocker;
use super::run::failure;
use crate::expr::{Expression, Scope};
use crate::jsonpath::{self, Token};
use crate::policy::compiled::{
    CompiledMutation, CompiledPolicy, Foreach, MutationKind, ValueSource,
};
use crate::tree::Tree;

/// A mutation with its values rendered, ready to apply.
pub(super) struct Planned<'p> {
    pub(super) field: &'p str,
    pub(super) kind: &'p MutationKind,
    /// Under `foreach`: the `foreach` and every element location it selected, so the
    /// apply phase can tell when an earlier mutation moved the elements.
    pub(super) foreach: Option<(&'p Foreach, Vec<Vec<Token>>)>,
    /// Where the mutation applies: once at the root, or once per element whose `when`
    /// held.
    pub(super) targets: Vec<Target>,
}

/// One application of a mutation.
pub(super) struct Target {
    /// Where its paths start: the root, or a `foreach` element.
    pub(super) base: Vec<Token>,
    /// The rendered value, for the kinds that take one.
    pub(super) value: Option<Tree<'static>>,
}

/// Evaluates the CEL parts: match and exclude conditions, variables, validations,
/// `when` guards and templates. `Ok(Err(blocker))` when the CEL conditions say the
/// policy does not apply.
pub(super) fn plan_policy<'p, 'a>(
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
        scope.set_variable(&variable.name, &value);
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

/// `spec.mutations[0].set` -> `spec.mutations[0].when`.
fn when_field(field: &str) -> String {
    let base = field.rsplit_once('.').map_or(field, |(base, _)| base);
    format!("{base}.when")
}
