//! Changing the object in place. Every write is recorded in the evaluation's
//! [`Journal`] first, which is what makes a policy's changes undoable, its own patch
//! and the review's patch exact; nothing else writes to the object.

use serde_json::{Map, Value};

use super::journal::Journal;
use crate::jsonpath::{self, Token, array_index, lookup};
use crate::k8s::merge_keys;
use crate::policy::model::Position;

/// Why an edit could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    #[error("cannot set {at}: {parent} is a {kind}, not an object or list")]
    NotAContainer {
        at: String,
        parent: String,
        kind: &'static str,
    },
    #[error("cannot set {at}: index {index} is beyond the end of the list (length {len})")]
    IndexOutOfRange { at: String, index: i64, len: usize },
    #[error("cannot set {at}: a list index under a missing parent")]
    IndexUnderMissingParent { at: String },
    #[error("cannot append to {at}: it is a {kind}, not a list")]
    NotAList { at: String, kind: &'static str },
    #[error("JSON Patch failed: {0}")]
    JsonPatch(String),
    #[error(
        "cannot merge into {at}: Kubernetes merges this list by {key:?}, and item {item} of the value has no {key:?}"
    )]
    MergeKeyMissing {
        at: String,
        key: &'static str,
        item: usize,
    },
}

/// How [`Editor::merge_with`] treats what is already there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MergeOptions {
    /// Add only absent keys and keyed items; replace, remove and merge into nothing.
    pub if_absent: bool,
    /// Where new items of lists merged by key go.
    pub position: Position,
}

/// Edits one object, recording every write in a journal before making it.
pub struct Editor<'d> {
    object: &'d mut Value,
    journal: &'d mut Journal,
}

impl<'d> Editor<'d> {
    pub fn new(object: &'d mut Value, journal: &'d mut Journal) -> Editor<'d> {
        Editor { object, journal }
    }

    pub fn object(&self) -> &Value {
        self.object
    }

    /// Sets `value` at `at`, creating missing objects on the way.
    pub fn set(&mut self, at: &[Token], value: Value) -> Result<(), EditError> {
        let Some((last, parents)) = at.split_last() else {
            // Replacing the whole object is refused at compile time.
            return Ok(());
        };
        // Find the deepest existing ancestor; everything below it is created.
        let mut depth = 0;
        while depth < parents.len()
            && jsonpath::get(self.object, &parents[..=depth]).is_some_and(|v| !v.is_null())
        {
            depth += 1;
        }
        if depth < parents.len() {
            let built = build_missing(&at[depth + 1..], value, at)?;
            return self.put(&parents[..=depth], built);
        }
        let parent = jsonpath::get(self.object, parents).unwrap_or(&Value::Null);
        match (parent, last) {
            (Value::Object(map), Token::Key(key)) => match lookup::field(map, key) {
                Some(existing) if *existing == value => Ok(()),
                _ => self.put(at, value),
            },
            (Value::Array(items), Token::Index(index)) => {
                let len = items.len();
                match array_index(*index, len) {
                    Some(i) if items[i] == value => Ok(()),
                    Some(i) => {
                        let mut resolved = parents.to_vec();
                        resolved.push(Token::Index(i as i64));
                        self.put(&resolved, value)
                    }
                    None if *index == len as i64 => self.put(at, value),
                    None => Err(EditError::IndexOutOfRange {
                        at: jsonpath::display(at),
                        index: *index,
                        len,
                    }),
                }
            }
            (other, _) => Err(EditError::NotAContainer {
                at: jsonpath::display(at),
                parent: jsonpath::display(parents),
                kind: kind_of(other),
            }),
        }
    }

    /// Puts `value` at `at`, whose parent exists and is a container of the right kind
    /// (a null parent is replaced by an empty object first).
    fn put(&mut self, at: &[Token], value: Value) -> Result<(), EditError> {
        let Some((last, parents)) = at.split_last() else {
            return Ok(());
        };
        // Recorded at `at`, which covers the parent when it is null: the record is
        // cut at the first value that is not a map.
        self.journal.record(self.object, at);
        let Some(parent) = jsonpath::get_mut(self.object, parents) else {
            return Ok(());
        };
        if parent.is_null() {
            *parent = Value::Object(Map::new());
        }
        let kind = kind_of(parent);
        match (parent, last) {
            (Value::Object(map), Token::Key(key)) => {
                map.insert(key.clone(), value);
                Ok(())
            }
            (Value::Array(items), Token::Index(index)) => {
                let len = items.len();
                match array_index(*index, len) {
                    Some(i) => items[i] = value,
                    None if *index == len as i64 => items.push(value),
                    None => {
                        return Err(EditError::IndexOutOfRange {
                            at: jsonpath::display(at),
                            index: *index,
                            len,
                        });
                    }
                }
                Ok(())
            }
            _ => Err(EditError::NotAContainer {
                at: jsonpath::display(at),
                parent: jsonpath::display(parents),
                kind,
            }),
        }
    }

    /// Removes the value at `at`, if present.
    pub fn remove(&mut self, at: &[Token]) {
        self.journal.record_removal(self.object, at);
        remove_at(self.object, at);
    }

    /// Merges `fragment` into the value at `at` (created as `{}` when missing).
    ///
    /// Maps merge key by key (a null value removes the key). A list Kubernetes merges
    /// item by item ([`merge_keys`]: containers and volumes by `name`, volumeMounts by
    /// `mountPath`, ...) merges on that key however many items the fragment holds, so an
    /// empty fragment list changes nothing; new items are appended. Any other value,
    /// other lists included, replaces what is there.
    pub fn merge(&mut self, at: &[Token], fragment: Value) -> Result<(), EditError> {
        self.merge_with(at, fragment, MergeOptions::default())
    }

    /// [`Editor::merge`], adding only what is absent and putting new keyed items where
    /// `options` say.
    pub fn merge_with(
        &mut self,
        at: &[Token],
        fragment: Value,
        options: MergeOptions,
    ) -> Result<(), EditError> {
        let existing = jsonpath::get(self.object, at);
        let mut location = at.to_vec();
        if existing.is_none_or(Value::is_null) {
            return match insertable(fragment, &mut location)? {
                Some(value) => self.set(at, value),
                None => Ok(()),
            };
        }
        self.merge_into(&mut location, fragment, options)
    }

    /// Adds each of `items` to the list at `at` unless an equal item is already there;
    /// creates the list when it is absent. Equal means equal JSON, key order aside.
    pub fn append(
        &mut self,
        at: &[Token],
        items: Vec<Value>,
        position: Position,
    ) -> Result<(), EditError> {
        let len = match jsonpath::get(self.object, at) {
            None | Some(Value::Null) => {
                let mut unique: Vec<Value> = Vec::with_capacity(items.len());
                for item in items {
                    if !unique.contains(&item) {
                        unique.push(item);
                    }
                }
                if unique.is_empty() {
                    return Ok(());
                }
                return self.set(at, Value::Array(unique));
            }
            Some(Value::Array(existing)) => existing.len(),
            Some(other) => {
                return Err(EditError::NotAList {
                    at: jsonpath::display(at),
                    kind: kind_of(other),
                });
            }
        };
        let mut next = match position {
            Position::First => 0,
            Position::Last => len,
        };
        let mut location = at.to_vec();
        for item in items {
            let present = jsonpath::get(self.object, at)
                .and_then(Value::as_array)
                .is_some_and(|list| list.contains(&item));
            if present {
                continue;
            }
            location.push(Token::Index(next as i64));
            self.insert(&location, item);
            location.pop();
            next += 1;
        }
        Ok(())
    }

    /// Inserts `value` into a list before the index `at` ends with (at the end when
    /// the index is the length), shifting the items after it.
    fn insert(&mut self, at: &[Token], value: Value) {
        let Some((Token::Index(index), parents)) = at.split_last() else {
            return;
        };
        self.journal.record(self.object, at);
        let Some(Value::Array(items)) = jsonpath::get_mut(self.object, parents) else {
            return;
        };
        let i = usize::try_from(*index).unwrap_or(0).min(items.len());
        items.insert(i, value);
    }

    fn merge_into(
        &mut self,
        location: &mut Vec<Token>,
        fragment: Value,
        options: MergeOptions,
    ) -> Result<(), EditError> {
        let Some(target) = jsonpath::get(self.object, location) else {
            return Ok(());
        };
        match (target, fragment, list_merge_key(location)) {
            (Value::Object(_), Value::Object(entries), _) => {
                for (key, value) in entries {
                    location.push(Token::Key(key));
                    let present = jsonpath::get(self.object, location).is_some();
                    let merged = match (present, value) {
                        (true, Value::Null) if options.if_absent => Ok(()),
                        (true, Value::Null) => {
                            self.remove(location);
                            Ok(())
                        }
                        (false, Value::Null) => Ok(()),
                        (false, value) => match insertable(value, location) {
                            Ok(Some(value)) => self.put(location, value),
                            Ok(None) => Ok(()),
                            Err(error) => Err(error),
                        },
                        (true, value) => self.merge_into(location, value, options),
                    };
                    location.pop();
                    merged?;
                }
                Ok(())
            }
            (Value::Array(items), Value::Array(fragment_items), Some(key)) => {
                let mut len = items.len();
                let mut added = 0;
                for (item_index, item) in fragment_items.into_iter().enumerate() {
                    let Some(id) = lookup::child(&item, key)
                        .filter(|id| !id.is_null())
                        .cloned()
                    else {
                        return Err(EditError::MergeKeyMissing {
                            at: jsonpath::display(location),
                            key,
                            item: item_index,
                        });
                    };
                    let existing = jsonpath::get(self.object, location)
                        .and_then(Value::as_array)
                        .and_then(|items| {
                            items
                                .iter()
                                .position(|i| lookup::child(i, key) == Some(&id))
                        });
                    let index = existing.unwrap_or(match options.position {
                        Position::First => added,
                        Position::Last => len,
                    });
                    location.push(Token::Index(index as i64));
                    let merged = match existing {
                        // An item with the same key is set, whatever its fields: filling
                        // in a volume of another kind would give it two sources.
                        Some(_) if options.if_absent => Ok(()),
                        Some(_) => self.merge_into(location, item, options),
                        None => match insertable(item, location) {
                            Ok(Some(item)) => {
                                self.insert(location, item);
                                Ok(())
                            }
                            Ok(None) => Ok(()),
                            Err(error) => Err(error),
                        },
                    };
                    location.pop();
                    merged?;
                    if existing.is_none() {
                        len += 1;
                        added += 1;
                    }
                }
                Ok(())
            }
            // Something is set here, and it is not merged into: kept as it is.
            (target, _, _) if options.if_absent && !target.is_null() => Ok(()),
            (target, fragment, _) => {
                let Some(fragment) = insertable(fragment, location)? else {
                    return Ok(());
                };
                if *target != fragment {
                    self.put(location, fragment)?;
                }
                Ok(())
            }
        }
    }

    /// Applies raw RFC 6902 operations. On an error the operations before it have been
    /// applied: the journal undoes them with the rest of the policy's writes.
    pub fn json_patch(&mut self, patch: &json_patch::Patch) -> Result<(), EditError> {
        // One operation at a time: json-patch panics when it cannot undo a patch that
        // failed part-way (a failed move has already removed its source). What a failed
        // operation left half-done is under its recorded locations.
        for operation in &patch.0 {
            self.journal.record_operation(self.object, operation);
            json_patch::patch(self.object, std::slice::from_ref(operation))
                .map_err(|e| EditError::JsonPatch(e.to_string()))?;
        }
        Ok(())
    }
}

/// The merge key of the list at `location`, when Kubernetes merges it item by item.
fn list_merge_key(location: &[Token]) -> Option<&'static str> {
    let [.., Token::Key(field)] = location else {
        return None;
    };
    let item_of = match location {
        [.., Token::Key(list), Token::Index(_), Token::Key(_)] => Some(list.as_str()),
        _ => None,
    };
    merge_keys::merge_key(field, item_of)
}

/// A fragment as it is written at `location`, where nothing was merged into yet: what a
/// second merge of the same fragment leaves, so merging converges in one pass. Null map
/// values mean "remove" in a merge, so they are dropped, also inside the items of keyed
/// lists (which later merges merge item by item); an empty keyed list adds nothing
/// (`None`); other lists are replaced whole and kept as they are.
fn insertable(mut value: Value, location: &mut Vec<Token>) -> Result<Option<Value>, EditError> {
    Ok(prune(&mut value, location)?.then_some(value))
}

/// Makes `value` insertable at `location` in place, as [`insertable`] describes; false
/// when it adds nothing. Maps are pruned where they are, not rebuilt: most fragments hold
/// no null, and a rebuilt map hashes every key again.
fn prune(value: &mut Value, location: &mut Vec<Token>) -> Result<bool, EditError> {
    match value {
        Value::Object(map) => {
            let mut dropped = false;
            for (key, value) in map.iter_mut() {
                match value {
                    Value::Null => {
                        dropped = true;
                        continue;
                    }
                    // Kept as they are, without the location the containers need.
                    Value::Bool(_) | Value::Number(_) | Value::String(_) => continue,
                    Value::Object(_) | Value::Array(_) => {}
                }
                location.push(Token::Key(key.clone()));
                let kept = prune(value, location);
                location.pop();
                if !kept? {
                    // Dropped with the nulls below.
                    *value = Value::Null;
                    dropped = true;
                }
            }
            if dropped {
                map.retain(|_, value| !value.is_null());
            }
            Ok(true)
        }
        Value::Array(items) => {
            let Some(key) = list_merge_key(location) else {
                return Ok(true);
            };
            if items.is_empty() {
                return Ok(false);
            }
            for (index, item) in items.iter_mut().enumerate() {
                if lookup::child(item, key).is_none_or(Value::is_null) {
                    return Err(EditError::MergeKeyMissing {
                        at: jsonpath::display(location),
                        key,
                        item: index,
                    });
                }
                location.push(Token::Index(index as i64));
                // An item with a merge key is a map, which is always kept.
                let pruned = prune(item, location);
                location.pop();
                pruned?;
            }
            Ok(true)
        }
        _ => Ok(true),
    }
}

/// Wraps `value` in the objects (or one-item lists, for index 0) named by `below`,
/// innermost last: the value for a missing node whose descendants are `below`.
fn build_missing(below: &[Token], value: Value, whole: &[Token]) -> Result<Value, EditError> {
    let mut built = value;
    for token in below.iter().rev() {
        built = match token {
            Token::Key(key) => {
                let mut map = Map::new();
                map.insert(key.clone(), built);
                Value::Object(map)
            }
            Token::Index(0) => Value::Array(vec![built]),
            Token::Index(_) => {
                return Err(EditError::IndexUnderMissingParent {
                    at: jsonpath::display(whole),
                });
            }
        };
    }
    Ok(built)
}

fn remove_at(object: &mut Value, at: &[Token]) -> Option<Value> {
    let (last, parents) = at.split_last()?;
    match (jsonpath::get_mut(object, parents)?, last) {
        (Value::Object(map), Token::Key(key)) => map.shift_remove(key),
        (Value::Array(items), Token::Index(index)) => {
            let i = array_index(*index, items.len())?;
            Some(items.remove(i))
        }
        _ => None,
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
#[path = "edit_tests.rs"]
mod tests;
