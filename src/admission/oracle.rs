//! The review with every object built, whatever the policies read: what the tests hold
//! [`super::review`] to (the same JSON, the same answer), never what graft serves.

use std::cell::Cell;

use super::parse::{parse_text, utf8};
use super::{ClusterSource, ReviewError, Reviewed, answer, resolve};
use crate::policy::PolicySet;

/// [`super::review`], with the request's object built however the policies route it.
pub fn review<'b>(
    body: &'b [u8],
    policies: &PolicySet,
    source: ClusterSource<'_>,
) -> Result<Reviewed<'b>, ReviewError> {
    let text = utf8(body).map_err(super::BadReview::from)?;
    let review = parse_text(text, &mut |_| true, &Cell::new(false))?;
    let route = policies.route(&review.request);
    let cluster = resolve(&review.request, route, source);
    Ok(answer(review, route, &cluster, policies)?)
}
