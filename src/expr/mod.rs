//! CEL expressions and `{{ }}` templates: compiled once at policy load, evaluated per request.
//!
//! - [`Expression`]: one compiled CEL program and the variables it refers to ([`Needs`]).
//! - [`Scope`]: the variables of one policy evaluation (`object`, `oldObject`,
//!   `namespaceObject`, `request`, `params`, `variables`, and under `foreach` `element`
//!   and `index`), shared by all of that policy's expressions.
//! - [`template::Template`]: a JSON value whose strings may hold `{{ expr }}`.
//! - `functions`: the Kubernetes helpers (`podOrdinal`, `quantityValue`, `multusNetworks`,
//!   `parseImageReference`, ...), thin wrappers over [`crate::k8s`].
//! - `lists`, `net`, `quantities`, `urls`, `semver`, `formats`: Kubernetes' CEL list, set,
//!   regex, IP, CIDR, quantity, URL, semver and format libraries; `comprehensions`,
//!   `lists_ext`, `optionals`, `format`: cel-go's two-variable comprehensions, lists
//!   extension, optional values and `format` as Kubernetes enables them.
//! - `check` and `catalog`: the load-time check that every name an expression uses exists.
//! - [`AdmissionExpression`] and [`AdmissionActivation`]: a MutatingAdmissionPolicy's
//!   expressions, compiled, checked and evaluated as kube-apiserver does (`admission`).
//!
//! Converting the request's JSON into CEL values used to be the dominant cost of an
//! evaluation, so a scope hands the tree bindings (a `foreach` element too) to CEL as
//! views ([`view`]) that read the tree in place and convert a map or list one level at a
//! time, only when an expression looks into it. Strings are borrowed from the request,
//! never copied. A chain with optional steps or indexes below a binding is followed down
//! the views by the scope itself ([`paths`]), since cel would convert each level it steps
//! through.

mod admission;
mod admission_check;
mod admission_literals;
mod admission_result;
mod admission_types;
mod catalog;
pub mod check;
mod comprehensions;
mod convert;
pub mod cost;
mod fold;
mod format;
mod formats;
mod functions;
pub mod limits;
pub mod lint;
mod lists;
mod lists_ext;
mod net;
mod optionals;
mod paths;
mod quantities;
pub mod request_fields;
mod semver;
mod structs;
pub mod template;
#[cfg(test)]
mod tests;
mod type_errors;
mod urls;
mod view;
mod walk;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, LazyLock, OnceLock};

use cel::common::types::{CelMap, CelMapKey, CelNull, CelString};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::{Context, Env, Program};

use crate::tree::Tree;

pub use admission::{
    AdmissionActivation, AdmissionBindings, AdmissionDeclarations, AdmissionError,
    AdmissionExpression, AdmissionKind,
};
pub use check::{CheckError, Declarations};
pub use convert::MAX_DEPTH;
pub use request_fields::RequestFields;

/// Why an expression could not be compiled or evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExprError {
    #[error("invalid CEL expression: {0}")]
    Compile(String),
    /// The expression parses but refers to a name that does not exist.
    #[error("{0}")]
    Check(CheckError),
    #[error("{0}")]
    Evaluate(String),
    /// The result's JSON type only: the value may be the object's contents.
    #[error("expected a {expected} result, got {got}")]
    ResultType {
        expected: &'static str,
        got: &'static str,
    },
}

/// The variables an expression or template refers to, and which parts of `object` it reads
/// (for the server, which parses no more of a review than its policies can see).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    pub object: bool,
    pub old_object: bool,
    /// `namespaceObject`: the request namespace's object.
    pub namespace_object: bool,
    pub request: bool,
    pub params: bool,
    pub variables: bool,
    /// `element` or `index`: bound only under a mutation's `foreach`.
    pub element: bool,
    /// Which fields of `request` are read, when `request` is.
    pub request_fields: RequestFields,
}

impl Needs {
    pub fn union(self, other: Needs) -> Needs {
        Needs {
            object: self.object || other.object,
            old_object: self.old_object || other.old_object,
            namespace_object: self.namespace_object || other.namespace_object,
            request: self.request || other.request,
            params: self.params || other.params,
            variables: self.variables || other.variables,
            element: self.element || other.element,
            request_fields: self.request_fields.union(other.request_fields),
        }
    }

    fn of(program: &Program) -> Needs {
        let references = program.references();
        let object = references.has_variable("object");
        Needs {
            object,
            old_object: references.has_variable("oldObject"),
            namespace_object: references.has_variable("namespaceObject"),
            request: references.has_variable("request"),
            request_fields: if references.has_variable("request") {
                request_fields::analyse(program.expression())
            } else {
                RequestFields::default()
            },
            params: references.has_variable("params"),
            variables: references.has_variable("variables"),
            element: references.has_variable("element") || references.has_variable("index"),
        }
    }
}

/// The one environment every expression is compiled and run with: the
/// standard library, the strings extension, optional syntax (`.?`, `orValue`,
/// on by default in cel) and graft's Kubernetes helpers. Built once; a failure
/// is a bug in the registrations, reported by every compile.
static ENV: LazyLock<Result<Arc<Env>, String>> = LazyLock::new(|| build_environment(true));

/// The environment of MutatingAdmissionPolicy expressions: the same, but a map literal
/// that repeats a key keeps the last, as cel-go's does.
static ADMISSION_ENV: LazyLock<Result<Arc<Env>, String>> =
    LazyLock::new(|| build_environment(false));

/// graft's environment; `duplicate_keys_fail`: whether a map literal that repeats a key
/// fails, as it did before MutatingAdmissionPolicy came (the CEL spec's reading).
fn build_environment(duplicate_keys_fail: bool) -> Result<Arc<Env>, String> {
    let mut env = Env::stdlib();
    env.set_error_on_duplicate_map_keys(duplicate_keys_fail);
    // graft's overloads before the strings extension: its `format` is the one calls find.
    env.add_extension(functions::register)
        .and_then(|()| env.add_extension(cel::extensions::strings))
        .and_then(|()| env.add_extension(cost::register))
        .and_then(|()| env.add_extension(comprehensions::register_macros))
        .and_then(|()| env.add_extension(lists_ext::register_macros))
        .and_then(|()| env.add_extension(optionals::register_macros))
        // So that `type(x) == Object` holds of an `Object{}` value.
        .and_then(|()| {
            env.add_type(cel::common::types::Type::new_struct(
                structs::OBJECT.to_owned(),
            ))
        })
        .and_then(|()| {
            env.add_type(cel::common::types::Type::new_struct(
                structs::JSON_PATCH.to_owned(),
            ))
        })
        .map_err(|e| format!("cannot build the CEL environment: {e}"))?;
    Ok(Arc::new(env))
}

/// The environment of MutatingAdmissionPolicy expressions, or why it could not be built.
fn admission_environment() -> Result<&'static Arc<Env>, String> {
    ADMISSION_ENV.as_ref().map_err(Clone::clone)
}

impl ExprError {
    /// What would fix the error, when that is known.
    pub fn hint(&self) -> Option<&str> {
        match self {
            ExprError::Check(error) => error.hint.as_deref(),
            _ => None,
        }
    }
}

/// The shared environment, or why it could not be built.
fn environment() -> Result<&'static Arc<Env>, ExprError> {
    ENV.as_ref().map_err(|e| ExprError::Compile(e.clone()))
}

/// A compiled CEL expression.
pub struct Expression {
    source: String,
    /// The program's expression with its parts that read only `params` folded
    /// ([`fold`]), its chains below tree bindings followed by the scope ([`paths`]) and
    /// its comprehensions metered ([`cost::meter`]): what is evaluated.
    metered: cel::IdedExpr,
    /// The values of the folded parts.
    folded: fold::Folded,
    /// The chains below tree bindings the scope follows itself ([`paths`]).
    paths: paths::Paths,
    needs: Needs,
    warnings: Vec<lint::ExprWarning>,
    env: Arc<Env>,
}

impl fmt::Debug for Expression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Expression")
            .field("source", &self.source)
            .field("needs", &self.needs)
            .finish_non_exhaustive()
    }
}

impl Expression {
    /// Parses `source` and checks that every name it refers to exists, in the
    /// environment or among what the policy `declarations` declares.
    pub fn compile(source: &str, declarations: &Declarations<'_>) -> Result<Expression, ExprError> {
        let env = environment()?;
        if source.trim().is_empty() {
            return Err(ExprError::Compile("the expression is empty".to_string()));
        }
        limits::check_source(source).map_err(ExprError::Compile)?;
        let program = env
            .compile(source)
            .map_err(|e| ExprError::Compile(e.to_string()))?;
        limits::check(program.expression()).map_err(ExprError::Compile)?;
        check::check(program.expression(), env, declarations).map_err(ExprError::Check)?;
        if let Some(error) = type_errors::first(program.expression(), declarations.object) {
            return Err(ExprError::Check(check::CheckError {
                message: error.message,
                hint: Some(error.hint),
            }));
        }
        let (folded_expression, folded) =
            fold_params(program.expression(), declarations.params, env);
        let (followed_expression, paths) = paths::rewrite(&folded_expression, &folded);
        let mut warnings = lint::check(program.expression());
        warnings.extend(
            folded
                .failures()
                .iter()
                .map(|reason| lint::fails_at_load(reason)),
        );
        Ok(Expression {
            source: source.to_string(),
            warnings,
            needs: Needs::of(&program),
            metered: cost::meter(&followed_expression),
            folded,
            paths,
            env: Arc::clone(env),
        })
    }

    /// How many parts of the expression were evaluated at load ([`fold`]).
    #[cfg(test)]
    pub(crate) fn folded_parts(&self) -> usize {
        self.folded.count()
    }

    /// How many chains below tree bindings the scope follows itself ([`paths`]).
    #[cfg(test)]
    pub(crate) fn followed_chains(&self) -> usize {
        self.paths.count()
    }

    /// How many folded parts are a function's argument converted to JSON at load.
    #[cfg(test)]
    pub(crate) fn prepared_json_arguments(&self) -> usize {
        self.folded.json_arguments()
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn needs(&self) -> Needs {
        self.needs
    }

    /// Constructs that compile but are likely to fail at admission.
    pub fn warnings(&self) -> &[lint::ExprWarning] {
        &self.warnings
    }
}

/// The JSON values an evaluation sees.
#[derive(Debug, Clone, Copy)]
pub struct Bindings<'a> {
    pub object: &'a Tree<'a>,
    pub old_object: Option<&'a Tree<'a>>,
    /// `None` (CEL `null`) for a cluster-scoped request.
    pub namespace_object: Option<&'a Tree<'a>>,
    pub request: &'a Tree<'a>,
    pub params: &'a Tree<'a>,
}

/// `element`, a view of the element's tree like the other tree bindings, and `index`.
type Element<'a> = (view::Node<'a>, Box<dyn Val + 'static>);

/// One policy evaluation's CEL context: built once, used for all of the policy's expressions.
pub struct Scope<'a> {
    vars: Vars<'a>,
}

/// A binding's view ([`view::Node`]), made on first use.
type Lazy<'a> = OnceLock<view::Node<'a>>;

/// The scope's variables, as the CEL interpreter looks them up. A fresh
/// `cel::Context` per evaluation borrows this, which costs one `Arc` clone and
/// lets the views, and the levels of JSON they convert, live as long as the scope.
struct Vars<'a> {
    bindings: Bindings<'a>,
    object: Lazy<'a>,
    old_object: Lazy<'a>,
    namespace_object: Lazy<'a>,
    request: Lazy<'a>,
    params: Lazy<'a>,
    variables: CelMap<'static>,
    /// The first variable that could not be converted, reported by every
    /// later evaluation that refers to `variables`.
    variables_error: Option<ExprError>,
    /// `element` and `index`, while a `foreach` mutation's element is evaluated.
    element: Option<Element<'a>>,
}

impl<'a> Scope<'a> {
    /// A scope over `bindings`. Each binding is viewed on first use.
    pub fn new(bindings: Bindings<'a>) -> Scope<'a> {
        Scope {
            vars: Vars {
                bindings,
                object: OnceLock::new(),
                old_object: OnceLock::new(),
                namespace_object: OnceLock::new(),
                request: OnceLock::new(),
                params: OnceLock::new(),
                variables: CelMap::from(HashMap::new()),
                variables_error: None,
                element: None,
            },
        }
    }

    /// Makes `variables.NAME` available to later evaluations.
    pub fn set_variable(&mut self, name: &str, value: &Tree<'_>) {
        let value = match convert::json_to_owned_val(value) {
            Ok(value) => value,
            Err(error) => {
                let error = ExprError::Evaluate(format!("variable '{name}': {error}"));
                self.vars.variables_error.get_or_insert(error);
                return;
            }
        };
        let empty = CelMap::from(HashMap::new());
        let mut map = std::mem::replace(&mut self.vars.variables, empty).into_inner();
        map.insert(CelMapKey::String(CelString::from(name.to_owned())), value);
        self.vars.variables = CelMap::from(map);
    }

    /// Binds `element` and `index` for the evaluations that follow, or unbinds them. The
    /// element is viewed where it is in the object, as `object` is: read in place and
    /// converted a level at a time only as far as CEL looks into it.
    pub fn set_element(&mut self, element: Option<(&'a Tree<'a>, i64)>) {
        self.vars.element = element.map(|(value, index)| {
            let index: Box<dyn Val + 'static> = Box::new(cel::common::types::CelInt::from(index));
            (view::Node::of(value), index)
        });
    }

    pub fn evaluate(&self, expression: &Expression) -> Result<Tree<'static>, ExprError> {
        self.vars.prepare(expression.needs)?;
        let resolver = Resolver {
            vars: &self.vars,
            folded: &expression.folded,
            paths: &expression.paths,
        };
        let mut context = Context::with_env(Arc::clone(&expression.env));
        context.set_variable_resolver(&resolver);
        let (result, exhausted) = cost::with_budget(|| {
            cel::Value::resolve_val(&expression.metered, &context)
                .map_err(|e| ExprError::Evaluate(e.to_string()))
                .and_then(|value| convert::val_to_json(value.as_ref()))
        });
        if exhausted {
            return Err(ExprError::Evaluate(cost::exhausted_message()));
        }
        result
    }

    pub fn evaluate_bool(&self, expression: &Expression) -> Result<bool, ExprError> {
        match self.evaluate(expression)? {
            Tree::Bool(b) => Ok(b),
            other => Err(ExprError::ResultType {
                expected: "bool",
                got: other.type_name(),
            }),
        }
    }
}

impl<'a> Vars<'a> {
    /// Fails with the error of a variable `needs` names that could not be converted: one
    /// of `variables`. The tree bindings and `element` are viewed, which cannot fail.
    fn prepare(&self, needs: Needs) -> Result<(), ExprError> {
        match &self.variables_error {
            Some(error) if needs.variables => Err(error.clone()),
            _ => Ok(()),
        }
    }

    /// The binding's view, made on first use.
    fn node<'b>(cell: &'b Lazy<'a>, json: Option<&'a Tree<'a>>) -> &'b view::Node<'a> {
        cell.get_or_init(|| match json {
            Some(json) => view::Node::of(json),
            // An absent binding (`oldObject` at CREATE) is CEL `null`.
            None => view::Node::Scalar(Box::new(CelNull)),
        })
    }

    /// The view of a tree binding; `None` for `element` outside a `foreach`.
    fn root(&self, root: paths::Root) -> Option<&view::Node<'a>> {
        let bindings = &self.bindings;
        Some(match root {
            paths::Root::Object => Self::node(&self.object, Some(bindings.object)),
            paths::Root::OldObject => Self::node(&self.old_object, bindings.old_object),
            paths::Root::NamespaceObject => {
                Self::node(&self.namespace_object, bindings.namespace_object)
            }
            paths::Root::Request => Self::node(&self.request, Some(bindings.request)),
            paths::Root::Params => Self::node(&self.params, Some(bindings.params)),
            paths::Root::Element => &self.element.as_ref()?.0,
        })
    }
}

/// What one evaluation's names resolve to: the scope's variables, the values of the
/// expression's folded parts, and its followed chains.
struct Resolver<'s, 'a> {
    vars: &'s Vars<'a>,
    folded: &'s fold::Folded,
    paths: &'s paths::Paths,
}

impl VariableResolver for Resolver<'_, '_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        if !variable.starts_with('@') {
            return self.vars.resolve(variable);
        }
        if let Some(value) = self.folded.get(variable) {
            return Some(CowVal::Borrowed(value));
        }
        self.paths.answer(variable, |root| self.vars.root(root))
    }
}

/// `root` with its parts that read only `params` evaluated ([`fold`]), each in a scope
/// that binds nothing else and metered as a review's evaluation is.
fn fold_params(
    root: &cel::IdedExpr,
    params: &Tree<'static>,
    env: &Arc<Env>,
) -> (cel::IdedExpr, fold::Folded) {
    let nothing = Tree::Null;
    let scope = Scope::new(Bindings {
        object: &nothing,
        old_object: None,
        namespace_object: None,
        request: &nothing,
        params,
    });
    let unfolded = fold::Folded::default();
    let unfollowed = paths::Paths::default();
    let resolver = Resolver {
        vars: &scope.vars,
        folded: &unfolded,
        paths: &unfollowed,
    };
    let evaluate = |part: &cel::IdedExpr| {
        let metered = cost::meter(part);
        let mut context = Context::with_env(Arc::clone(env));
        context.set_variable_resolver(&resolver);
        // The load must not fall over where a review would be isolated: a panic in the
        // interpreter leaves the part to the reviews, each of which it costs one answer.
        let evaluated = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            cost::with_budget(|| match cel::Value::resolve_val(&metered, &context) {
                Ok(value) => fold::own(value.as_ref()).ok_or(fold::Unfolded::Kept),
                Err(error) => Err(fold::Unfolded::Failed(error.to_string())),
            })
        }));
        let Ok((value, exhausted)) = evaluated else {
            return Err(fold::Unfolded::Kept);
        };
        if exhausted {
            return Err(fold::Unfolded::Failed(cost::exhausted_message()));
        }
        value
    };
    fold::fold(root, &["params"], &evaluate)
}

impl Vars<'_> {
    /// Besides the variables, answers a field path below a JSON binding,
    /// `object.metadata.labels`, which the interpreter asks for before selecting the
    /// fields one by one.
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        let mut segments = variable.split('.');
        let name = segments.next()?;
        if let Some(root) = paths::Root::named(name) {
            let node = self.root(root)?.path(segments)?;
            return Some(CowVal::Borrowed(node.as_val()));
        }
        if name == "variables" {
            return self.variable(segments);
        }
        match variable {
            "index" => {
                let (_, index) = self.element.as_ref()?;
                Some(CowVal::Borrowed(index.as_ref()))
            }
            _ => None,
        }
    }

    /// `variables`, or `variables.NAME` as a whole name: a name not there, or a longer
    /// path, is left to the shorter names the interpreter asks for next.
    fn variable<'b, 'p>(
        &'b self,
        mut segments: impl Iterator<Item = &'p str>,
    ) -> Option<CowVal<'b, 'b>> {
        let Some(name) = segments.next() else {
            return Some(CowVal::Borrowed(&self.variables));
        };
        if segments.next().is_some() {
            return None;
        }
        let key = CelString::from(name);
        cel::common::traits::Indexer::get(&self.variables, &key).ok()
    }
}

/// Evaluates `source` with every binding empty and no declarations: the tests of the
/// function libraries, which need no object. The result is a `serde_json::Value`, which
/// those tests write their expectations in.
#[cfg(test)]
pub(crate) fn evaluate_unbound(source: &str) -> Result<serde_json::Value, ExprError> {
    let empty = Tree::from(crate::tree::Map::new());
    let bindings = Bindings {
        object: &empty,
        old_object: None,
        namespace_object: None,
        request: &empty,
        params: &empty,
    };
    let expression = Expression::compile(source, &Declarations::NONE)?;
    Scope::new(bindings)
        .evaluate(&expression)
        .map(|value| value.to_value())
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod view_tests;

#[cfg(test)]
#[path = "extensions_tests.rs"]
mod extensions_tests;

#[cfg(test)]
#[path = "admission_tests.rs"]
mod admission_tests;

#[cfg(test)]
#[path = "admission_eval_tests.rs"]
mod admission_eval_tests;
