//! Where each node of a YAML document is written: byte spans, for editing a file in
//! place (`graft test --update`). serde_yaml reads values without positions; an edit
//! that must leave every other byte as it was needs to know where a value's text is.
//!
//! It reads the YAML people write by hand: block and flow collections, plain, quoted and
//! block scalars over several lines, comments, CRLF line ends, and anchors, tags and
//! aliases as text. It does not resolve scalars: the caller pairs nodes with the values
//! serde_yaml read, by key and index, and reads the edited text back to check it. What
//! it does not read (explicit `? ` keys, several documents, a collection as a key) is an
//! error naming the line, so nothing is edited on a guess.

use std::cell::Cell;
use std::ops::Range;

/// One node, and where its text is.
#[derive(Debug)]
pub struct Node {
    /// The node's text: its anchor or tag included, trailing white space and comments
    /// not. Empty for a value not written at all (`key:` at a line's end).
    pub span: Range<usize>,
    pub kind: Kind,
}

#[derive(Debug)]
pub enum Kind {
    /// A scalar or an alias, in this style.
    Scalar(Style),
    /// No value written: `key:` or `-` at a line's end.
    Empty,
    /// A block mapping whose keys are at `column`.
    BlockMap { column: usize, entries: Vec<Entry> },
    /// A block sequence whose dashes are at `column`.
    BlockSeq { column: usize, items: Vec<Item> },
    /// `{key: value, ...}`.
    FlowMap(Vec<Entry>),
    /// `[value, ...]`.
    FlowSeq(Vec<Node>),
}

/// How a scalar is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Plain,
    SingleQuoted,
    DoubleQuoted,
    /// `|` or `>`.
    Block,
    /// `*name`, or a node written as nothing but its tag or anchor.
    Other,
}

/// One `key: value` of a mapping.
#[derive(Debug)]
pub struct Entry {
    /// The key as a reader reads it (quotes and escapes resolved).
    pub key: String,
    pub key_span: Range<usize>,
    /// Just after the `:`.
    pub colon_end: usize,
    pub value: Node,
}

/// One `- value` of a block sequence.
#[derive(Debug)]
pub struct Item {
    /// Where its `-` is.
    pub dash: usize,
    pub value: Node,
}

impl Node {
    /// The entry of a mapping node under `key`.
    pub fn entry(&self, key: &str) -> Option<&Entry> {
        match &self.kind {
            Kind::BlockMap { entries, .. } | Kind::FlowMap(entries) => {
                entries.iter().find(|entry| entry.key == key)
            }
            _ => None,
        }
    }
}

/// Why a text's layout was not read.
#[derive(Debug, thiserror::Error)]
#[error("line {line}, column {column}: {what}")]
pub struct LayoutError {
    pub line: usize,
    pub column: usize,
    pub what: String,
}

/// The layout of `text`, one YAML document.
pub fn parse(text: &str) -> Result<Node, LayoutError> {
    let reader = Reader {
        text,
        bytes: text.as_bytes(),
        depth: Cell::new(0),
    };
    let mut at = reader.next_content(0);
    if reader.bytes.get(at) == Some(&b'%') {
        return Err(reader.error(at, "directives (`%YAML`) are not read here"));
    }
    if reader.document_marker(at) {
        at += 3;
        if !reader.rest_blank(at) {
            return Err(reader.error(at, "a node on the `---` line is not read here"));
        }
        at = reader.next_content(at);
    }
    if at >= text.len() {
        return Ok(Node {
            span: at..at,
            kind: Kind::Empty,
        });
    }
    let node = reader.block_node(at, -1, true)?;
    let rest = reader.next_content(node.span.end);
    if rest < text.len() && !text[rest..].starts_with("...") {
        return Err(reader.error(rest, "expected the end of the document"));
    }
    Ok(node)
}

/// The start of the line `at` is on; on the first line, after a byte order mark.
pub fn line_start(text: &str, at: usize) -> usize {
    let first = if text.starts_with('\u{FEFF}') { 3 } else { 0 };
    text[..at]
        .rfind('\n')
        .map_or(first.min(at), |newline| newline + 1)
}

/// Just past the line break of the line `at` is on (the text's end on its last line).
pub fn next_line(text: &str, at: usize) -> usize {
    text[at..]
        .find('\n')
        .map_or(text.len(), |newline| at + newline + 1)
}

/// Where the line `at` is on ends, before its line break (`\n` or `\r\n`).
pub fn line_end(text: &str, at: usize) -> usize {
    let end = text[at..]
        .find('\n')
        .map_or(text.len(), |newline| at + newline);
    if end > at && text.as_bytes()[end - 1] == b'\r' {
        end - 1
    } else {
        end
    }
}

struct Reader<'t> {
    text: &'t str,
    bytes: &'t [u8],
    /// How many nodes the one being read is inside: the reader recurses, and a deep
    /// enough text must be an error, not a stack overflow.
    depth: Cell<usize>,
}

/// Deeper nodes are an error. serde_yaml refuses documents nested deeper than 128.
const MAX_DEPTH: usize = 256;

/// Whether `byte` ends a token: white space, a line break, or the text's end.
fn blank(byte: Option<&u8>) -> bool {
    matches!(byte, None | Some(b' ' | b'\t' | b'\r' | b'\n'))
}

impl Reader<'_> {
    fn error(&self, at: usize, what: &str) -> LayoutError {
        let start = line_start(self.text, at);
        LayoutError {
            line: self.text[..at].matches('\n').count() + 1,
            column: self.text[start..at].chars().count() + 1,
            what: what.to_string(),
        }
    }

    fn column(&self, at: usize) -> usize {
        at - line_start(self.text, at)
    }

    /// Whether only spaces come before `at` on its line.
    fn first_on_line(&self, at: usize) -> bool {
        self.bytes[line_start(self.text, at)..at]
            .iter()
            .all(|&b| b == b' ')
    }

    fn skip_spaces(&self, mut at: usize) -> usize {
        while matches!(self.bytes.get(at), Some(b' ' | b'\t')) {
            at += 1;
        }
        at
    }

    /// Whether nothing but white space and a comment follows `at` on its line.
    fn rest_blank(&self, at: usize) -> bool {
        let at = self.skip_spaces(at);
        matches!(self.bytes.get(at), None | Some(b'#' | b'\r' | b'\n'))
    }

    /// The next byte that is not white space, a line break or in a comment.
    fn next_content(&self, mut at: usize) -> usize {
        loop {
            match self.bytes.get(at) {
                Some(b' ' | b'\t' | b'\r' | b'\n') => at += 1,
                Some(b'#') => at = next_line(self.text, at),
                _ => return at,
            }
        }
    }

    /// `---` or `...` at a line's start, followed by white space.
    fn document_marker(&self, at: usize) -> bool {
        self.column(at) == 0
            && (self.text[at..].starts_with("---") || self.text[at..].starts_with("..."))
            && blank(self.bytes.get(at + 3))
    }

    /// A `-` that starts a block sequence item.
    /// Where the next item of a block map (`items` false) or sequence (`items` true) at
    /// `column` starts, after a value that ends at `end`; `None` when the block ends
    /// there (the text ends, a document marker, a line indented less, or a line of the
    /// other kind of block).
    fn next_sibling(
        &self,
        end: usize,
        column: usize,
        items: bool,
    ) -> Result<Option<usize>, LayoutError> {
        let next = self.next_content(end);
        if next >= self.text.len() || self.document_marker(next) {
            return Ok(None);
        }
        if !self.first_on_line(next) {
            return Err(self.error(next, "unexpected text after a value"));
        }
        let next_column = self.column(next);
        if next_column > column {
            return Err(self.error(next, "unexpected indentation"));
        }
        if next_column < column || self.dash_item(next) != items {
            return Ok(None);
        }
        Ok(Some(next))
    }

    fn dash_item(&self, at: usize) -> bool {
        self.bytes.get(at) == Some(&b'-') && blank(self.bytes.get(at + 1))
    }

    /// A block node starting at `at` (not white space), in a parent whose indentation
    /// is `parent`. `block` is false on a key's line, where no block collection may
    /// start.
    fn block_node(&self, at: usize, parent: isize, block: bool) -> Result<Node, LayoutError> {
        self.nested(at, || self.block_node_at(at, parent, block))
    }

    /// `read`, one level deeper.
    fn nested(
        &self,
        at: usize,
        read: impl FnOnce() -> Result<Node, LayoutError>,
    ) -> Result<Node, LayoutError> {
        let depth = self.depth.get() + 1;
        if depth > MAX_DEPTH {
            return Err(self.error(at, "nodes nested this deep are not read here"));
        }
        self.depth.set(depth);
        let node = read();
        self.depth.set(depth - 1);
        node
    }

    fn block_node_at(&self, at: usize, parent: isize, block: bool) -> Result<Node, LayoutError> {
        let start = at;
        let at = self.properties(at);
        if at > start && self.rest_blank(at) {
            // `key: !tag` and the node on the lines below, or a node of nothing but a tag.
            let next = self.next_content(at);
            if next < self.text.len()
                && self.column(next) as isize > parent
                && !self.document_marker(next)
            {
                let mut node = self.block_node(next, parent, true)?;
                node.span.start = start;
                return Ok(node);
            }
            let end = self.trim_end(start, at);
            return Ok(Node {
                span: start..end,
                kind: Kind::Scalar(Style::Other),
            });
        }
        let mut node = match self.bytes.get(at) {
            Some(b'-') if self.dash_item(at) => {
                if !block {
                    return Err(self.error(at, "a block sequence cannot start on its key's line"));
                }
                self.block_sequence(at)?
            }
            Some(b'[' | b'{') => {
                let node = self.flow_node(at)?;
                if self.bytes.get(self.skip_spaces(node.span.end)) == Some(&b':') {
                    return Err(self.error(at, "a collection as a mapping key is not read here"));
                }
                node
            }
            Some(b'|' | b'>') => self.block_scalar(at, parent)?,
            Some(b'?') if blank(self.bytes.get(at + 1)) => {
                return Err(self.error(at, "explicit keys (`? key`) are not read here"));
            }
            Some(b'%' | b'@' | b'`') => {
                return Err(self.error(at, "a reserved indicator cannot start a node"));
            }
            _ if self.key_end(at).is_some() => {
                if !block {
                    return Err(self.error(at, "a mapping cannot start on its key's line"));
                }
                if at > start {
                    return Err(
                        self.error(start, "an anchor or tag on a mapping key is not read here")
                    );
                }
                self.block_mapping(at)?
            }
            Some(b'*') => {
                let end = self.token_end(at);
                Node {
                    span: at..end,
                    kind: Kind::Scalar(Style::Other),
                }
            }
            Some(b'\'' | b'"') => self.quoted(at)?,
            _ => self.plain_block(at, parent),
        };
        node.span.start = start;
        Ok(node)
    }

    /// Past the anchors and tags at `at`, and the spaces after them.
    fn properties(&self, mut at: usize) -> usize {
        while matches!(self.bytes.get(at), Some(b'&' | b'!')) {
            at = self.skip_spaces(self.token_end(at));
        }
        at
    }

    /// The end of a token with no spaces (an anchor, tag or alias).
    fn token_end(&self, mut at: usize) -> usize {
        while !blank(self.bytes.get(at)) && !matches!(self.bytes.get(at), Some(b',' | b']' | b'}'))
        {
            at += 1;
        }
        at
    }

    /// `end` with the white space before it dropped, not going back past `start`.
    fn trim_end(&self, start: usize, mut end: usize) -> usize {
        while end > start && matches!(self.bytes[end - 1], b' ' | b'\t' | b'\r' | b'\n') {
            end -= 1;
        }
        end
    }

    /// When a block mapping key starts at `at`: where the key ends, and where its `:` is.
    fn key_end(&self, at: usize) -> Option<(usize, usize)> {
        let key_end = match self.bytes.get(at)? {
            b'\'' | b'"' => {
                let end = self.quoted_end(at).ok()?;
                if self.text[at..end].contains('\n') {
                    return None;
                }
                end
            }
            b'[' | b'{' | b'#' | b'|' | b'>' | b'*' | b'&' | b'!' => return None,
            b'-' | b'?' if blank(self.bytes.get(at + 1)) => return None,
            _ => {
                let mut end = at;
                loop {
                    match self.bytes.get(end) {
                        None | Some(b'\r' | b'\n') => return None,
                        Some(b':') if blank(self.bytes.get(end + 1)) => break,
                        Some(b'#') if matches!(self.bytes[end - 1], b' ' | b'\t') => return None,
                        _ => end += 1,
                    }
                }
                self.trim_end(at, end)
            }
        };
        let colon = self.skip_spaces(key_end);
        (self.bytes.get(colon) == Some(&b':') && blank(self.bytes.get(colon + 1)))
            .then_some((key_end, colon))
    }

    fn block_mapping(&self, start: usize) -> Result<Node, LayoutError> {
        let column = self.column(start);
        let mut entries = Vec::new();
        let mut at = start;
        loop {
            let Some((key_end, colon)) = self.key_end(at) else {
                return Err(self.error(at, "expected `key: value`"));
            };
            let value = self.mapping_value(colon + 1, column)?;
            let end = value.span.end.max(colon + 1);
            entries.push(Entry {
                key: key_text(&self.text[at..key_end]),
                key_span: at..key_end,
                colon_end: colon + 1,
                value,
            });
            match self.next_sibling(end, column, false)? {
                Some(next) => at = next,
                None => break,
            }
        }
        let end = entries
            .last()
            .map_or(start, |entry| entry.value.span.end.max(entry.colon_end));
        Ok(Node {
            span: start..end,
            kind: Kind::BlockMap { column, entries },
        })
    }

    /// The value after a block mapping key's `:` (at `colon_end`), the key at `column`.
    fn mapping_value(&self, colon_end: usize, column: usize) -> Result<Node, LayoutError> {
        let at = self.skip_spaces(colon_end);
        if !self.rest_blank(at) {
            return self.block_node(at, column as isize, false);
        }
        let next = self.next_content(at);
        if next < self.text.len() && !self.document_marker(next) {
            let next_column = self.column(next);
            if next_column > column {
                return self.block_node(next, column as isize, true);
            }
            // A sequence may sit at its key's column.
            if next_column == column && self.dash_item(next) {
                return self.block_sequence(next);
            }
        }
        Ok(Node {
            span: colon_end..colon_end,
            kind: Kind::Empty,
        })
    }

    fn block_sequence(&self, start: usize) -> Result<Node, LayoutError> {
        let column = self.column(start);
        let mut items = Vec::new();
        let mut at = start;
        loop {
            let after = self.skip_spaces(at + 1);
            let value = if !self.rest_blank(after) {
                self.block_node(after, column as isize, true)?
            } else {
                let next = self.next_content(after);
                if next < self.text.len()
                    && self.column(next) > column
                    && !self.document_marker(next)
                {
                    self.block_node(next, column as isize, true)?
                } else {
                    Node {
                        span: at + 1..at + 1,
                        kind: Kind::Empty,
                    }
                }
            };
            let end = value.span.end.max(at + 1);
            items.push(Item { dash: at, value });
            match self.next_sibling(end, column, true)? {
                Some(next) => at = next,
                None => break,
            }
        }
        let end = items
            .last()
            .map_or(start + 1, |item| item.value.span.end.max(item.dash + 1));
        Ok(Node {
            span: start..end,
            kind: Kind::BlockSeq { column, items },
        })
    }

    /// `|` or `>`: the header, then every line below that is blank or indented at
    /// least as far as the first line that is not.
    fn block_scalar(&self, start: usize, parent: isize) -> Result<Node, LayoutError> {
        let mut at = start + 1;
        let mut explicit = None;
        while let Some(&byte) = self.bytes.get(at) {
            match byte {
                b'+' | b'-' => at += 1,
                b'1'..=b'9' => {
                    explicit = Some(usize::from(byte - b'0'));
                    at += 1;
                }
                _ => break,
            }
        }
        if !self.rest_blank(at) {
            return Err(self.error(at, "expected the end of a block scalar's header"));
        }
        let header_end = self.trim_end(start, line_end(self.text, at));
        let header_end = match self.text[start..header_end].find(" #") {
            Some(comment) => self.trim_end(start, start + comment),
            None => header_end,
        };
        let mut indent = explicit.map(|extra| parent.max(0) as usize + extra);
        let mut end = header_end;
        let mut line = next_line(self.text, at);
        while line < self.text.len() {
            let content = line_end(self.text, line);
            let spaces = self.bytes[line..content]
                .iter()
                .take_while(|&&b| b == b' ')
                .count();
            if line + spaces == content {
                line = next_line(self.text, line);
                continue;
            }
            let wanted = *indent.get_or_insert(spaces);
            if spaces < wanted || spaces as isize <= parent {
                break;
            }
            end = content;
            line = next_line(self.text, line);
        }
        Ok(Node {
            span: start..end,
            kind: Kind::Scalar(Style::Block),
        })
    }

    /// A plain scalar in block context, over as many lines as are indented past the
    /// parent.
    fn plain_block(&self, start: usize, parent: isize) -> Node {
        let mut end = self.plain_line_end(start);
        loop {
            let line = next_line(self.text, end);
            let next = self.skip_blank_lines(line);
            if next >= self.text.len()
                || self.column(next) as isize <= parent
                || self.bytes[next] == b'#'
                || self.document_marker(next)
            {
                break;
            }
            end = self.plain_line_end(next);
        }
        Node {
            span: start..end,
            kind: Kind::Scalar(Style::Plain),
        }
    }

    /// The first byte after `at` that is not white space or a line break.
    fn skip_blank_lines(&self, mut at: usize) -> usize {
        while matches!(self.bytes.get(at), Some(b' ' | b'\t' | b'\r' | b'\n')) {
            at += 1;
        }
        at
    }

    /// Where a plain scalar's text on this line ends: before a comment or the line break,
    /// white space dropped.
    fn plain_line_end(&self, start: usize) -> usize {
        let mut at = start;
        while let Some(&byte) = self.bytes.get(at) {
            if byte == b'\r'
                || byte == b'\n'
                || (byte == b'#' && at > start && matches!(self.bytes[at - 1], b' ' | b'\t'))
            {
                break;
            }
            at += 1;
        }
        self.trim_end(start, at)
    }

    fn quoted(&self, start: usize) -> Result<Node, LayoutError> {
        let end = self.quoted_end(start)?;
        let style = if self.bytes[start] == b'\'' {
            Style::SingleQuoted
        } else {
            Style::DoubleQuoted
        };
        Ok(Node {
            span: start..end,
            kind: Kind::Scalar(style),
        })
    }

    /// Just past the closing quote of the quoted scalar at `start`.
    fn quoted_end(&self, start: usize) -> Result<usize, LayoutError> {
        let quote = self.bytes[start];
        let mut at = start + 1;
        while let Some(&byte) = self.bytes.get(at) {
            match byte {
                b'\\' if quote == b'"' => at += 2,
                b'\'' if quote == b'\'' && self.bytes.get(at + 1) == Some(&b'\'') => at += 2,
                _ if byte == quote => return Ok(at + 1),
                _ => at += 1,
            }
        }
        Err(self.error(start, "a quoted scalar is not closed"))
    }

    fn flow_node(&self, start: usize) -> Result<Node, LayoutError> {
        self.nested(start, || self.flow_node_at(start))
    }

    fn flow_node_at(&self, start: usize) -> Result<Node, LayoutError> {
        let at = self.properties(start);
        let mut node = match self.bytes.get(at) {
            Some(b'[') => self.flow_sequence(at)?,
            Some(b'{') => self.flow_mapping(at)?,
            Some(b'\'' | b'"') => self.quoted(at)?,
            Some(b'*') => Node {
                span: at..self.token_end(at),
                kind: Kind::Scalar(Style::Other),
            },
            Some(b',' | b']' | b'}') | None if at > start => Node {
                span: at..at,
                kind: Kind::Scalar(Style::Other),
            },
            _ => {
                let end = self.plain_flow_end(at);
                if end == at {
                    return Err(self.error(at, "expected a value"));
                }
                Node {
                    span: at..end,
                    kind: Kind::Scalar(Style::Plain),
                }
            }
        };
        node.span.start = start;
        Ok(node)
    }

    /// Where a plain scalar in a flow collection ends (on its line).
    fn plain_flow_end(&self, start: usize) -> usize {
        let mut at = start;
        while let Some(&byte) = self.bytes.get(at) {
            let ends = match byte {
                b'\r' | b'\n' | b',' | b'[' | b']' | b'{' | b'}' => true,
                b':' => matches!(
                    self.bytes.get(at + 1),
                    None | Some(b' ' | b'\t' | b'\r' | b'\n' | b',' | b'[' | b']' | b'{' | b'}')
                ),
                b'#' => at > start && matches!(self.bytes[at - 1], b' ' | b'\t'),
                _ => false,
            };
            if ends {
                break;
            }
            at += 1;
        }
        self.trim_end(start, at)
    }

    fn flow_sequence(&self, start: usize) -> Result<Node, LayoutError> {
        let mut items = Vec::new();
        let mut at = self.next_content(start + 1);
        loop {
            match self.bytes.get(at) {
                Some(b']') => break,
                None => return Err(self.error(start, "a flow sequence is not closed")),
                _ => {}
            }
            let item = self.flow_node(at)?;
            let after = self.next_content(item.span.end);
            if self.bytes.get(after) == Some(&b':') {
                return Err(self.error(
                    at,
                    "a `key: value` pair inside a flow sequence is not read here",
                ));
            }
            items.push(item);
            at = self.flow_separator(after, b']')?;
        }
        Ok(Node {
            span: start..at + 1,
            kind: Kind::FlowSeq(items),
        })
    }

    /// Past the `,` at `at` and what follows it, or `at` when it is the `close`.
    fn flow_separator(&self, at: usize, close: u8) -> Result<usize, LayoutError> {
        match self.bytes.get(at) {
            Some(b',') => Ok(self.next_content(at + 1)),
            Some(&byte) if byte == close => Ok(at),
            _ => Err(self.error(at, "expected `,` or the end of the flow collection")),
        }
    }

    fn flow_mapping(&self, start: usize) -> Result<Node, LayoutError> {
        let mut entries = Vec::new();
        let mut at = self.next_content(start + 1);
        loop {
            match self.bytes.get(at) {
                Some(b'}') => break,
                None => return Err(self.error(start, "a flow mapping is not closed")),
                Some(b'[' | b'{' | b'?') => {
                    return Err(self.error(at, "this kind of flow mapping key is not read here"));
                }
                _ => {}
            }
            let key_end = match self.bytes[at] {
                b'\'' | b'"' => self.quoted_end(at)?,
                _ => self.plain_flow_end(at),
            };
            let colon = self.next_content(key_end);
            if self.bytes.get(colon) != Some(&b':') {
                return Err(self.error(at, "a flow mapping key without a value is not read here"));
            }
            let value_start = self.next_content(colon + 1);
            let value = match self.bytes.get(value_start) {
                Some(b',' | b'}') => Node {
                    span: colon + 1..colon + 1,
                    kind: Kind::Empty,
                },
                _ => self.flow_node(value_start)?,
            };
            let after = self.next_content(value.span.end);
            entries.push(Entry {
                key: key_text(&self.text[at..key_end]),
                key_span: at..key_end,
                colon_end: colon + 1,
                value,
            });
            at = self.flow_separator(after, b'}')?;
        }
        Ok(Node {
            span: start..at + 1,
            kind: Kind::FlowMap(entries),
        })
    }
}

/// A key as a reader reads it: quotes and escapes resolved.
fn key_text(raw: &str) -> String {
    serde_yaml::from_str::<String>(raw).unwrap_or_else(|_| raw.to_string())
}

#[cfg(test)]
#[path = "yaml_layout_tests.rs"]
mod tests;
