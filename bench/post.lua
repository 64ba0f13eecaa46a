-- wrk script: POST one AdmissionReview (the file named by $body_file) to /mutate.
local path = os.getenv("body_file") or "tests/fixtures/pod-create-multus-worker.json"
local file = assert(io.open(path, "rb"))
wrk.method = "POST"
wrk.body = file:read("*a")
file:close()
wrk.headers["Content-Type"] = "application/json"
wrk.headers["User-Agent"] = "kube-apiserver-admission"
