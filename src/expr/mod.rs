//! CEL expressions and `{{ }}` templates: compiled once at policy load, evaluated per request.
//!
//! (Interface placeholder: the implementation lands with the CEL work.)

pub mod template;

use serde_json::Value;

/// Why an expression could not be compiled or evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExprError {
    #[error("invalid CEL expression: {0}")]
    Compile(String),
    #[error("{0}")]
    Evaluate(String),
    #[error("expected a {expected} result, got {got}")]
    ResultType { expected: &'static str, got: String },
}

/// The variables an expression or template refers to, so a scope converts only those.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    pub object: bool,
    pub old_object: bool,
    pub request: bool,
    pub params: bool,
    pub variables: bool,
}

impl Needs {
    pub fn union(self, other: Needs) -> Needs {
        Needs {
            object: self.object || other.object,
            old_object: self.old_object || other.old_object,
            request: self.request || other.request,
            params: self.params || other.params,
            variables: self.variables || other.variables,
        }
    }
}

/// A compiled CEL expression.
#[derive(Debug)]
pub struct Expression {
    source: String,
}

impl Expression {
    pub fn compile(source: &str) -> Result<Expression, ExprError> {
        Ok(Expression {
            source: source.to_string(),
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn needs(&self) -> Needs {
        Needs::default()
    }
}

/// The JSON values an evaluation sees.
#[derive(Debug, Clone, Copy)]
pub struct Bindings<'a> {
    pub object: &'a Value,
    pub old_object: Option<&'a Value>,
    pub request: &'a Value,
    pub params: &'a Value,
}

/// One policy evaluation's CEL context: built once, used for all of the policy's expressions.
pub struct Scope<'a> {
    bindings: Bindings<'a>,
}

impl<'a> Scope<'a> {
    pub fn new(bindings: Bindings<'a>, _needs: Needs) -> Scope<'a> {
        Scope { bindings }
    }

    /// Makes `variables.NAME` available to later evaluations.
    pub fn set_variable(&mut self, _name: &str, _value: Value) {}

    pub fn evaluate(&self, expression: &Expression) -> Result<Value, ExprError> {
        let _ = self.bindings;
        Err(ExprError::Evaluate(format!(
            "CEL is not available yet: {}",
            expression.source()
        )))
    }

    pub fn evaluate_bool(&self, expression: &Expression) -> Result<bool, ExprError> {
        match self.evaluate(expression)? {
            Value::Bool(b) => Ok(b),
            other => Err(ExprError::ResultType {
                expected: "bool",
                got: other.to_string(),
            }),
        }
    }
}
