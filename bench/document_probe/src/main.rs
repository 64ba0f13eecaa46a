//! `document_probe MODE N`: answers the realistic pod's review N times with the
//! hand-written webhook's rule (`examples/support/handwritten_review.rs`).
//!
//! - `serde_json`: the hand-written webhook's own review: the whole body parsed into a
//!   `serde_json::Value`, the patch assembled by hand.
//! - `eager`: the body parsed whole into the prototype tree (`tree.rs`), the annotation
//!   set on a copy of the object that shares all but the path to it, the patch the diff
//!   of the two objects.
//! - `eager-lean`: `eager`, with `metadata.managedFields` kept as text, as graft's parse
//!   leaves it unbuilt today when no candidate policy can see it.
//! - `lazy`: the same on a tree built lazily: what the rule does not read stays text.
//! - `graft`: the same on graft's own tree (`graft::tree`), `managedFields` kept as
//!   text and checked as building it would check it.
//! - `check`: the body only checked as JSON (serde's `IgnoredAny`), the floor under any
//!   parse that refuses what serde_json refuses.
//!
//! Every mode but `check` answers with the same bytes (checked before the loop).
//! Instructions per review: run it with N = 0 and N = 200 under callgrind and divide the
//! difference by 200 (`run.sh` does).

#![forbid(unsafe_code)]

use std::hint::black_box;

#[path = "../../../examples/support/handwritten_review.rs"]
mod handwritten_review;
mod tree;

use graft::tree::Tree;
use handwritten_review::{
    COMPONENT_LABEL, NETWORKS_ANNOTATION, NODE_ALIAS, RDMA_NODES, WORKER_NAMESPACE,
};
use tree::Node;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const REVIEW: &str = include_str!("../../../benches/fixtures/pod-create-realistic.json");

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_default();
    let n: usize = args.next().as_deref().unwrap_or("200").parse()?;
    let expected = handwritten_review::review(REVIEW.as_bytes())?;
    for build in [Build::Eager, Build::EagerLean, Build::Lazy, Build::Graft] {
        anyhow::ensure!(
            review(REVIEW, build)? == expected,
            "the tree's answer differs ({build:?})"
        );
    }
    let mut bytes = 0;
    for _ in 0..n {
        let body = black_box(REVIEW);
        bytes += match mode.as_str() {
            "serde_json" => handwritten_review::review(body.as_bytes())?.len(),
            "eager" => review(body, Build::Eager)?.len(),
            "eager-lean" => review(body, Build::EagerLean)?.len(),
            "lazy" => review(body, Build::Lazy)?.len(),
            "graft" => review(body, Build::Graft)?.len(),
            "check" => {
                serde_json::from_str::<serde::de::IgnoredAny>(body)?;
                1
            }
            other => anyhow::bail!("unknown mode {other:?}"),
        };
    }
    println!("{mode}: {n} reviews, {bytes} bytes");
    Ok(())
}

/// How the tree is built.
#[derive(Clone, Copy, Debug)]
enum Build {
    Eager,
    EagerLean,
    Lazy,
    Graft,
}

/// The hand-written webhook's answer, computed on a tree built as `build` says.
fn review(body: &str, build: Build) -> anyhow::Result<Vec<u8>> {
    match build {
        Build::Eager => answer(&Node::eager(body)?),
        Build::EagerLean => answer(&Node::eager_without_managed_fields(body)?),
        Build::Lazy => answer(&Node::lazy(body)?),
        Build::Graft => answer(&Tree::parse_keeping(body, &["managedFields"])?),
    }
}

/// What the rule needs of a tree.
trait Document: Clone {
    fn field(&self, key: &str) -> Option<&Self>;
    fn text(&self) -> Option<&str>;
    /// Sets the string at `path`, creating maps on the way; `false` when a node on the way
    /// is not a map.
    fn set_string(&mut self, path: &[&str], value: String) -> bool;
    /// The JSON Patch from `self` to `other` as JSON, `None` when it is empty.
    fn patch_to(&self, other: &Self) -> serde_json::Result<Option<Vec<u8>>>;
}

impl Document for Node<'_> {
    fn field(&self, key: &str) -> Option<&Self> {
        self.get(key)
    }

    fn text(&self) -> Option<&str> {
        self.as_str()
    }

    fn set_string(&mut self, path: &[&str], value: String) -> bool {
        self.set(path, Node::String(value.into()))
    }

    fn patch_to(&self, other: &Self) -> serde_json::Result<Option<Vec<u8>>> {
        let operations = tree::diff(self, other);
        if operations.is_empty() {
            return Ok(None);
        }
        serde_json::to_vec(&operations).map(Some)
    }
}

impl Document for Tree<'_> {
    fn field(&self, key: &str) -> Option<&Self> {
        self.get(key)
    }

    fn text(&self) -> Option<&str> {
        self.as_str()
    }

    fn set_string(&mut self, path: &[&str], value: String) -> bool {
        let Some((last, parents)) = path.split_last() else {
            *self = Tree::from(value);
            return true;
        };
        let mut node = self;
        for key in parents {
            let Some(map) = node.map_mut() else {
                return false;
            };
            if !map.contains_key(key) {
                map.insert(key.to_string(), Tree::from(graft::tree::Map::new()));
            }
            let Some(inner) = map.get_mut(key) else {
                return false;
            };
            node = inner;
        }
        match node.map_mut() {
            Some(map) => {
                map.insert(last.to_string(), Tree::from(value));
                true
            }
            None => false,
        }
    }

    fn patch_to(&self, other: &Self) -> serde_json::Result<Option<Vec<u8>>> {
        let patch = graft::tree::diff(self, other);
        if patch.0.is_empty() {
            return Ok(None);
        }
        serde_json::to_vec(&patch).map(Some)
    }
}

fn answer<D: Document>(root: &D) -> anyhow::Result<Vec<u8>> {
    let request = root
        .field("request")
        .ok_or_else(|| anyhow::anyhow!("no request"))?;
    let uid = request
        .field("uid")
        .and_then(D::text)
        .ok_or_else(|| anyhow::anyhow!("no uid"))?;
    let patch = match request.field("object") {
        Some(object) => patch(request, object)?,
        None => None,
    };
    let api_version = root.field("apiVersion").and_then(D::text);
    Ok(handwritten_review::answer(api_version, uid, patch)?)
}

/// The rule's patch as JSON, when it applies and changes the pod: the annotation set on a
/// copy of the object, and the diff of the two.
fn patch<D: Document>(request: &D, object: &D) -> anyhow::Result<Option<Vec<u8>>> {
    fn text<D: Document>(node: Option<&D>) -> Option<&str> {
        node.and_then(D::text)
    }
    let resource = request.field("resource");
    let labels = object.field("metadata").and_then(|m| m.field("labels"));
    let worker_created = text(resource.and_then(|r| r.field("group"))) == Some("")
        && text(resource.and_then(|r| r.field("resource"))) == Some("pods")
        && text(request.field("operation")) == Some("CREATE")
        && text(request.field("namespace")) == Some(WORKER_NAMESPACE)
        && text(labels.and_then(|l| l.field(COMPONENT_LABEL))) == Some("worker");
    if !worker_created {
        return Ok(None);
    }
    let selector = object.field("spec").and_then(|s| s.field("nodeSelector"));
    let Some(alias) = text(selector.and_then(|s| s.field(NODE_ALIAS))) else {
        return Ok(None);
    };
    let Some((_, networks)) = RDMA_NODES.iter().find(|(node, _)| *node == alias) else {
        return Ok(None);
    };
    let annotations = object
        .field("metadata")
        .and_then(|m| m.field("annotations"));
    let current = match annotations.and_then(|a| a.field(NETWORKS_ANNOTATION)) {
        Some(value) => match value.text() {
            Some(current) => current,
            None => return Ok(None),
        },
        None => "",
    };
    let Some(merged) = handwritten_review::merge(current, networks, WORKER_NAMESPACE) else {
        return Ok(None);
    };
    let mut mutated = object.clone();
    let path = ["metadata", "annotations", NETWORKS_ANNOTATION];
    if !mutated.set_string(&path, merged) {
        return Ok(None);
    }
    Ok(object.patch_to(&mutated)?)
}
