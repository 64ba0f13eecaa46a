//! Kubernetes label selectors: a requirement on one label, with LabelSelector
//! semantics, the one checker matching, parameters and `graft explain` use.

/// A compiled Kubernetes LabelSelector requirement (`matchLabels` entries are `In`
/// with one value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl Requirement {
    /// The label (or annotation) key the requirement reads.
    pub fn key(&self) -> &str {
        match self {
            Requirement::In(key, _)
            | Requirement::NotIn(key, _)
            | Requirement::Exists(key)
            | Requirement::DoesNotExist(key) => key,
        }
    }

    /// Whether the requirement holds for the key's value, `None` when the key is absent:
    /// Kubernetes' LabelSelector semantics, the one checker of matching and `graft explain`.
    pub fn holds(&self, value: Option<&str>) -> bool {
        match self {
            Requirement::In(_, values) => value.is_some_and(|v| values.iter().any(|x| x == v)),
            Requirement::NotIn(_, values) => value.is_none_or(|v| values.iter().all(|x| x != v)),
            Requirement::Exists(_) => value.is_some(),
            Requirement::DoesNotExist(_) => value.is_none(),
        }
    }
}
