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
    for build in [Build::Eager, Build::EagerLean, Build::Lazy] {
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
}

/// The hand-written webhook's answer, computed on the tree.
fn review(body: &str, build: Build) -> anyhow::Result<Vec<u8>> {
    let root = match build {
        Build::Eager => Node::eager(body)?,
        Build::EagerLean => Node::eager_without_managed_fields(body)?,
        Build::Lazy => Node::lazy(body)?,
    };
    let request = root
        .get("request")
        .ok_or_else(|| anyhow::anyhow!("no request"))?;
    let uid = request
        .get("uid")
        .and_then(Node::as_str)
        .ok_or_else(|| anyhow::anyhow!("no uid"))?;
    let patch = match request.get("object") {
        Some(object) => patch(request, object)?,
        None => None,
    };
    let api_version = root.get("apiVersion").and_then(Node::as_str);
    Ok(handwritten_review::answer(api_version, uid, patch)?)
}

/// The rule's patch as JSON, when it applies and changes the pod: the annotation set on a
/// copy of the object, and the diff of the two.
fn patch(request: &Node<'_>, object: &Node<'_>) -> anyhow::Result<Option<Vec<u8>>> {
    fn text<'n>(node: Option<&'n Node<'_>>) -> Option<&'n str> {
        node.and_then(Node::as_str)
    }
    let resource = request.get("resource");
    let labels = object.get("metadata").and_then(|m| m.get("labels"));
    let worker_created = text(resource.and_then(|r| r.get("group"))) == Some("")
        && text(resource.and_then(|r| r.get("resource"))) == Some("pods")
        && text(request.get("operation")) == Some("CREATE")
        && text(request.get("namespace")) == Some(WORKER_NAMESPACE)
        && text(labels.and_then(|l| l.get(COMPONENT_LABEL))) == Some("worker");
    if !worker_created {
        return Ok(None);
    }
    let selector = object.get("spec").and_then(|s| s.get("nodeSelector"));
    let Some(alias) = text(selector.and_then(|s| s.get(NODE_ALIAS))) else {
        return Ok(None);
    };
    let Some((_, networks)) = RDMA_NODES.iter().find(|(node, _)| *node == alias) else {
        return Ok(None);
    };
    let annotations = object.get("metadata").and_then(|m| m.get("annotations"));
    let current = match annotations.and_then(|a| a.get(NETWORKS_ANNOTATION)) {
        Some(value) => match value.as_str() {
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
    if !mutated.set(&path, Node::String(merged.into())) {
        return Ok(None);
    }
    let operations = tree::diff(object, &mutated);
    if operations.is_empty() {
        return Ok(None);
    }
    Ok(Some(serde_json::to_vec(&operations)?))
}
