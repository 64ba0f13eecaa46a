//! The immutable, indexed snapshot of every compiled policy.

use std::collections::HashMap;
use std::sync::Arc;

use super::compiled::{CompiledPolicy, Operation};

/// What of a review a policy can see beyond the object's usual fields.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reads {
    /// The object's `metadata.managedFields`.
    pub managed_fields: bool,
    /// `oldObject`, through CEL.
    pub old_object: bool,
    /// The data of the request's namespace (`namespaceSelector`, `namespaceObject`).
    pub namespace: bool,
}

/// Candidate lists for one (resource, subresource), one per operation.
type ByOperation = [Vec<u32>; 4];

/// Every policy in evaluation order, plus an index on (resource, subresource, operation)
/// so a request only looks at the policies that can match it.
#[derive(Debug, Default)]
pub struct PolicySet {
    policies: Vec<Arc<CompiledPolicy>>,
    /// Per policy, what of a review it can see beyond the object's usual fields.
    reads: Vec<Reads>,
    /// resource -> subresource ("" for none) -> operation -> policy positions, ascending.
    index: HashMap<String, HashMap<String, ByOperation>>,
    /// Policies whose rules use a wildcard resource or subresource, per operation.
    wildcard: ByOperation,
    /// Whether any policy needs namespace data, computed at load.
    needs_namespaces: bool,
    revision: String,
}

fn slot(operation: Operation) -> usize {
    match operation {
        Operation::Create => 0,
        Operation::Update => 1,
        Operation::Delete => 2,
        Operation::Connect => 3,
    }
}

impl PolicySet {
    pub fn empty() -> PolicySet {
        PolicySet::new(Vec::new(), super::revision_of(&[]))
    }

    /// Sorts by (order, name) and builds the index.
    pub fn new(mut policies: Vec<CompiledPolicy>, revision: String) -> PolicySet {
        policies.sort_by(|a, b| a.order.cmp(&b.order).then_with(|| a.name.cmp(&b.name)));
        let policies: Vec<Arc<CompiledPolicy>> = policies.into_iter().map(Arc::new).collect();
        let mut index: HashMap<String, HashMap<String, ByOperation>> = HashMap::new();
        let mut wildcard = ByOperation::default();
        for (position, policy) in policies.iter().enumerate() {
            let position = position as u32;
            let operations = if policy.matcher.operations.is_empty() {
                super::compiled::Operations::ALL
            } else {
                policy.matcher.operations
            };
            for rule in &policy.matcher.resources {
                for operation in operations.iter() {
                    let list = if rule.is_wildcard() {
                        &mut wildcard[slot(operation)]
                    } else {
                        let by_sub = index.entry(rule.resource.clone()).or_default();
                        let sub = rule.subresource.clone().unwrap_or_default();
                        &mut by_sub.entry(sub).or_default()[slot(operation)]
                    };
                    if list.last() != Some(&position) {
                        list.push(position);
                    }
                }
            }
            if policy.pod_controllers {
                for controller in &crate::k8s::pod_controllers::POD_CONTROLLERS {
                    let by_sub = index.entry(controller.resource.to_string()).or_default();
                    for operation in operations.iter() {
                        let list = &mut by_sub.entry(String::new()).or_default()[slot(operation)];
                        if list.last() != Some(&position) {
                            list.push(position);
                        }
                    }
                }
            }
        }
        // Each exact entry also holds the wildcard policies, merged in order, so a
        // lookup is one slice.
        for by_sub in index.values_mut() {
            for lists in by_sub.values_mut() {
                for (list, extra) in lists.iter_mut().zip(wildcard.iter()) {
                    list.extend_from_slice(extra);
                    list.sort_unstable();
                    list.dedup();
                }
            }
        }
        let reads = policies
            .iter()
            .map(|policy| Reads {
                managed_fields: policy.sees_managed_fields(),
                old_object: policy.reads_old_object(),
                namespace: policy.needs_namespace(),
            })
            .collect::<Vec<Reads>>();
        let needs_namespaces = reads.iter().any(|reads| reads.namespace);
        PolicySet {
            policies,
            reads,
            index,
            wildcard,
            needs_namespaces,
            revision,
        }
    }

    /// A content hash of the sources: equal for identical policy files.
    pub fn revision(&self) -> &str {
        &self.revision
    }

    /// Whether any policy uses a `namespaceSelector` (in `match` or `exclude`) or reads
    /// `namespaceObject`: only then does a server need namespace data at all.
    pub fn needs_namespaces(&self) -> bool {
        self.needs_namespaces
    }

    pub fn len(&self) -> usize {
        self.policies.len()
    }

    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// Every policy, in evaluation order.
    pub fn policies(&self) -> impl Iterator<Item = &CompiledPolicy> {
        self.policies.iter().map(AsRef::as_ref)
    }

    /// The policies whose resource rules can match, in evaluation order.
    pub fn candidates(
        &self,
        resource: &str,
        subresource: &str,
        operation: Operation,
    ) -> impl Iterator<Item = &CompiledPolicy> {
        self.positions(resource, subresource, operation)
            .iter()
            .filter_map(|&position| self.policies.get(position as usize).map(AsRef::as_ref))
    }

    /// What the candidate policies for a request can see, together; `None` when no
    /// policy is a candidate.
    pub fn candidate_reads(
        &self,
        resource: &str,
        subresource: &str,
        operation: Operation,
    ) -> Option<Reads> {
        let positions = self.positions(resource, subresource, operation);
        if positions.is_empty() {
            return None;
        }
        let mut all = Reads::default();
        for reads in positions
            .iter()
            .filter_map(|&position| self.reads.get(position as usize))
        {
            all.managed_fields |= reads.managed_fields;
            all.old_object |= reads.old_object;
            all.namespace |= reads.namespace;
        }
        Some(all)
    }

    fn positions(&self, resource: &str, subresource: &str, operation: Operation) -> &[u32] {
        self.index
            .get(resource)
            .and_then(|by_sub| by_sub.get(subresource))
            .map_or(&self.wildcard[slot(operation)], |lists| {
                &lists[slot(operation)]
            })
    }
}
