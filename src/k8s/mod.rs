//! Kubernetes value formats used by the CEL helpers.
