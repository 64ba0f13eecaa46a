//! Edits of a YAML file that turn one value in it into another, rewriting only the text
//! of what differs: a changed scalar is one scalar rewritten (in its old quoting when
//! that holds the new text), an added list item or key is lines added, a removed one
//! lines removed, and everything else (comments, flow style, indentation, line ends)
//! is left byte for byte. New text is written in the file's own layout: its sequence
//! indentation and line ends, flow style inside a flow collection.
//!
//! The edits are computed from a [`yaml_layout`] node and the value serde_yaml read
//! there; a caller reads the edited text back to check it says what was meant.

use std::ops::Range;

use serde_json::{Map, Value};

use super::yaml_layout::{self, Entry, Item, Kind, Node, Style};
use super::yaml_out::{self, Layout};

/// A flow collection is kept in flow style when it still fits on a line this long.
const FLOW_LINE: usize = 100;

/// What an edit could not do in place: the caller rewrites more around it, or gives up.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unsupported(pub String);

/// Where a node sits, which decides how new text for it is written.
#[derive(Debug, Clone, Copy)]
pub enum Place {
    /// The value of a block mapping entry whose key is at `key_column`.
    Value { key_column: usize, colon_end: usize },
    /// An item of a block sequence whose dash is at `dash`.
    Item { dash: usize },
    /// Inside a flow collection.
    Flow,
    /// The document itself.
    Document,
}

/// `text`, a YAML document read as `old`, edited to read as `new`.
pub fn rewrite_document(text: &str, old: &Value, new: &Value) -> Result<String, Unsupported> {
    let root = yaml_layout::parse(text).map_err(|error| Unsupported(error.to_string()))?;
    let mut editor = Editor::new(text, &root);
    editor.change(&root, Place::Document, old, new)?;
    let edited = editor.finish()?;
    match serde_yaml::from_str::<Value>(&edited) {
        Ok(read) if &read == new => Ok(edited),
        _ => Err(Unsupported(
            "the edited document does not read back as meant".into(),
        )),
    }
}

/// The edits to one text, collected, then applied at once.
pub struct Editor<'t> {
    text: &'t str,
    newline: &'static str,
    layout: Layout,
    /// How far a mapping's mapping value is indented past its key.
    mapping_indent: usize,
    edits: Vec<(Range<usize>, String)>,
}

impl<'t> Editor<'t> {
    /// An editor of `text`, whose layout is read from `root`.
    pub fn new(text: &'t str, root: &Node) -> Editor<'t> {
        let mut indents = Indents::default();
        indents.visit(text, root);
        Editor {
            text,
            newline: if text.contains("\r\n") { "\r\n" } else { "\n" },
            layout: Layout {
                sequence_indent: indents.sequence.unwrap_or(2),
                single_quotes: true,
            },
            mapping_indent: indents.mapping.unwrap_or(2),
            edits: Vec::new(),
        }
    }

    /// The text with every edit made.
    pub fn finish(mut self) -> Result<String, Unsupported> {
        self.edits
            .sort_by_key(|(range, _)| (range.start, range.end));
        let mut out = String::with_capacity(self.text.len());
        let mut at = 0;
        for (range, text) in &self.edits {
            if range.start < at {
                return Err(Unsupported("two edits overlap".into()));
            }
            out.push_str(&self.text[at..range.start]);
            out.push_str(text);
            at = range.end;
        }
        out.push_str(&self.text[at..]);
        Ok(out)
    }

    /// Edits turning `node` (read as `old`, at `place`) into `new`, as fine as the
    /// layout allows; where a part cannot be edited in place, that part is rewritten
    /// whole.
    pub fn change(
        &mut self,
        node: &Node,
        place: Place,
        old: &Value,
        new: &Value,
    ) -> Result<(), Unsupported> {
        if old == new {
            return Ok(());
        }
        let mark = self.edits.len();
        if self.change_in_place(node, place, old, new).is_err() {
            self.edits.truncate(mark);
            self.replace(node, place, new)?;
        }
        Ok(())
    }

    /// Adds `key: value` to a mapping node that lacks the key.
    pub fn add_entry(&mut self, map: &Node, key: &str, value: &Value) -> Result<(), Unsupported> {
        let mut added = Map::new();
        added.insert(key.to_string(), value.clone());
        match &map.kind {
            Kind::BlockMap { column, entries } => {
                let at = entries.last().map_or(map.span.end, entry_end);
                self.insert_entries(next_line_or_end(self.text, at), *column, &added)
            }
            Kind::FlowMap(entries) => {
                let text = self.flow(&Value::Object(added))?;
                let inner = text
                    .strip_prefix('{')
                    .and_then(|text| text.strip_suffix('}'))
                    .unwrap_or(&text);
                match entries.last() {
                    Some(last) => self.push(
                        last.value.span.end..last.value.span.end,
                        format!(", {inner}"),
                    ),
                    None => self.push(map.span.start + 1..map.span.end - 1, inner.to_string()),
                }
                Ok(())
            }
            _ => Err(Unsupported("not a mapping".into())),
        }
    }

    fn push(&mut self, range: Range<usize>, text: String) {
        self.edits.push((range, text));
    }

    fn change_in_place(
        &mut self,
        node: &Node,
        place: Place,
        old: &Value,
        new: &Value,
    ) -> Result<(), Unsupported> {
        match (&node.kind, old, new) {
            (Kind::BlockMap { column, entries }, Value::Object(old), Value::Object(new))
                if !new.is_empty() =>
            {
                self.block_map(*column, entries, old, new)
            }
            (Kind::FlowMap(entries), Value::Object(old), Value::Object(new)) if !new.is_empty() => {
                self.flow_map(entries, old, new)
            }
            (Kind::BlockSeq { items, .. }, Value::Array(old), Value::Array(new))
                if !new.is_empty() =>
            {
                self.block_seq(items, old, new)
            }
            (Kind::FlowSeq(items), Value::Array(old), Value::Array(new))
                if old.len() == new.len() && items.len() == old.len() =>
            {
                for ((item, old), new) in items.iter().zip(old).zip(new) {
                    self.change(item, Place::Flow, old, new)?;
                }
                Ok(())
            }
            (Kind::Scalar(style), old, new) if is_scalar(old) && is_scalar(new) => {
                let text = self.scalar(new, *style, place)?;
                self.push(node.span.clone(), text);
                Ok(())
            }
            _ => Err(Unsupported("rewritten whole".into())),
        }
    }

    fn block_map(
        &mut self,
        column: usize,
        entries: &[Entry],
        old: &Map<String, Value>,
        new: &Map<String, Value>,
    ) -> Result<(), Unsupported> {
        check_keys(entries, old)?;
        let mut first_removed = None;
        for entry in entries {
            let place = Place::Value {
                key_column: column,
                colon_end: entry.colon_end,
            };
            match (old.get(&entry.key), new.get(&entry.key)) {
                (Some(old), Some(new)) => self.change(&entry.value, place, old, new)?,
                _ => {
                    let lines = self.entry_lines(entry)?;
                    first_removed.get_or_insert(lines.start);
                    self.push(lines, String::new());
                }
            }
        }
        let added: Map<String, Value> = new
            .iter()
            .filter(|(key, _)| !old.contains_key(*key))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        if added.is_empty() {
            return Ok(());
        }
        // In the place of what they replace, or after the last entry.
        let at = match (first_removed, entries.last()) {
            (Some(at), _) => at,
            (None, Some(last)) => next_line_or_end(self.text, entry_end(last)),
            (None, None) => return Err(Unsupported("an empty mapping".into())),
        };
        self.insert_entries(at, column, &added)
    }

    /// `entries` as lines at `column`, at `at` (a line's start, or the text's end).
    fn insert_entries(
        &mut self,
        at: usize,
        column: usize,
        entries: &Map<String, Value>,
    ) -> Result<(), Unsupported> {
        let lines = self.block(&Value::Object(entries.clone()), column)?;
        self.insert_lines(at, lines);
        Ok(())
    }

    /// Lines (each ending in a line break) at `at`, a line's start or the text's end.
    fn insert_lines(&mut self, at: usize, lines: String) {
        if at == self.text.len() && !self.text.is_empty() && !self.text.ends_with('\n') {
            let lines = lines.strip_suffix(self.newline).unwrap_or(&lines);
            self.push(at..at, format!("{}{lines}", self.newline));
        } else {
            self.push(at..at, lines);
        }
    }

    /// The whole lines an entry is written on, when nothing else is on them.
    fn entry_lines(&self, entry: &Entry) -> Result<Range<usize>, Unsupported> {
        self.own_lines(entry.key_span.start, entry_end(entry))
    }

    /// The lines from the one `start` is on to the one `end` is on, when only spaces
    /// come before `start` on its line.
    fn own_lines(&self, start: usize, end: usize) -> Result<Range<usize>, Unsupported> {
        let line = yaml_layout::line_start(self.text, start);
        if !self.text[line..start].bytes().all(|b| b == b' ') {
            return Err(Unsupported("shares its line".into()));
        }
        Ok(line..next_line_or_end(self.text, end))
    }

    fn flow_map(
        &mut self,
        entries: &[Entry],
        old: &Map<String, Value>,
        new: &Map<String, Value>,
    ) -> Result<(), Unsupported> {
        check_keys(entries, old)?;
        if old.len() != new.len() || !new.keys().all(|key| old.contains_key(key)) {
            return Err(Unsupported("keys changed".into()));
        }
        for entry in entries {
            if let (Some(old), Some(new)) = (old.get(&entry.key), new.get(&entry.key)) {
                self.change(&entry.value, Place::Flow, old, new)?;
            }
        }
        Ok(())
    }

    /// Items compared from both ends: the ones in the middle are edited pairwise, and
    /// what one side has more of is removed or added there.
    fn block_seq(
        &mut self,
        items: &[Item],
        old: &[Value],
        new: &[Value],
    ) -> Result<(), Unsupported> {
        if items.len() != old.len() {
            return Err(Unsupported("the layout does not match the value".into()));
        }
        let shorter = old.len().min(new.len());
        let prefix = old.iter().zip(new).take_while(|(a, b)| a == b).count();
        let suffix = old
            .iter()
            .rev()
            .zip(new.iter().rev())
            .take(shorter - prefix)
            .take_while(|(a, b)| a == b)
            .count();
        let old_middle = prefix..old.len() - suffix;
        let new_middle = prefix..new.len() - suffix;
        let paired = old_middle.len().min(new_middle.len());
        for offset in 0..paired {
            let index = prefix + offset;
            let item = &items[index];
            self.change(
                &item.value,
                Place::Item { dash: item.dash },
                &old[index],
                &new[prefix + offset],
            )?;
        }
        if old_middle.len() > paired {
            let first = &items[prefix + paired];
            let last = &items[old_middle.end - 1];
            let lines = self.own_lines(first.dash, item_end(last))?;
            self.push(lines, String::new());
        } else if new_middle.len() > paired {
            let at = if paired > 0 {
                next_line_or_end(self.text, item_end(&items[prefix + paired - 1]))
            } else if let Some(next) = items.get(prefix) {
                self.own_lines(next.dash, next.dash)?.start
            } else {
                // Only added at the end: after the last item.
                let last = items
                    .last()
                    .ok_or_else(|| Unsupported("an empty sequence".into()))?;
                next_line_or_end(self.text, item_end(last))
            };
            let column = items
                .first()
                .map(|item| self.column(item.dash))
                .ok_or_else(|| Unsupported("an empty sequence".into()))?;
            let added = Value::Array(new[prefix + paired..new_middle.end].to_vec());
            let lines = self.block(&added, column)?;
            self.insert_lines(at, lines);
        }
        Ok(())
    }

    /// `node` rewritten whole as `new`, in its style where that fits.
    fn replace(&mut self, node: &Node, place: Place, new: &Value) -> Result<(), Unsupported> {
        let style = match node.kind {
            Kind::Scalar(style) => style,
            _ => Style::Plain,
        };
        let (attach, indent) = match place {
            Place::Flow => {
                let text = self.flow(new)?;
                self.push(node.span.clone(), text);
                return Ok(());
            }
            Place::Document => {
                let text = if is_scalar(new) {
                    self.scalar(new, style, place)?
                } else {
                    let lines = self.block(new, 0)?;
                    lines
                        .strip_suffix(self.newline)
                        .unwrap_or(&lines)
                        .to_string()
                };
                self.push(node.span.clone(), text);
                return Ok(());
            }
            Place::Value {
                key_column,
                colon_end,
            } => (colon_end, key_column + self.child_indent(new)),
            Place::Item { dash } => (dash + 1, self.column(dash) + 2),
        };
        let on_attach_line = !self.text[attach..node.span.start].contains('\n');
        if is_scalar(new) {
            let text = self.scalar(new, style, place)?;
            match (matches!(node.kind, Kind::Empty), on_attach_line) {
                (false, true) => self.push(node.span.clone(), text),
                _ => self.push(attach..node.span.end, format!(" {text}")),
            }
            return Ok(());
        }
        // A collection that was in flow style stays so while it fits on its line.
        if matches!(node.kind, Kind::FlowMap(_) | Kind::FlowSeq(_)) && on_attach_line {
            let text = self.flow(new)?;
            let line = yaml_layout::line_start(self.text, node.span.start);
            if node.span.start - line + text.chars().count() <= FLOW_LINE {
                self.push(node.span.clone(), text);
                return Ok(());
            }
        }
        // A block collection below its key keeps its column; an item's shares the
        // dash's line, so it sits two columns past the dash.
        let column = match (place, &node.kind, new) {
            (Place::Item { .. }, _, _) => indent,
            (_, Kind::BlockMap { column, .. }, Value::Object(_))
            | (_, Kind::BlockSeq { column, .. }, Value::Array(_))
                if !on_attach_line =>
            {
                *column
            }
            _ => indent,
        };
        let lines = self.block(new, column)?;
        let lines = lines.strip_suffix(self.newline).unwrap_or(&lines);
        match place {
            // `- key: value`: the first line shares the dash's.
            Place::Item { .. } => {
                self.push(
                    attach..node.span.end,
                    format!(" {}", lines.trim_start_matches(' ')),
                );
            }
            _ => {
                // A comment after `key:` stays on its line.
                let start = if on_attach_line {
                    attach
                } else {
                    yaml_layout::line_end(self.text, attach)
                };
                self.push(start..node.span.end, format!("{}{lines}", self.newline));
            }
        }
        Ok(())
    }

    /// How far a mapping's value `new` is indented past its key.
    fn child_indent(&self, new: &Value) -> usize {
        match new {
            Value::Array(_) => self.layout.sequence_indent,
            _ => self.mapping_indent,
        }
    }

    /// A scalar, in the old style when that holds it.
    fn scalar(&self, new: &Value, old: Style, place: Place) -> Result<String, Unsupported> {
        let flow = matches!(place, Place::Flow);
        if let Value::String(text) = new {
            let kept = match old {
                Style::SingleQuoted => yaml_out::single_quoted(text),
                Style::DoubleQuoted => Some(yaml_out::double_quoted(text)),
                Style::Plain if yaml_out::is_plain(text, flow) => Some(text.clone()),
                _ => None,
            };
            if let Some(kept) = kept {
                return Ok(kept);
            }
        }
        let block_indent = match place {
            Place::Value { key_column, .. } => key_column + self.mapping_indent,
            Place::Item { dash } => self.column(dash) + 2,
            Place::Flow => 0,
            // A block at column 0 would read as empty.
            Place::Document => 2,
        };
        let text = yaml_out::scalar_text(new, self.layout, block_indent, flow)
            .map_err(|error| Unsupported(error.to_string()))?;
        Ok(text.replace('\n', self.newline))
    }

    fn flow(&self, value: &Value) -> Result<String, Unsupported> {
        yaml_out::to_flow_string(value, self.layout).map_err(|error| Unsupported(error.to_string()))
    }

    /// `value` in block style at `column`, as whole lines.
    fn block(&self, value: &Value, column: usize) -> Result<String, Unsupported> {
        let text = yaml_out::to_string_with(value, self.layout)
            .map_err(|error| Unsupported(error.to_string()))?;
        let pad = " ".repeat(column);
        let mut out = String::with_capacity(text.len() + column * 8);
        for line in text.lines() {
            if !line.is_empty() {
                out.push_str(&pad);
                out.push_str(line);
            }
            out.push_str(self.newline);
        }
        Ok(out)
    }

    fn column(&self, at: usize) -> usize {
        at - yaml_layout::line_start(self.text, at)
    }
}

fn is_scalar(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => true,
    }
}

/// The layout's entries are the value's keys, or the two do not describe one mapping
/// (a merge key, say) and nothing is edited in place.
fn check_keys(entries: &[Entry], old: &Map<String, Value>) -> Result<(), Unsupported> {
    if entries.len() == old.len() && entries.iter().all(|entry| old.contains_key(&entry.key)) {
        Ok(())
    } else {
        Err(Unsupported("the layout does not match the value".into()))
    }
}

fn entry_end(entry: &Entry) -> usize {
    entry.value.span.end.max(entry.colon_end)
}

fn item_end(item: &Item) -> usize {
    item.value.span.end.max(item.dash + 1)
}

fn next_line_or_end(text: &str, at: usize) -> usize {
    yaml_layout::next_line(text, at)
}

/// The indentation a file uses, from its first block collections: how far a mapping's
/// sequence and mapping values sit past their keys.
#[derive(Default)]
struct Indents {
    sequence: Option<usize>,
    mapping: Option<usize>,
}

impl Indents {
    fn visit(&mut self, text: &str, node: &Node) {
        match &node.kind {
            Kind::BlockMap { column, entries } => {
                for entry in entries {
                    match &entry.value.kind {
                        Kind::BlockSeq { column: inner, .. } if self.sequence.is_none() => {
                            self.sequence = Some(inner.saturating_sub(*column));
                        }
                        Kind::BlockMap { column: inner, .. }
                            if self.mapping.is_none()
                                && text[entry.colon_end..entry.value.span.start].contains('\n') =>
                        {
                            self.mapping = Some(inner.saturating_sub(*column).max(1));
                        }
                        _ => {}
                    }
                    self.visit(text, &entry.value);
                }
            }
            Kind::BlockSeq { items, .. } => {
                for item in items {
                    self.visit(text, &item.value);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
#[path = "yaml_edit_tests.rs"]
mod tests;
