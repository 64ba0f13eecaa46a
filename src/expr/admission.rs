//! A MutatingAdmissionPolicy's CEL expressions, compiled and evaluated as kube-apiserver
//! v1.36.2 compiles and evaluates them.
//!
//! - [`AdmissionExpression::compile`]: the apiserver's compile-time checks as far as
//!   graft can make them without a type checker ([`super::admission_check`]), in its
//!   words; the literals `Object{...}` and `JSONPatch{...}` rewritten into values graft
//!   builds ([`super::structs`]); what reads only literals evaluated at load, as cel-go's
//!   constant folding does (`params` are data of the review here, not folded).
//! - [`AdmissionActivation`]: one evaluation's inputs, read in place through the views
//!   graft's own expressions use ([`super::view`]); the policy's variables evaluated
//!   lazily, each at most once per activation, when an expression first reads it, and
//!   its error reported only to an expression that does
//!   (`composited variable "x" fails to evaluate: ...`).
//! - The results as graft's types: a bool, an ApplyConfiguration's tree, a JSONPatch's
//!   operations ([`super::admission_result`]).
//!
//! Errors read as the apiserver's (`expression '...' resulted in error: no such key: x`):
//! the `cel` crate's messages are reworded as cel-go's where they differ
//! (`super::admission_result::cel_go_message`).
//!
//! An expression is given as much cost budget as [`BUDGET`] allows, with the variables
//! it reads; past it, the apiserver's `operation cancelled: actual cost limit exceeded`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::{Context, Env, ExecutionError};

use super::admission_check::{self, Rejection};
use super::admission_result::cel_go_message;
use super::{cost, fold, limits, paths, structs, view};
use crate::k8s::json_patch_v4::Operation;
use crate::tree::Tree;

/// Units of graft's cost model one MAP expression may spend, with the variables it reads:
/// ten times a graft policy's, as the apiserver's per-call limit (1,000,000 of cel-go's
/// units) lets a comprehension run about that much longer.
pub const BUDGET: u64 = 10 * cost::MAX_COST;

/// Where an expression sits in a MutatingAdmissionPolicy, which decides what it sees and
/// what it must give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmissionKind {
    /// `spec.matchConditions[*]`: a `bool`; no `variables` (the apiserver refuses them
    /// when the policy is written), no patch types.
    MatchCondition,
    /// `spec.variables[*]`: anything; the variables before it, no patch types.
    Variable,
    /// `spec.mutations[*].applyConfiguration`: an `Object{...}`.
    ApplyConfiguration,
    /// `spec.mutations[*].jsonPatch`: a list of `JSONPatch{...}`.
    JsonPatch,
}

/// What the policy declares for an expression.
#[derive(Debug, Clone, Copy)]
pub struct AdmissionDeclarations<'a> {
    /// `spec.paramKind` is set: `params` is declared.
    pub params: bool,
    /// The variables the expression may read: for a variable, those before it.
    pub variables: &'a [String],
    pub kind: AdmissionKind,
}

/// Why an expression is refused or failed, worded as the apiserver words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionError {
    /// cel-go's issues: `ERROR: <input>:1:1: undeclared reference to 'params' (in
    /// container '')` and the source line under it.
    #[error("compilation failed: {0}")]
    Compile(String),
    /// The result's type is not the one the expression's place needs.
    #[error("must evaluate to {expected} but got {got}")]
    ResultType { expected: &'static str, got: String },
    /// A part that reads only literals fails: cel-go fails building the program.
    #[error("program instantiation failed: {0}")]
    Instantiation(String),
    /// One of graft's own bounds on programs (`super::limits`).
    #[error("{0}")]
    Limit(String),
    /// The evaluation failed.
    #[error("expression '{expression}' resulted in error: {error}")]
    Evaluation { expression: String, error: String },
    /// The value does not make the result (`type mismatch: ...`, a value with no JSON).
    #[error("{0}")]
    Result(String),
}

/// A compiled MutatingAdmissionPolicy expression.
pub struct AdmissionExpression {
    source: String,
    kind: AdmissionKind,
    /// What is evaluated: the parsed program with its patch type literals rewritten, its
    /// literal-only parts folded, its chains below bindings followed and its
    /// comprehensions metered.
    program: cel::IdedExpr,
    folded: fold::Folded,
    paths: paths::Paths,
    env: Arc<Env>,
}

impl std::fmt::Debug for AdmissionExpression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmissionExpression")
            .field("source", &self.source)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl AdmissionExpression {
    /// Compiles `source` as the apiserver compiles an expression of `declarations.kind`.
    /// Give the text it compiles: it trims match conditions' and mutations' expressions
    /// first, not variables'.
    pub fn compile(
        source: &str,
        declarations: &AdmissionDeclarations<'_>,
    ) -> Result<AdmissionExpression, AdmissionError> {
        let env = super::admission_environment().map_err(AdmissionError::Limit)?;
        limits::check_source(source).map_err(AdmissionError::Limit)?;
        let program = env
            .compile(source)
            .map_err(|errors| AdmissionError::Compile(parse_issues(source, &errors)))?;
        // Comprehensions nest as deep as a policy likes: only the cost budget bounds them.
        limits::check_depth(program.expression()).map_err(AdmissionError::Limit)?;
        admission_check::check(program.expression(), declarations).map_err(|rejection| {
            match rejection {
                Rejection::Issue(issue) => {
                    AdmissionError::Compile(issue.render(source, program.source_info()))
                }
                Rejection::ResultType { expected, got } => {
                    AdmissionError::ResultType { expected, got }
                }
            }
        })?;
        let rewritten = structs::rewrite(program.expression());
        let (folded_expression, folded) = fold_literals(&rewritten, env)?;
        let (followed, paths) = paths::rewrite(&folded_expression, &folded);
        Ok(AdmissionExpression {
            source: source.to_owned(),
            kind: declarations.kind,
            program: cost::meter(&followed),
            folded,
            paths,
            env: Arc::clone(env),
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn kind(&self) -> AdmissionKind {
        self.kind
    }

    /// How many parts were evaluated at load.
    #[cfg(test)]
    pub(crate) fn folded_parts(&self) -> usize {
        self.folded.count()
    }
}

/// The parser's errors, as cel-go prints its issues.
fn parse_issues(source: &str, errors: &cel::ParseErrors) -> String {
    errors
        .errors
        .iter()
        .map(|error| {
            let (line, column) = error.pos;
            let text = source
                .lines()
                .nth(usize::try_from(line - 1).unwrap_or(0))
                .unwrap_or("");
            // The parser counts columns in bytes, cel-go in characters.
            let before = usize::try_from(column - 1).unwrap_or(0);
            let column = text.get(..before).map_or(before, |b| b.chars().count()) + 1;
            let dots = ".".repeat(column - 1);
            format!(
                "ERROR: <input>:{line}:{column}: {}\n | {text}\n | {dots}^",
                error.msg
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `root` with its parts that read nothing but literals evaluated, as cel-go's
/// constant folding does when it builds the program: a part without comprehensions
/// that fails refuses the expression, as it refuses the program.
fn fold_literals(
    root: &cel::IdedExpr,
    env: &Arc<Env>,
) -> Result<(cel::IdedExpr, fold::Folded), AdmissionError> {
    let evaluate = |part: &cel::IdedExpr| {
        let metered = cost::meter(part);
        let context = Context::with_env(Arc::clone(env));
        // A panic in the interpreter leaves the part to the reviews.
        let evaluated = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            cost::with_budget_of(BUDGET, || {
                match cel::Value::resolve_val(&metered, &context) {
                    Ok(value) => fold::own(value.as_ref()).ok_or(fold::Unfolded::Kept),
                    Err(error) if builds_a_program_with(part) => {
                        Err(fold::Unfolded::Failed(cel_go_message(&error)))
                    }
                    Err(_) => Err(fold::Unfolded::Kept),
                }
            })
        }));
        match evaluated {
            Ok((_, true)) | Err(_) => Err(fold::Unfolded::Kept),
            Ok((value, false)) => value,
        }
    };
    let (folded_expression, folded) = fold::fold(root, &[], &evaluate);
    match folded.failures().first() {
        Some(reason) => Err(AdmissionError::Instantiation(reason.clone())),
        None => Ok((folded_expression, folded)),
    }
}

/// Whether cel-go folds `part` when it builds the program, so that its failure is the
/// program's: a call on constants (not a comprehension, which it leaves to run, nor a
/// struct literal, which it builds as it evaluates).
fn builds_a_program_with(part: &cel::IdedExpr) -> bool {
    !fold::contains(part, &|expr| match expr {
        cel::common::ast::Expr::Comprehension(_) => true,
        cel::common::ast::Expr::Call(call) => call.func_name == structs::STRUCT,
        _ => false,
    })
}

/// What one evaluation sees: `object`, `oldObject`, `request`, `params`,
/// `namespaceObject`, and the policy's variables.
#[derive(Debug, Clone, Copy)]
pub struct AdmissionBindings<'a> {
    /// `None` (CEL `null`) when the request has none.
    pub object: Option<&'a Tree<'a>>,
    /// `None` at CREATE.
    pub old_object: Option<&'a Tree<'a>>,
    pub request: &'a Tree<'a>,
    /// `None`: no `paramRef`, or no params found where that is allowed.
    pub params: Option<&'a Tree<'a>>,
    /// `None` for a cluster-scoped request, a Namespace, and in match conditions.
    pub namespace_object: Option<&'a Tree<'a>>,
    /// The policy's variables, compiled, in order.
    pub variables: &'a [(String, AdmissionExpression)],
}

/// A variable's value once evaluated, or its error: owned, as it outlives the
/// evaluation that read it.
type Evaluated = Result<Box<dyn Val + 'static>, String>;

/// One activation: the bindings' views, made on first use, and the variables' values.
/// The apiserver makes one per evaluation of a mutation, and one for all the match
/// conditions of an invocation.
pub struct AdmissionActivation<'a> {
    bindings: AdmissionBindings<'a>,
    object: OnceLock<view::Node<'a>>,
    old_object: OnceLock<view::Node<'a>>,
    request: OnceLock<view::Node<'a>>,
    params: OnceLock<view::Node<'a>>,
    namespace_object: OnceLock<view::Node<'a>>,
    variables: Box<[OnceLock<Evaluated>]>,
    /// The variable that last failed to evaluate when an expression read it: the
    /// interpreter reports only that `variables` has no such field.
    failed: AtomicUsize,
}

/// Why an evaluation failed: the interpreter's error, already in cel-go's words.
struct Failed(String);

impl<'a> AdmissionActivation<'a> {
    pub fn new(bindings: AdmissionBindings<'a>) -> AdmissionActivation<'a> {
        AdmissionActivation {
            bindings,
            object: OnceLock::new(),
            old_object: OnceLock::new(),
            request: OnceLock::new(),
            params: OnceLock::new(),
            namespace_object: OnceLock::new(),
            variables: bindings.variables.iter().map(|_| OnceLock::new()).collect(),
            failed: AtomicUsize::new(usize::MAX),
        }
    }

    /// A match condition's value.
    pub fn evaluate_bool(&self, expression: &AdmissionExpression) -> Result<bool, AdmissionError> {
        self.run(expression, |value| {
            value
                .downcast_ref::<cel::common::types::CelBool>()
                .map(|b| *b.inner())
                .ok_or_else(|| format!("expected a bool result, got {}", value.get_type().name()))
        })
    }

    /// An ApplyConfiguration's `Object{...}`, as the tree of its fields.
    pub fn evaluate_apply_configuration(
        &self,
        expression: &AdmissionExpression,
    ) -> Result<Tree<'static>, AdmissionError> {
        self.run(expression, super::admission_result::apply_configuration)
    }

    /// A JSONPatch's operations.
    pub fn evaluate_json_patch(
        &self,
        expression: &AdmissionExpression,
    ) -> Result<Vec<Operation<'static>>, AdmissionError> {
        self.run(expression, super::admission_result::json_patch)
    }

    /// Evaluates `expression` with a fresh budget, and reads its value.
    fn run<T>(
        &self,
        expression: &AdmissionExpression,
        read: impl FnOnce(&dyn Val) -> Result<T, String>,
    ) -> Result<T, AdmissionError> {
        let visible = self.variables.len();
        let (result, exhausted) = cost::with_budget_of(BUDGET, || {
            self.evaluate(expression, visible, |value| Ok(read(value)))
        });
        let failed = |error: String| AdmissionError::Evaluation {
            expression: expression.source.clone(),
            error,
        };
        if exhausted {
            return Err(failed(
                "operation cancelled: actual cost limit exceeded".to_owned(),
            ));
        }
        match result {
            Err(Failed(error)) => Err(failed(error)),
            Ok(read) => read.map_err(AdmissionError::Result),
        }
    }

    /// Evaluates `expression`, seeing the first `visible` variables, and hands its value
    /// to `read` while the value still borrows the activation.
    fn evaluate<T>(
        &self,
        expression: &AdmissionExpression,
        visible: usize,
        read: impl FnOnce(&dyn Val) -> Result<T, Failed>,
    ) -> Result<T, Failed> {
        let resolver = Resolver {
            activation: self,
            expression,
            visible,
        };
        let mut context = Context::with_env(Arc::clone(&expression.env));
        context.set_variable_resolver(&resolver);
        match cel::Value::resolve_val(&expression.program, &context) {
            Ok(value) => read(value.as_ref()),
            Err(error) => Err(Failed(self.describe(&error))),
        }
    }

    /// cel-go's message for `error`; a variable that failed to evaluate is reported as
    /// the apiserver's composited variables report it.
    fn describe(&self, error: &ExecutionError) -> String {
        if let ExecutionError::UndeclaredReference(name) = error
            && name.as_str() == "variables"
        {
            let index = self.failed.load(Ordering::Relaxed);
            if let (Some((name, _)), Some(Some(Err(message)))) = (
                self.bindings.variables.get(index),
                self.variables.get(index).map(OnceLock::get),
            ) {
                return format!("composited variable \"{name}\" fails to evaluate: {message}");
            }
        }
        cel_go_message(error)
    }

    /// The view of a binding, made on first use.
    fn root(&self, root: paths::Root) -> Option<&view::Node<'a>> {
        let bindings = &self.bindings;
        let (cell, tree) = match root {
            paths::Root::Object => (&self.object, bindings.object),
            paths::Root::OldObject => (&self.old_object, bindings.old_object),
            paths::Root::Request => (&self.request, Some(bindings.request)),
            paths::Root::Params => (&self.params, bindings.params),
            paths::Root::NamespaceObject => (&self.namespace_object, bindings.namespace_object),
            paths::Root::Element => return None,
        };
        Some(cell.get_or_init(|| match tree {
            Some(tree) => view::Node::of(tree),
            None => view::Node::Scalar(Box::new(cel::common::types::CelNull)),
        }))
    }

    /// The value of the variable `name` among the first `visible`, evaluated on first
    /// use; `None` when it failed (its error is kept for [`Self::describe`]).
    fn variable(&self, name: &str, visible: usize) -> Option<&(dyn Val + 'static)> {
        let declared = &self.bindings.variables[..visible.min(self.bindings.variables.len())];
        // A name declared twice is the later declaration, as in the apiserver.
        let index = declared
            .iter()
            .rposition(|(declared, _)| declared == name)?;
        let cell = self.variables.get(index)?;
        let evaluated = cell.get_or_init(|| {
            let (_, expression) = &declared[index];
            self.evaluate(expression, index, |value| {
                super::convert::to_static(value).ok_or_else(|| {
                    Failed(format!(
                        "a {} value cannot be kept for later reads",
                        value.get_type().name()
                    ))
                })
            })
            .map_err(|Failed(error)| error)
        });
        match evaluated {
            Ok(value) => Some(value.as_ref()),
            Err(_) => {
                self.failed.store(index, Ordering::Relaxed);
                None
            }
        }
    }
}

/// What one evaluation's names resolve to.
struct Resolver<'s, 'a> {
    activation: &'s AdmissionActivation<'a>,
    expression: &'s AdmissionExpression,
    /// How many of the policy's variables the expression sees.
    visible: usize,
}

impl VariableResolver for Resolver<'_, '_> {
    fn resolve<'b>(&'b self, name: &str) -> Option<CowVal<'b, 'b>> {
        if name.starts_with('@') {
            if let Some(value) = self.expression.folded.get(name) {
                return Some(CowVal::Borrowed(value));
            }
            return self
                .expression
                .paths
                .answer(name, |root| self.activation.root(root));
        }
        let mut segments = name.split('.');
        let first = segments.next()?;
        if let Some(root) = paths::Root::named(first) {
            let node = self.activation.root(root)?.path(segments)?;
            return Some(CowVal::Borrowed(node.as_val()));
        }
        if first == "variables" {
            let variable = segments.next()?;
            if segments.next().is_some() {
                return None;
            }
            return self
                .activation
                .variable(variable, self.visible)
                .map(CowVal::Borrowed);
        }
        None
    }
}
