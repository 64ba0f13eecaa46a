//! The object under evaluation and its kept versions: the request's root, then the
//! root after each policy that changed it.

use crate::k8s::admission_request::AdmissionRequest;
use crate::tree::{self, Tree};

/// What a request's policies see as `object`. DELETE carries only `oldObject`:
/// policies match on it and read it, and cannot change it. This type is where the
/// engine tells the two apart; `run_policy` stops before writing for a read-only one.
pub enum Subject<'a, 't> {
    /// The request's object, changed by replacing its root.
    Changeable(&'a mut Tree<'t>),
    /// At DELETE, the old object.
    ReadOnly(&'a Tree<'t>),
}

impl<'a, 't> Subject<'a, 't> {
    /// The request's [`AdmissionRequest::subject`]: its object, changed through `object`
    /// (the evaluation's own handle of the request's root), or at DELETE its old object,
    /// read-only. `None` when the request carries neither.
    pub fn of(object: Option<&'a mut Tree<'t>>, request: &'a AdmissionRequest<'t>) -> Option<Self> {
        match object {
            Some(object) => Some(Subject::Changeable(object)),
            None => request.subject().map(Subject::ReadOnly),
        }
    }

    /// The object as it is now.
    pub fn view(&self) -> &Tree<'t> {
        match self {
            Subject::Changeable(object) => object,
            Subject::ReadOnly(object) => object,
        }
    }
}

/// The object under evaluation, and its root at each version: as the request has it,
/// then after each policy that changed it. An edit copies only the path to what it
/// changes, so a kept root holds that version of the object at the cost of a reference
/// count, and every subtree no policy wrote is shared by all of them.
pub struct EditedObject<'a, 't> {
    pub subject: Subject<'a, 't>,
    /// Never empty: the request's root comes first.
    versions: Vec<Tree<'t>>,
}

impl<'a, 't> EditedObject<'a, 't> {
    pub fn new(subject: Subject<'a, 't>) -> Self {
        let versions = vec![subject.view().clone()];
        EditedObject { subject, versions }
    }

    /// The number of kept versions after the request's.
    pub fn version(&self) -> usize {
        self.versions.len() - 1
    }

    /// The object at `version` (the object as it is now, past the last kept one).
    pub fn at(&self, version: usize) -> &Tree<'t> {
        self.versions
            .get(version)
            .unwrap_or_else(|| self.subject.view())
    }

    /// Keeps the object as it is now as the next version.
    pub fn keep_version(&mut self) {
        let now = self.subject.view().clone();
        self.versions.push(now);
    }

    /// Makes `object` the object as it is now (a MutatingAdmissionPolicy's mutation builds
    /// the next object whole). Nothing happens to a read-only subject.
    pub fn replace(&mut self, object: Tree<'t>) {
        if let Subject::Changeable(current) = &mut self.subject {
            **current = object;
        }
    }

    /// Undoes every write the policies made, for a denied request.
    pub fn rollback_all(&mut self) {
        let original = self.at(0).clone();
        if let Subject::Changeable(object) = &mut self.subject {
            **object = original;
        }
    }

    /// The patch from the request's object to the object as the policies left it.
    pub fn patch(&self) -> tree::Patch<'t> {
        tree::diff(self.at(0), self.subject.view())
    }
}
