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

/// Most operator characters (and `in`s) one expression's source may hold: each may add
/// a level to the parse, which recurses on them.
pub const MAX_OPERATORS: usize = 1024;

/// Refuses a source the parse could recurse too deeply on: more than
/// [`MAX_OPERATORS`] operators. Every operator character counts, in strings and
/// comments too, and `||` counts as two: a scan that skipped what it took for a string
/// or a comment would have to lex exactly as cel does (cel also parses on past a lexing
/// error), or a chain could hide from it. No policy needs that many.
pub fn check_source(source: &str) -> Result<(), String> {
    let operators = operators(source.as_bytes());
    if operators > MAX_OPERATORS {
        return Err(format!(
            "the expression has {operators} operator characters (strings included); at most \
             {MAX_OPERATORS} are allowed: split it into variables, and keep long strings in \
             params"
        ));
    }
    Ok(())
}

/// Counts the operator characters of CEL source, and the `in` keywords.
fn operators(bytes: &[u8]) -> usize {
    let mut count = 0;
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        if byte.is_ascii_alphabetic() || byte == b'_' {
            let start = at;
            while bytes
                .get(at)
                .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
            {
                at += 1;
            }
            count += usize::from(&bytes[start..at] == b"in");
            continue;
        }
        count += usize::from(matches!(
            byte,
            b'|' | b'&'
                | b'<'
                | b'>'
                | b'='
                | b'!'
                | b'+'
                | b'-'
                | b'*'
                | b'/'
                | b'%'
                | b'.'
                | b'['
                | b'?'
        ));
        at += 1;
    }
    count
}

/// Refuses a program whose syntax tree is deeper than [`MAX_NESTING`], or whose
/// comprehensions nest deeper than [`MAX_COMPREHENSION_NESTING`].
pub fn check(root: &IdedExpr) -> Result<(), String> {
    check_depth(root)?;
    let (_, nesting) = depths(root);
    if nesting > MAX_COMPREHENSION_NESTING {
        return Err(format!(
            "comprehensions (map, filter, all, exists, exists_one) nest {nesting} deep; at most \
             {MAX_COMPREHENSION_NESTING} are allowed, since each level multiplies the work by \
             the size of its list: compute the inner part in a variable instead"
        ));
    }
    Ok(())
}

/// Refuses a program whose syntax tree is deeper than [`MAX_NESTING`]: what every
/// program is held to, a MutatingAdmissionPolicy's too, whose comprehensions Kubernetes
/// bounds by their cost alone.
pub fn check_depth(root: &IdedExpr) -> Result<(), String> {
    let (depth, _) = depths(root);
    if depth > MAX_NESTING {
        return Err(format!(
            "the expression nests {depth} levels deep (each operator of a chain such as \
             `a + b + c` is one level); at most {MAX_NESTING} are allowed: split it into \
             variables, or use a list and a macro (`[a, b, c].exists(x, …)`)"
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
                // A bind (the two-variable macros', `sortBy`'s, a lazy `orValue`'s)
                // iterates over nothing: its body runs once.
                let nests = usize::from(!super::comprehensions::is_bind(c));
                let body = Level {
                    nesting: level.nesting + nests,
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
    fn every_operator_character_counts() {
        assert_eq!(operators(b"a + b.c[0] && !d || e in f ? g : h"), 10);
        // In strings and comments too: a scan that skipped them could be fooled.
        assert_eq!(operators(b"'a+b' // +"), 4);
        assert_eq!(operators(b"x.`a//b` + x"), 4);
        assert_eq!(operators(b"inner + in_ + index"), 2);
    }

    #[test]
    fn a_source_with_too_many_operators_is_refused_before_it_is_parsed() {
        let chain = |terms: usize| format!("x{}", " + x".repeat(terms - 1));
        assert!(check_source(&chain(MAX_OPERATORS + 1)).is_ok());
        assert!(check_source(&chain(MAX_OPERATORS + 2)).is_err());
        // Far past what the parse could recurse on: refused without parsing, however the
        // chain is dressed (what cel's lexer refuses, it skips and parses on).
        let hidden = [
            chain(1_000_000),
            format!("0xe{}", "+0xe".repeat(100_000)),
            format!("0{}", ".a".repeat(100_000)),
            format!("x.`a//b`{}", "+x".repeat(100_000)),
            format!("'\nx{}", "+x".repeat(100_000)),
            format!("'''\n{}", "+x".repeat(100_000)),
            format!("x + '\\q{}'", "+x".repeat(100_000)),
        ];
        for source in &hidden {
            assert!(check_source(source).is_err(), "{}", &source[..20]);
        }
    }
}
