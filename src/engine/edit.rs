//! Changing the object. An edit copies only the maps and lists on the path to what it
//! changes ([`Tree`]), so the root a policy started from still holds the object as it
//! was: that root is the policy's rollback, and diffing the two gives its patch.

use crate::jsonpath::{self, Token, array_index};
use crate::k8s::merge_keys;
use crate::policy::model::Position;
use crate::tree::{self, Map, Tree};

/// Why an edit could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    #[error("cannot set {at}: {parent} is {kind}, not {wants}")]
    NotAContainer {
        at: String,
        parent: String,
        kind: &'static str,
        /// What the step below it needs: an object for a key, a list for an index.
        wants: &'static str,
    },
    #[error("cannot set {at}: index {index} is beyond the end of the list (length {len})")]
    IndexOutOfRange { at: String, index: i64, len: usize },
    #[error("cannot set {at}: a list index under a missing parent")]
    IndexUnderMissingParent { at: String },
    #[error("cannot append to {at}: it is {kind}, not a list")]
    NotAList { at: String, kind: &'static str },
    #[error("cannot merge at the root: {what} is {kind}, not an object")]
    RootNotAnObject {
        /// "the value" or "the object".
        what: &'static str,
        kind: &'static str,
    },
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

/// Edits one object.
pub struct Editor<'e, 't> {
    object: &'e mut Tree<'t>,
}

impl<'e, 't> Editor<'e, 't> {
    pub fn new(object: &'e mut Tree<'t>) -> Editor<'e, 't> {
        Editor { object }
    }

    pub fn object(&self) -> &Tree<'t> {
        self.object
    }

    /// Sets `value` at `at`, creating missing objects on the way.
    pub fn set(&mut self, at: &[Token], value: Tree<'t>) -> Result<(), EditError> {
        let Some((last, parents)) = at.split_last() else {
            // Replacing the whole object is refused at compile time.
            return Ok(());
        };
        // The deepest existing ancestor, in one walk down; everything below it is created.
        let mut depth = 0;
        let mut parent: &Tree<'t> = self.object;
        for token in parents {
            match jsonpath::child(parent, token) {
                Some(next) if !next.is_null() => {
                    parent = next;
                    depth += 1;
                }
                _ => break,
            }
        }
        if depth < parents.len() {
            let built = build_missing(&at[depth + 1..], value, at)?;
            return self.put(&parents[..=depth], built);
        }
        match (parent.resolved(), last) {
            (Tree::Map(map), Token::Key(key)) => match map.get(key) {
                Some(existing) if *existing == value => Ok(()),
                _ => self.put(at, value),
            },
            (Tree::List(items), Token::Index(index)) => {
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
            (other, last) => Err(EditError::NotAContainer {
                at: jsonpath::display(at),
                parent: jsonpath::display(parents),
                kind: other.type_name(),
                wants: wanted_by(last),
            }),
        }
    }

    /// Puts `value` at `at`, whose parent exists and is a container of the right kind
    /// (a null parent is replaced by an empty object first).
    fn put(&mut self, at: &[Token], value: Tree<'t>) -> Result<(), EditError> {
        let Some((last, parents)) = at.split_last() else {
            return Ok(());
        };
        let Some(parent) = jsonpath::get_mut(self.object, parents) else {
            return Ok(());
        };
        if parent.is_null() {
            *parent = Tree::from(Map::new());
        }
        let kind = parent.type_name();
        match last {
            Token::Key(key) => {
                if let Some(map) = parent.map_mut() {
                    map.insert(key.clone(), value);
                    return Ok(());
                }
            }
            Token::Index(index) => {
                if let Some(items) = parent.list_mut() {
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
                    return Ok(());
                }
            }
        }
        Err(EditError::NotAContainer {
            at: jsonpath::display(at),
            parent: jsonpath::display(parents),
            kind,
            wants: wanted_by(last),
        })
    }

    /// Removes the value at `at`, if present.
    pub fn remove(&mut self, at: &[Token]) {
        // Looked up first: a path to nothing copies nothing.
        if jsonpath::get(self.object, at).is_some() {
            remove_at(self.object, at);
        }
    }

    /// Merges `fragment` into the value at `at` (created as `{}` when missing).
    ///
    /// Maps merge key by key (a null value removes the key). A list Kubernetes merges
    /// item by item ([`merge_keys`]: containers and volumes by `name`, volumeMounts by
    /// `mountPath`, ...) merges on that key however many items the fragment holds, so an
    /// empty fragment list changes nothing; new items are appended. Any other value,
    /// other lists included, replaces what is there.
    pub fn merge(&mut self, at: &[Token], fragment: Tree<'t>) -> Result<(), EditError> {
        self.merge_with(at, fragment, MergeOptions::default())
    }

    /// [`Editor::merge`], adding only what is absent and putting new keyed items where
    /// `options` say.
    pub fn merge_with(
        &mut self,
        at: &[Token],
        fragment: Tree<'t>,
        options: MergeOptions,
    ) -> Result<(), EditError> {
        let existing = jsonpath::get(self.object, at);
        let mut location = at.to_vec();
        let Some(existing) = existing.filter(|existing| !existing.is_null()) else {
            return match insertable(fragment, &mut location)? {
                Some(value) => self.set(at, value),
                None => Ok(()),
            };
        };
        // At the root only a map merges into the object's map: the root itself is never
        // replaced, as `put` writes only below it.
        let into_root = at.is_empty();
        if into_root {
            for (what, tree) in [("the value", &fragment), ("the object", existing)] {
                if !matches!(tree.resolved(), Tree::Map(_)) {
                    let kind = tree.type_name();
                    return Err(EditError::RootNotAnObject { what, kind });
                }
            }
        }
        match merged(existing, &fragment, &mut location, options)? {
            Some(value) if into_root => {
                *self.object = value;
                Ok(())
            }
            Some(value) => self.put(at, value),
            None => Ok(()),
        }
    }

    /// Adds each of `items` to the list at `at` unless an equal item is already there;
    /// creates the list when it is absent. Equal means equal JSON, key order aside.
    pub fn append(
        &mut self,
        at: &[Token],
        items: Vec<Tree<'t>>,
        position: Position,
    ) -> Result<(), EditError> {
        let len = match jsonpath::get(self.object, at).map(Tree::resolved) {
            None | Some(Tree::Null) => {
                let mut unique: Vec<Tree<'t>> = Vec::with_capacity(items.len());
                for item in items {
                    if !unique.contains(&item) {
                        unique.push(item);
                    }
                }
                if unique.is_empty() {
                    return Ok(());
                }
                return self.set(at, Tree::from(unique));
            }
            Some(Tree::List(existing)) => existing.len(),
            Some(other) => {
                return Err(EditError::NotAList {
                    at: jsonpath::display(at),
                    kind: other.type_name(),
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
                .and_then(Tree::as_list)
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
    fn insert(&mut self, at: &[Token], value: Tree<'t>) {
        let Some((Token::Index(index), parents)) = at.split_last() else {
            return;
        };
        let Some(items) = jsonpath::get_mut(self.object, parents).and_then(Tree::list_mut) else {
            return;
        };
        let i = usize::try_from(*index).unwrap_or(0).min(items.len());
        items.insert(i, value);
    }

    /// Applies raw RFC 6902 operations, all or none: on an error the object is as it
    /// was, and the policy fails.
    pub fn json_patch(&mut self, patch: &json_patch::Patch) -> Result<(), EditError> {
        tree::apply_patch(self.object, &patch.0).map_err(|e| EditError::JsonPatch(e.to_string()))
    }
}

/// `fragment` merged into `target`, the value at `location`, as [`Editor::merge_with`]
/// merges: the merged value, or `None` where the merge changes nothing. Built bottom-up
/// from `target`, copying only the maps and lists it changes, so the object is walked to
/// `location` once and written once.
fn merged<'t>(
    target: &Tree<'t>,
    fragment: &Tree<'t>,
    location: &mut Vec<Token>,
    options: MergeOptions,
) -> Result<Option<Tree<'t>>, EditError> {
    match (
        target.resolved(),
        fragment.resolved(),
        merge_keys::at(location),
    ) {
        (Tree::Map(_), Tree::Map(entries), _) => {
            // The map as merged so far; `None` while nothing changed.
            let mut result: Option<Tree<'t>> = None;
            for (key, value) in entries.entries() {
                let present = result.as_ref().unwrap_or(target).get(key);
                location.push(Token::Key(key.to_string()));
                // `Some(None)` removes the key.
                let change = match (present, value) {
                    (Some(_), Tree::Null) if options.if_absent => Ok(None),
                    (Some(_), Tree::Null) => Ok(Some(None)),
                    (None, Tree::Null) => Ok(None),
                    (None, value) => insertable(value.clone(), location).map(|v| v.map(Some)),
                    (Some(existing), value) => {
                        merged(existing, value, location, options).map(|v| v.map(Some))
                    }
                };
                location.pop();
                let Some(change) = change? else {
                    continue;
                };
                let map = result
                    .get_or_insert_with(|| target.resolved().clone())
                    .map_mut();
                match (map, change) {
                    // The fragment's key as it is (borrowed from the text it was read
                    // from where it was), not a copy.
                    (Some(map), Some(value)) => {
                        map.insert(key.clone(), value);
                    }
                    (Some(map), None) => {
                        map.remove(key);
                    }
                    (None, _) => {}
                }
            }
            Ok(result)
        }
        (Tree::List(_), Tree::List(fragment_items), Some(key)) => {
            // The list as merged so far; `None` while nothing changed.
            let mut result: Option<Tree<'t>> = None;
            let mut added = 0;
            for (item_index, item) in fragment_items.iter().enumerate() {
                let Some(id) = item.get(key).filter(|id| !id.is_null()) else {
                    return Err(EditError::MergeKeyMissing {
                        at: jsonpath::display(location),
                        key,
                        item: item_index,
                    });
                };
                let items = result
                    .as_ref()
                    .unwrap_or(target)
                    .as_list()
                    .map_or(&[][..], Vec::as_slice);
                let existing = items.iter().position(|i| i.get(key) == Some(id));
                let index = existing.unwrap_or(match options.position {
                    Position::First => added,
                    Position::Last => items.len(),
                });
                location.push(Token::Index(index as i64));
                let change = match existing {
                    // An item with the same key is set, whatever its fields: filling
                    // in a volume of another kind would give it two sources.
                    Some(_) if options.if_absent => Ok(None),
                    Some(at) => merged(&items[at], item, location, options),
                    None => insertable(item.clone(), location),
                };
                location.pop();
                let Some(value) = change? else {
                    continue;
                };
                let Some(list) = result
                    .get_or_insert_with(|| target.resolved().clone())
                    .list_mut()
                else {
                    continue;
                };
                match existing {
                    Some(at) => list[at] = value,
                    None => {
                        list.insert(index.min(list.len()), value);
                        added += 1;
                    }
                }
            }
            Ok(result)
        }
        // Something is set here, and it is not merged into: kept as it is.
        (target, _, _) if options.if_absent && !target.is_null() => Ok(None),
        (target, _, _) => {
            Ok(insertable(fragment.clone(), location)?.filter(|value| value != target))
        }
    }
}

/// A fragment as it is written at `location`, where nothing was merged into yet: what a
/// second merge of the same fragment leaves, so merging converges in one pass. Null map
/// values mean "remove" in a merge, so they are dropped, also inside the items of keyed
/// lists (which later merges merge item by item); an empty keyed list adds nothing
/// (`None`); other lists are replaced whole and kept as they are.
fn insertable<'t>(
    value: Tree<'t>,
    location: &mut Vec<Token>,
) -> Result<Option<Tree<'t>>, EditError> {
    Ok(match prune(&value, location)? {
        Pruned::Kept => Some(value),
        Pruned::Changed(pruned) => Some(pruned),
        Pruned::Dropped => None,
    })
}

/// What [`prune`] made of a value.
enum Pruned<'t> {
    /// Insertable as it is: most fragments hold no null, and are not copied.
    Kept,
    Changed(Tree<'t>),
    /// Adds nothing.
    Dropped,
}

/// `value` made insertable at `location`, as [`insertable`] describes.
fn prune<'t>(value: &Tree<'t>, location: &mut Vec<Token>) -> Result<Pruned<'t>, EditError> {
    match value.resolved() {
        Tree::Map(map) => {
            // Built from the first entry that changes on.
            let mut changed: Option<Map<'t>> = None;
            for (at, (key, entry)) in map.iter().enumerate() {
                let pruned = match entry {
                    Tree::Null => Pruned::Dropped,
                    // Kept as they are, without the location the containers need.
                    Tree::Bool(_) | Tree::Number(_) | Tree::String(_) => Pruned::Kept,
                    Tree::Map(_) | Tree::List(_) | Tree::Text(_) => {
                        location.push(Token::Key(key.to_owned()));
                        let pruned = prune(entry, location);
                        location.pop();
                        pruned?
                    }
                };
                let kept = match pruned {
                    Pruned::Kept => Some(entry.clone()),
                    Pruned::Changed(entry) => Some(entry),
                    Pruned::Dropped => None,
                };
                let unchanged = matches!(&kept, Some(k) if k.same(entry) || !is_container(k));
                match &mut changed {
                    None if unchanged => continue,
                    None => {
                        let mut copy = Map::with_capacity(map.len());
                        for (key, entry) in map.iter().take(at) {
                            copy.insert(key.to_owned(), entry.clone());
                        }
                        changed = Some(copy);
                    }
                    Some(_) => {}
                }
                if let (Some(copy), Some(kept)) = (&mut changed, kept) {
                    copy.insert(key.to_owned(), kept);
                }
            }
            Ok(changed.map_or(Pruned::Kept, |map| Pruned::Changed(Tree::from(map))))
        }
        Tree::List(items) => {
            let Some(key) = merge_keys::at(location) else {
                return Ok(Pruned::Kept);
            };
            if items.is_empty() {
                return Ok(Pruned::Dropped);
            }
            let mut changed: Option<Vec<Tree<'t>>> = None;
            for (index, item) in items.iter().enumerate() {
                if item.get(key).is_none_or(Tree::is_null) {
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
                match pruned? {
                    Pruned::Changed(item) => {
                        changed
                            .get_or_insert_with(|| items[..index].to_vec())
                            .push(item);
                    }
                    Pruned::Kept | Pruned::Dropped => {
                        if let Some(copy) = &mut changed {
                            copy.push(item.clone());
                        }
                    }
                }
            }
            Ok(changed.map_or(Pruned::Kept, |items| Pruned::Changed(Tree::from(items))))
        }
        _ => Ok(Pruned::Kept),
    }
}

fn is_container(tree: &Tree<'_>) -> bool {
    matches!(tree, Tree::Map(_) | Tree::List(_) | Tree::Text(_))
}

/// Wraps `value` in the objects (or one-item lists, for index 0) named by `below`,
/// innermost last: the value for a missing node whose descendants are `below`.
fn build_missing<'t>(
    below: &[Token],
    value: Tree<'t>,
    whole: &[Token],
) -> Result<Tree<'t>, EditError> {
    let mut built = value;
    for token in below.iter().rev() {
        built = match token {
            Token::Key(key) => {
                let mut map = Map::with_capacity(1);
                map.insert(key.clone(), built);
                Tree::from(map)
            }
            Token::Index(0) => Tree::from(vec![built]),
            Token::Index(_) => {
                return Err(EditError::IndexUnderMissingParent {
                    at: jsonpath::display(whole),
                });
            }
        };
    }
    Ok(built)
}

fn remove_at<'t>(object: &mut Tree<'t>, at: &[Token]) -> Option<Tree<'t>> {
    let (last, parents) = at.split_last()?;
    let parent = jsonpath::get_mut(object, parents)?;
    match last {
        Token::Key(key) => parent.map_mut()?.remove(key),
        Token::Index(index) => {
            let items = parent.list_mut()?;
            let i = array_index(*index, items.len())?;
            Some(items.remove(i))
        }
    }
}

/// What a path's step needs to step into.
fn wanted_by(step: &Token) -> &'static str {
    match step {
        Token::Key(_) => "an object",
        Token::Index(_) => "a list",
    }
}

#[cfg(test)]
#[path = "edit_tests.rs"]
mod tests;
