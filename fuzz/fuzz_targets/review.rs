//! Review handling: arbitrary bytes -> a BadReview error or a well-formed response to
//! the request's uid, under the four example policies.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let set = graft_fuzz::example_policies();
    if let Ok(review) = graft::admission::parse(data) {
        // The answer changes the request's object in place: keep the original to patch.
        let original = review.request.object.clone();
        let reviewed = graft::admission::answer(review, set);
        let uid = &reviewed.review.request.uid;
        graft_fuzz::check_response(&reviewed.to_json(), uid, original.as_ref());
    }
});
