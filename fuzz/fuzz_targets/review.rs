//! Review handling: arbitrary bytes -> a BadReview error or a well-formed response to
//! the request's uid, under the four example policies.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let set = graft_fuzz::example_policies();
    if let Ok(reviewed) = graft::admission::review(data, set) {
        let request = &reviewed.review.request;
        graft_fuzz::check_response(&reviewed.to_json(), &request.uid, request.object.as_ref());
    }
});
