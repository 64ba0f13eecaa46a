//! The immutable, indexed snapshot of every compiled policy.

use std::collections::HashMap;
use std::sync::Arc;

use super::admission_policy::compiled::CompiledAdmissionPolicy;
use super::compiled::{CompiledPolicy, LabelGate, Operation, Requirement};
use crate::expr::RequestFields;

/// What of a review beyond the object a policy needs looked up or built for it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reads {
    /// The data of the request's namespace (`namespaceSelector`, `namespaceObject`).
    pub namespace: bool,
    /// The fields of CEL's `request` its expressions read.
    pub request_fields: RequestFields,
}

impl Reads {
    fn union(self, other: Reads) -> Reads {
        Reads {
            namespace: self.namespace || other.namespace,
            request_fields: self.request_fields.union(other.request_fields),
        }
    }
}

/// Candidate lists for one (resource, subresource), one per operation.
type ByOperation = [Vec<u32>; 4];

/// The candidates of one (resource, subresource, operation), split by the namespaces
/// they name: a request only walks the policies that can match its namespace.
#[derive(Debug, Default)]
struct Listed {
    /// The policies for any namespace (no plain names).
    anywhere: Candidates,
    /// The policies whose `match.namespaces` are plain names, by name.
    by_namespace: HashMap<String, Candidates>,
}

/// Policies by position, ascending, and what they can see together (computed at load,
/// so a request asks it of two lists, not of each policy).
#[derive(Debug, Default)]
struct Candidates {
    positions: Vec<u32>,
    reads: Reads,
}

impl Candidates {
    fn push(&mut self, position: u32, reads: Reads) {
        if self.positions.last() != Some(&position) {
            self.positions.push(position);
            self.reads = self.reads.union(reads);
        }
    }
}

impl Listed {
    fn split(positions: &[u32], namespaces: &[Option<Box<[String]>>], reads: &[Reads]) -> Listed {
        let mut listed = Listed::default();
        for &position in positions {
            let policy_reads = reads.get(position as usize).copied().unwrap_or_default();
            match namespaces.get(position as usize) {
                Some(Some(names)) => {
                    for name in names.iter() {
                        let list = listed.by_namespace.entry(name.clone()).or_default();
                        list.push(position, policy_reads);
                    }
                }
                _ => listed.anywhere.push(position, policy_reads),
            }
        }
        listed
    }

    /// The policies for `namespace` alone.
    fn named(&self, namespace: &str) -> Option<&Candidates> {
        if self.by_namespace.is_empty() {
            return None;
        }
        self.by_namespace.get(namespace)
    }

    /// What the candidates in `namespace` can see together; `None` when there are none.
    fn reads(&self, namespace: &str) -> Option<Reads> {
        [Some(&self.anywhere), self.named(namespace)]
            .into_iter()
            .flatten()
            .filter(|candidates| !candidates.positions.is_empty())
            .map(|candidates| candidates.reads)
            .reduce(Reads::union)
    }
}

fn split(
    lists: &ByOperation,
    namespaces: &[Option<Box<[String]>>],
    reads: &[Reads],
) -> [Listed; 4] {
    lists
        .each_ref()
        .map(|list| Listed::split(list, namespaces, reads))
}

/// Two ascending lists of positions, merged.
struct Merged<'s> {
    anywhere: &'s [u32],
    named: &'s [u32],
}

impl Iterator for Merged<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        // Most requests are in a namespace no policy names: one list, nothing to merge.
        if self.named.is_empty() {
            let (&first, rest) = self.anywhere.split_first()?;
            self.anywhere = rest;
            return Some(first);
        }
        let side = match (self.anywhere.first(), self.named.first()) {
            (Some(a), Some(n)) if n < a => &mut self.named,
            (Some(_), _) => &mut self.anywhere,
            (None, _) => &mut self.named,
        };
        let (&first, rest) = side.split_first()?;
        *side = rest;
        Some(first)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.anywhere.len() + self.named.len();
        (left, Some(left))
    }
}

/// Which policies a request is for: asked once per review, from the fields that route
/// it (resource, subresource, operation, namespace), and passed from the parse to the
/// namespace lookup to the evaluation.
#[derive(Debug, Clone, Copy)]
pub struct Route<'s> {
    pub operation: Operation,
    /// The MutationPolicies for any namespace, and those naming the request's.
    anywhere: &'s [u32],
    named: &'s [u32],
    /// What those candidates read, together.
    pub reads: Reads,
    /// Whether a MutatingAdmissionPolicy's rules may match the request (its resource and
    /// operation; selectors and conditions are left to the evaluation).
    pub admission: bool,
}

impl<'s> Route<'s> {
    /// The candidate MutationPolicies, in evaluation order.
    pub fn candidates(&self, set: &'s PolicySet) -> impl Iterator<Item = &'s CompiledPolicy> + 's {
        let merged = Merged {
            anywhere: self.anywhere,
            named: self.named,
        };
        merged.filter_map(move |position| set.policies.get(position as usize).map(AsRef::as_ref))
    }

    /// Whether a MutationPolicy is a candidate.
    pub fn has_candidates(&self) -> bool {
        !(self.anywhere.is_empty() && self.named.is_empty())
    }
}

/// Every policy in evaluation order, plus an index on (resource, subresource, operation)
/// and the namespaces a policy names, so a request only looks at the policies that can
/// match it.
#[derive(Debug, Default)]
pub struct PolicySet {
    policies: Vec<Arc<CompiledPolicy>>,
    /// resource -> subresource ("" for none) -> operation -> candidates. Most of a large
    /// set names the namespaces of its team: the lists keep those apart by namespace.
    index: HashMap<String, HashMap<String, [Listed; 4]>>,
    /// Policies whose rules use a wildcard resource or subresource, per operation.
    wildcard: [Listed; 4],
    /// Whether any policy needs namespace data, computed at load.
    needs_namespaces: bool,
    /// The MutatingAdmissionPolicies, in name order, each with its bindings.
    admission: Vec<Arc<CompiledAdmissionPolicy>>,
    revision: String,
}

/// Gives each policy its label gate, numbering the keys in the order they first appear.
fn number_label_gates(policies: &mut [CompiledPolicy]) {
    let mut keys: HashMap<String, u32> = HashMap::new();
    for policy in policies {
        policy.label_gate = policy
            .matcher
            .labels
            .iter()
            .enumerate()
            .find_map(|(requirement, r)| match r {
                Requirement::In(key, _) => Some((requirement, key)),
                _ => None,
            })
            .map(|(requirement, key)| {
                let next = u32::try_from(keys.len()).unwrap_or(u32::MAX);
                LabelGate {
                    key: *keys.entry(key.clone()).or_insert(next),
                    requirement,
                }
            });
    }
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
        PolicySet::new(Vec::new(), Vec::new(), super::revision_of(&[]))
    }

    /// Sorts graft's policies by (order, name) and builds their index; `admission` are
    /// the MutatingAdmissionPolicies, in name order.
    pub fn new(
        mut policies: Vec<CompiledPolicy>,
        admission: Vec<CompiledAdmissionPolicy>,
        revision: String,
    ) -> PolicySet {
        policies.sort_by(|a, b| a.order.cmp(&b.order).then_with(|| a.name.cmp(&b.name)));
        number_label_gates(&mut policies);
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
                namespace: policy.needs_namespace(),
                request_fields: policy.needs.request_fields,
            })
            .collect::<Vec<Reads>>();
        // The apiserver reads the namespace of every request a MutatingAdmissionPolicy
        // runs for (`namespaceObject`, and a missing namespace is an error).
        let needs_namespaces = reads.iter().any(|reads| reads.namespace)
            || admission.iter().any(|policy| !policy.bindings.is_empty());
        // Per policy, the namespaces its `match.namespaces` names when they are all plain
        // names (no `*`); `None` when it matches any namespace or uses a pattern.
        let namespaces: Vec<Option<Box<[String]>>> = policies
            .iter()
            .map(|policy| {
                let patterns = &policy.matcher.namespaces;
                let plain = !patterns.is_empty() && patterns.iter().all(|p| !p.0.contains('*'));
                plain.then(|| patterns.iter().map(|p| p.0.clone()).collect())
            })
            .collect();
        let index = index
            .into_iter()
            .map(|(resource, by_sub)| {
                let by_sub = by_sub
                    .into_iter()
                    .map(|(sub, lists)| (sub, split(&lists, &namespaces, &reads)))
                    .collect();
                (resource, by_sub)
            })
            .collect();
        PolicySet {
            policies,
            index,
            wildcard: split(&wildcard, &namespaces, &reads),
            needs_namespaces,
            admission: admission.into_iter().map(Arc::new).collect(),
            revision,
        }
    }

    /// The MutatingAdmissionPolicies, in the order graft runs them: by name.
    pub fn admission_policies(&self) -> &[Arc<CompiledAdmissionPolicy>] {
        &self.admission
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

    /// How many policies the set has, of both dialects.
    pub fn len(&self) -> usize {
        self.policies.len() + self.admission.len()
    }

    pub fn is_empty(&self) -> bool {
        self.policies.is_empty() && self.admission.is_empty()
    }

    /// Every policy, in evaluation order.
    pub fn policies(&self) -> impl Iterator<Item = &CompiledPolicy> {
        self.policies.iter().map(AsRef::as_ref)
    }

    /// The route of a request: `None` when no policy of either dialect can be for it, so
    /// that such a review builds nothing and looks nothing up.
    pub fn route(
        &self,
        request: &crate::k8s::admission_request::AdmissionRequest<'_>,
    ) -> Option<Route<'_>> {
        let operation = Operation::parse(&request.operation)?;
        let resource = &request.resource;
        let subresource = request.sub_resource.as_deref().unwrap_or("");
        let namespace = request.namespace.as_deref().unwrap_or("");
        let listed = self.listed(&resource.resource, subresource, operation);
        let named = listed
            .named(namespace)
            .map_or(&[][..], |named| named.positions.as_slice());
        let admission = operation != Operation::Delete
            && self.admission.iter().any(|policy| {
                !policy.bindings.is_empty()
                    && policy.match_constraints.may_match(
                        &resource.group,
                        &resource.version,
                        &resource.resource,
                        subresource,
                        operation,
                    )
            });
        let reads = listed.reads(namespace).unwrap_or_default();
        let route = Route {
            operation,
            anywhere: &listed.anywhere.positions,
            named,
            reads: Reads {
                // A MutatingAdmissionPolicy reads the namespace of every request it runs for.
                namespace: reads.namespace || admission,
                request_fields: reads.request_fields,
            },
            admission,
        };
        (route.has_candidates() || admission).then_some(route)
    }

    /// The candidate lists of a (resource, subresource, operation).
    fn listed(&self, resource: &str, subresource: &str, operation: Operation) -> &Listed {
        self.index
            .get(resource)
            .and_then(|by_sub| by_sub.get(subresource))
            .map_or(&self.wildcard[slot(operation)], |lists| {
                &lists[slot(operation)]
            })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::k8s::admission_request::AdmissionRequest;

    fn policy(name: &str, namespaces: &str) -> String {
        format!(
            "apiVersion: graft.dev/v1alpha1\nkind: MutationPolicy\nmetadata:\n  name: {name}\nspec:\n  match:\n    resources: [pods]\n    namespaces: {namespaces}\n  mutations:\n    - set:\n        path: $.metadata.labels.seen\n        value: \"yes\"\n"
        )
    }

    /// A CREATE of `resource` in `namespace` ("" for none).
    fn request(resource: &str, namespace: &str) -> AdmissionRequest<'static> {
        AdmissionRequest {
            operation: "CREATE".to_string(),
            resource: crate::k8s::admission_request::GroupVersionResource {
                group: String::new(),
                version: "v1".to_string(),
                resource: resource.to_string(),
            },
            namespace: (!namespace.is_empty()).then(|| namespace.to_string()),
            ..AdmissionRequest::default()
        }
    }

    fn names<'s>(set: &'s PolicySet, namespace: &str) -> Vec<&'s str> {
        set.route(&request("pods", namespace))
            .map(|route| {
                route
                    .candidates(set)
                    .map(|policy| policy.name.as_str())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// What a request's candidates read, as its route says; `None` without candidates.
    fn reads(set: &PolicySet, resource: &str, namespace: &str) -> Option<Reads> {
        set.route(&request(resource, namespace))
            .map(|route| route.reads)
    }

    /// The policies for any namespace and those naming the request's come out merged, in
    /// evaluation order, however they interleave.
    #[test]
    fn candidates_keep_the_evaluation_order_across_named_and_any_namespace() {
        let text = [
            policy("a-any", "[]"),
            policy("b-named", "[ns, other]"),
            policy("c-glob", "['n*']"),
            policy("d-named", "[ns]"),
            policy("e-other", "[other]"),
            policy("f-any", "[]"),
        ]
        .join("---\n");
        let set = crate::policy::load_str(Path::new("p.yaml"), &text)
            .unwrap()
            .set;
        assert_eq!(
            names(&set, "ns"),
            ["a-any", "b-named", "c-glob", "d-named", "f-any"]
        );
        // A pattern is left to the match: its policy is a candidate in every namespace.
        assert_eq!(
            names(&set, "other"),
            ["a-any", "b-named", "c-glob", "e-other", "f-any"]
        );
        assert_eq!(names(&set, ""), ["a-any", "c-glob", "f-any"]);
    }

    /// A policy naming plain namespaces is a candidate only in them; one with a pattern
    /// or no namespaces is a candidate everywhere, as the match itself decides.
    #[test]
    fn candidates_are_the_policies_that_name_the_namespace() {
        let text = [
            policy("a-team", "[team-a, team-a-staging]"),
            policy("b-team", "[team-b]"),
            policy("c-glob", "['team-*']"),
            policy("d-any", "[]"),
        ]
        .join("---\n");
        let set = crate::policy::load_str(Path::new("p.yaml"), &text)
            .unwrap()
            .set;
        assert_eq!(names(&set, "team-a"), ["a-team", "c-glob", "d-any"]);
        assert_eq!(names(&set, "team-a-staging"), ["a-team", "c-glob", "d-any"]);
        assert_eq!(names(&set, "team-b"), ["b-team", "c-glob", "d-any"]);
        assert_eq!(names(&set, "other"), ["c-glob", "d-any"]);
        assert_eq!(names(&set, ""), ["c-glob", "d-any"]);
        assert!(reads(&set, "pods", "other").is_some());
        assert!(reads(&set, "nodes", "").is_none());
    }

    /// What the candidates can see together, kept per list at load, is what each
    /// candidate can see, joined.
    #[test]
    fn candidate_reads_join_the_candidates_reads() {
        let reading = |name: &str, namespaces: &str, expression: &str| {
            policy(name, namespaces).replace(
                "        value: \"yes\"\n",
                &format!("        value: \"{{{{ {expression} }}}}\"\n"),
            )
        };
        let text = [
            reading("a-any", "[]", "request.namespace"),
            reading("b-named", "[ns]", "request.userInfo.username"),
            reading(
                "c-glob",
                "['n*']",
                "string(size(object.metadata.managedFields))",
            ),
            reading("d-other", "[other]", "string(request)"),
            reading("e-old", "[ns, other]", "oldObject.metadata.name"),
        ]
        .join("---\n");
        let set = crate::policy::load_str(Path::new("p.yaml"), &text)
            .unwrap()
            .set;
        for namespace in ["ns", "other", "none", ""] {
            let joined = set.route(&request("pods", namespace)).and_then(|route| {
                route
                    .candidates(&set)
                    .map(|policy| Reads {
                        namespace: policy.needs_namespace(),
                        request_fields: policy.needs.request_fields,
                    })
                    .reduce(Reads::union)
            });
            assert_eq!(reads(&set, "pods", namespace), joined, "{namespace}");
        }
        let reads = |namespace| reads(&set, "pods", namespace).unwrap();
        assert!(reads("ns").request_fields.includes("userInfo"));
        assert!(!reads("ns").request_fields.includes("uid"));
        assert_eq!(reads("other").request_fields, RequestFields::ALL);
    }
}
