//! Lint findings: what is wrong, where (file, line, policy, field) and what would fix it.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    /// Something worth knowing that is not a problem: it never fails lint, even with
    /// `--strict` (a kind graft has no schema for).
    Note,
}

/// One problem in a policy source, printed as `file[:line]: policy NAME: field.path: message`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub severity: Severity,
    pub file: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// Whether `policy` names a MutatingAdmissionPolicyBinding rather than a policy.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub binding: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Finding {
    pub fn error(file: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Finding {
            severity: Severity::Error,
            file: file.into(),
            line: None,
            policy: None,
            binding: false,
            field: None,
            message: message.into(),
            hint: None,
        }
    }

    pub fn warning(file: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Finding {
            severity: Severity::Warning,
            ..Finding::error(file, message)
        }
    }

    pub fn note(file: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Finding {
            severity: Severity::Note,
            ..Finding::error(file, message)
        }
    }

    pub fn at_line(mut self, line: Option<usize>) -> Self {
        self.line = line;
        self
    }

    pub fn in_policy(mut self, policy: impl Into<String>) -> Self {
        let policy = policy.into();
        if !policy.is_empty() {
            self.policy = Some(policy);
        }
        self
    }

    /// The finding is about the MutatingAdmissionPolicyBinding `binding`.
    pub fn in_binding(self, binding: impl Into<String>) -> Self {
        let mut finding = self.in_policy(binding);
        finding.binding = finding.policy.is_some();
        finding
    }

    pub fn at_field(mut self, field: impl Into<String>) -> Self {
        let field = field.into();
        if !field.is_empty() {
            self.field = Some(field);
        }
        self
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        match self.severity {
            Severity::Error => {}
            Severity::Warning => write!(f, ": warning")?,
            Severity::Note => write!(f, ": note")?,
        }
        if let Some(policy) = &self.policy {
            let what = if self.binding { "binding" } else { "policy" };
            write!(f, ": {what} {policy}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, " (hint: {hint})")?;
        }
        Ok(())
    }
}

/// The findings of a policy set that cannot be loaded: at least one is an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} problem(s) in the policy set; first: {}", .0.len(), .0.first().map(ToString::to_string).unwrap_or_default())]
pub struct Findings(pub Vec<Finding>);
