//! Static bounds on CEL programs, checked when an expression is compiled.
//!
//! The `cel` crate has no cost model and evaluation cannot be interrupted: graft meters
//! comprehensions at run time (`cost.rs`) and, before that, refuses shapes no policy
//! needs. A comprehension (`map`, `filter`, `all`,
//! `exists`, `exists_one`) costs the size of its range; nested comprehensions multiply
//! those sizes, and the ranges usually come from the object, which the requester
//! controls. Three nested `map`s over a 100-element list take seconds; two are the most
//! a policy needs (e.g. `containers.all(c, c.env.all(e, ...))`).
//!
//! The interpreter, and graft's own walks of a program, recurse once per level of the
//! syntax tree. cel's parser bounds the nesting of what it recurses on (parentheses,
//! calls), but not of a chain of operators: `1 + 1 + … + 1` parses in a loop into a
//! tree as deep as the chain is long, whose evaluation overflows a thread's stack. Every
//! program is refused past the parser's own bound, checked before anything recurses.
//! The parse itself recurses once per operator of such a chain, so before it, the
//! source is refused when it holds more operators than any policy needs.

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr};

/// Deepest nesting of comprehensions in one expression.
pub const MAX_COMPREHENSION_NESTING: usize = 2;

/// Deepest syntax tree of one expression: cel's parser's default recursion limit, so a
/// chain of operators nests as deep as parentheses may.
pub const MAX_NESTING: usize = 96;

/// Most operator characters (and `in`s) one expression's source may hold, outside its
/// strings and comments: each may add a level to the parse, which recurses on them.
pub const MAX_OPERATORS: usize = 1024;

/// Refuses a source the parse could recurse too deeply on: more than
/// [`MAX_OPERATORS`] operators. Counts `||` as two, which only makes it stricter.
pub fn check_source(source: &str) -> Result<(), String> {
    let operators = operators(source.as_bytes());
    if operators > MAX_OPERATORS {
        return Err(format!(
            "the expression has {operators} operator characters outside its strings; at \
             most {MAX_OPERATORS} are allowed: split it into variables"
        ));
    }
    Ok(())
}

/// Counts the operator characters of CEL source, and the `in` keywords, skipping string
/// literals (quoted, triple-quoted, raw), comments and numbers.
fn operators(bytes: &[u8]) -> usize {
    let mut count = 0;
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'\'' | b'"' => at = string_end(bytes, at, false),
            b'/' if bytes.get(at + 1) == Some(&b'/') => {
                at = bytes[at..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(bytes.len(), |newline| at + newline);
            }
            b'0'..=b'9' => at = number_end(bytes, at),
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                let start = at;
                while bytes
                    .get(at)
                    .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
                {
                    at += 1;
                }
                let word = &bytes[start..at];
                match bytes.get(at) {
                    Some(b'\'' | b'"') if is_string_prefix(word) => {
                        let raw = word.iter().any(|b| b.eq_ignore_ascii_case(&b'r'));
                        at = string_end(bytes, at, raw);
                    }
                    _ => count += usize::from(word == b"in"),
                }
            }
            b'|' | b'&' | b'<' | b'>' | b'=' | b'!' | b'+' | b'-' | b'*' | b'/' | b'%' | b'.'
            | b'[' | b'?' => {
                count += 1;
                at += 1;
            }
            _ => at += 1,
        }
    }
    count
}

/// Where the number literal starting at `at` ends, as CEL's grammar reads one: `0x` and
/// hex digits, or digits, a `.` and digits, an exponent; then a `u`. Nothing else is
/// taken in: a `.` not followed by a digit is a field selection (`0.a`), and an `e`
/// of a hex literal is a digit, not an exponent (`0xe+0xe` is an addition).
fn number_end(bytes: &[u8], mut at: usize) -> usize {
    let digits = |at: &mut usize, hex: bool| {
        while bytes
            .get(*at)
            .is_some_and(|b| b.is_ascii_digit() || (hex && b.is_ascii_hexdigit()))
        {
            *at += 1;
        }
    };
    if bytes.get(at) == Some(&b'0') && matches!(bytes.get(at + 1), Some(b'x' | b'X')) {
        at += 2;
        digits(&mut at, true);
    } else {
        digits(&mut at, false);
        if bytes.get(at) == Some(&b'.') && bytes.get(at + 1).is_some_and(u8::is_ascii_digit) {
            at += 1;
            digits(&mut at, false);
        }
        if matches!(bytes.get(at), Some(b'e' | b'E')) {
            let sign = usize::from(matches!(bytes.get(at + 1), Some(b'+' | b'-')));
            if bytes.get(at + 1 + sign).is_some_and(u8::is_ascii_digit) {
                at += 1 + sign;
                digits(&mut at, false);
            }
        }
    }
    if matches!(bytes.get(at), Some(b'u' | b'U')) {
        at += 1;
    }
    at
}

/// `r`, `b`, `rb` or `br`, in either case: what may stand before a string's quote.
fn is_string_prefix(word: &[u8]) -> bool {
    let lower = word.to_ascii_lowercase();
    matches!(lower.as_slice(), b"r" | b"b" | b"rb" | b"br")
}

/// Where the string literal whose quote is at `at` ends (after its closing quote, or
/// at the end of the source when it is not closed).
fn string_end(bytes: &[u8], at: usize, raw: bool) -> usize {
    let quote = bytes[at];
    let triple = bytes.get(at..at + 3) == Some(&[quote; 3][..]);
    let closing: &[u8] = if triple { &[quote; 3] } else { &[quote; 1] };
    let mut at = at + closing.len();
    while at < bytes.len() {
        if !raw && bytes[at] == b'\\' {
            at += 2;
        } else if bytes[at..].starts_with(closing) {
            return at + closing.len();
        } else {
            at += 1;
        }
    }
    bytes.len()
}

/// Refuses a program whose syntax tree is deeper than [`MAX_NESTING`], or whose
/// comprehensions nest deeper than [`MAX_COMPREHENSION_NESTING`].
pub fn check(root: &IdedExpr) -> Result<(), String> {
    let (depth, nesting) = depths(root);
    if depth > MAX_NESTING {
        return Err(format!(
            "the expression nests {depth} levels deep (each operator of a chain such as \
             `a + b + c` is one level); at most {MAX_NESTING} are allowed: split it into \
             variables, or use a list and a macro (`[a, b, c].exists(x, …)`)"
        ));
    }
    if nesting > MAX_COMPREHENSION_NESTING {
        return Err(format!(
            "comprehensions (map, filter, all, exists, exists_one) nest {nesting} deep; at most \
             {MAX_COMPREHENSION_NESTING} are allowed, since each level multiplies the work by \
             the size of its list: compute the inner part in a variable instead"
        ));
    }
    Ok(())
}

/// Where a node is: how many nodes are above it, and how many comprehension bodies.
#[derive(Clone, Copy)]
struct Level {
    depth: usize,
    nesting: usize,
}

/// The depth of the syntax tree, and how deeply comprehensions nest. A comprehension's
/// range is evaluated once, outside its loop, so a comprehension in a range does not
/// nest (`a.map(x, x).filter(y, y)` is 1); one in the loop body does
/// (`a.map(x, b.map(y, y))` is 2). Walks with an explicit stack, so no expression can
/// make it recurse.
fn depths(root: &IdedExpr) -> (usize, usize) {
    let (mut deepest, mut most_nested) = (0, 0);
    let mut stack: Vec<(&IdedExpr, Level)> = vec![(
        root,
        Level {
            depth: 1,
            nesting: 0,
        },
    )];
    while let Some((node, level)) = stack.pop() {
        deepest = deepest.max(level.depth);
        most_nested = most_nested.max(level.nesting);
        let below = Level {
            depth: level.depth + 1,
            ..level
        };
        match &node.expr {
            Expr::Comprehension(c) => {
                stack.push((&c.iter_range, below));
                stack.push((&c.accu_init, below));
                let body = Level {
                    nesting: level.nesting + 1,
                    ..below
                };
                for inner in [&c.loop_cond, &c.loop_step, &c.result] {
                    stack.push((inner, body));
                }
                // The body of a comprehension is itself one level.
                most_nested = most_nested.max(body.nesting);
            }
            Expr::Call(call) => {
                if let Some(target) = &call.target {
                    stack.push((target, below));
                }
                stack.extend(call.args.iter().map(|arg| (arg, below)));
            }
            Expr::List(list) => stack.extend(list.elements.iter().map(|e| (e, below))),
            Expr::Map(map) => push_entries(&mut stack, &map.entries, below),
            Expr::Struct(s) => push_entries(&mut stack, &s.entries, below),
            Expr::Select(select) => stack.push((&select.operand, below)),
            Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => {}
        }
    }
    (deepest, most_nested)
}

fn push_entries<'a>(
    stack: &mut Vec<(&'a IdedExpr, Level)>,
    entries: &'a [cel::common::ast::IdedEntryExpr],
    level: Level,
) {
    for entry in entries {
        match &entry.expr {
            EntryExpr::MapEntry(e) => {
                stack.push((&e.key, level));
                stack.push((&e.value, level));
            }
            EntryExpr::StructField(f) => stack.push((&f.value, level)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting() {
        let check = |source: &str, expect: usize| {
            let program = cel::Env::stdlib().compile(source).expect(source);
            assert_eq!(depths(program.expression()).1, expect, "{source}");
        };
        check("1 + 2", 0);
        check("[1, 2].map(x, x * 2)", 1);
        check("[1, 2].map(x, x).filter(y, y > 1).all(z, z > 0)", 1);
        check("{'a': [1].map(x, x), 'b': [2].exists(y, y == 2)}", 1);
        check("[1].map(x, [2].map(y, x + y))", 2);
        check("[1].map(x, [2].map(y, [3].map(z, x + y + z)))", 3);
        check("[1].all(x, [2].exists(y, [3].exists_one(z, z == x)))", 3);
        check("[[1].map(x, [2].map(y, y))].map(z, z)", 2);
    }

    #[test]
    fn a_chain_of_operators_is_as_deep_as_it_is_long() {
        let chain = |terms: usize| format!("x{}", " + x".repeat(terms - 1));
        let depth = |source: &str| {
            let program = cel::Env::stdlib().compile(source).expect(source);
            depths(program.expression()).0
        };
        assert_eq!(depth("x"), 1);
        assert_eq!(depth("x + x"), 2);
        assert_eq!(depth(&chain(96)), 96);
        assert_eq!(depth("[x, {'a': x.b}]"), 4);
        let refused = |source: &str| {
            let program = cel::Env::stdlib().compile(source).expect(source);
            check(program.expression()).is_err()
        };
        assert!(!refused(&chain(MAX_NESTING)));
        assert!(refused(&chain(MAX_NESTING + 1)));
        assert!(refused(&chain(500)));
    }

    #[test]
    fn operators_are_counted_outside_strings_comments_and_numbers() {
        assert_eq!(operators(b"a + b.c[0] && !d || e in f ? g : h"), 10);
        assert_eq!(
            operators(b"'a+b' + \"c.d\" + '''e\n+''' + r'\\' + b\"x.y\""),
            4
        );
        assert_eq!(operators(b"x // a comment: + + +\n+ y"), 1);
        // The list's `[` and the two `+`.
        assert_eq!(operators(b"[1.5, 2e-3, 0x1F, 3u] + 'it\\'s' + inner"), 3);
        // What only looks like part of a number is counted: a hex literal's `e` is a
        // digit, and a `.` before a name selects a field.
        assert_eq!(operators(b"0xe+0xe+0xE-1"), 3);
        assert_eq!(operators(b"0.a.a.a"), 3);
        assert_eq!(operators(b"1.5e+3 + 2E7 + 3.0"), 2);
        // An unclosed string runs to the end: the parse refuses it.
        assert_eq!(operators(b"a + 'b + c"), 1);
    }

    #[test]
    fn a_source_with_too_many_operators_is_refused_before_it_is_parsed() {
        let chain = |terms: usize| format!("x{}", " + x".repeat(terms - 1));
        assert!(check_source(&chain(MAX_OPERATORS + 1)).is_ok());
        assert!(check_source(&chain(MAX_OPERATORS + 2)).is_err());
        // Far past what the parse could recurse on: refused without parsing.
        assert!(check_source(&chain(1_000_000)).is_err());
        assert!(check_source(&format!("0xe{}", "+0xe".repeat(100_000))).is_err());
        assert!(check_source(&format!("0{}", ".a".repeat(100_000))).is_err());
        // Strings hold anything.
        let string = format!("'{}'", "+".repeat(100_000));
        assert!(check_source(&string).is_ok());
    }
}
