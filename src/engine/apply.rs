//! Phase 2 of a policy: the planned writes applied to the object, each copying only
//! the path to what it changes.

use super::Failure;
use super::edit::{Editor, MergeOptions};
use super::plan::{Planned, Target};
use super::run::failure;
use super::typed_writes::{WriteTypes, Written};
use crate::jsonpath::{self, Token};
use crate::k8s::merge_keys;
use crate::policy::compiled::{Foreach, MutationKind};
use crate::tree::Tree;

/// Applies the plan made against `before`, the object as the policy found it, each
/// value checked against `types`, when given, before it is written.
pub(super) fn apply(
    editor: &mut Editor<'_, '_>,
    plan: Vec<Planned<'_>>,
    before: &Tree<'_>,
    types: Option<&WriteTypes>,
) -> Result<(), Failure> {
    for planned in plan {
        if let Some((foreach, selected)) = &planned.foreach {
            check_elements(before, editor.object(), foreach, selected)?;
        }
        for target in planned.targets {
            apply_target(editor, (planned.field, planned.kind), target, types)?;
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
    types: Option<&WriteTypes>,
) -> Result<(), Failure> {
    let Target { base, value } = target;
    let checked = |at: &[Token], value: &Tree<'_>, written| match types {
        Some(types) => types.check(field, at, value, written),
        None => Ok(()),
    };
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
                checked(at, &value, Written::Whole)?;
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
                    checked(at, &value, Written::Whole)?;
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
                        value.type_name()
                    ),
                ));
            };
            let items = items.clone();
            let list = value;
            let locations = below(editor.object(), &base, path, true)
                .map_err(|e| failure(format!("{field}.path"), e))?;
            write_each(
                editor,
                locations,
                items,
                |_, _| false,
                |editor, at, items| {
                    checked(at, &list, Written::Items)?;
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
pub(super) fn protected_values<'a, 't>(object: &'a Tree<'t>) -> [Option<&'a Tree<'t>>; 3] {
    let metadata = object.get("metadata");
    PROTECTED.map(|key| metadata.and_then(|m| m.get(key)))
}
