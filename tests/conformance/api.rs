//! Requests to the apiserver as one user, through a kube client (one connection pool),
//! and discovery: which resource serves a kind, and whether it is namespaced.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use http_body_util::BodyExt as _;
use serde_json::{Value, json};

use crate::e2e::Result;

/// The field manager of every write, as the recorder sets it.
const FIELD_MANAGER: &str = "map-cases";

/// A reply: its HTTP status and its body (JSON, or the text as a JSON string).
pub struct Reply {
    pub code: u16,
    pub body: Value,
}

impl Reply {
    pub fn message(&self) -> String {
        match self.body["message"].as_str() {
            Some(message) => message.to_string(),
            None => self.body.to_string(),
        }
    }

    /// The body, or an error naming `what` when the request failed.
    pub fn ok(self, what: &str) -> Result<Value> {
        if self.code >= 300 {
            return Err(format!("{what}: HTTP {}: {}", self.code, self.message()).into());
        }
        Ok(self.body)
    }
}

/// A served resource.
#[derive(Clone)]
struct Resource {
    name: String,
    kind: String,
    namespaced: bool,
}

pub struct Api {
    client: kube::Client,
    /// apiVersion -> its resources (subresources left out).
    discovery: Mutex<HashMap<String, Vec<Resource>>>,
}

impl Api {
    /// A client for the user of `kubeconfig`; call within the runtime.
    pub async fn new(kubeconfig: &Path) -> Result<Api> {
        let file = kube::config::Kubeconfig::read_from(kubeconfig)?;
        let mut config =
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await?;
        config.read_timeout = Some(Duration::from_secs(60));
        Ok(Api {
            client: kube::Client::try_from(config)?,
            discovery: Mutex::new(HashMap::new()),
        })
    }

    pub async fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Reply> {
        let bytes = match body {
            Some(body) => serde_json::to_vec(body)?,
            None => Vec::new(),
        };
        let request = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json")
            .body(kube::client::Body::from(bytes))?;
        let response = self.client.send(request).await?;
        let code = response.status().as_u16();
        let bytes = response.into_body().collect().await?.to_bytes();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        Ok(Reply { code, body })
    }

    async fn resources(&self, api_version: &str, refresh: bool) -> Result<Vec<Resource>> {
        if !refresh {
            let cached = self.lock().get(api_version).cloned();
            if let Some(resources) = cached {
                return Ok(resources);
            }
        }
        let base = api_base(api_version);
        let reply = self.call("GET", &base, None).await?;
        let list: Vec<Resource> = if reply.code == 200 {
            reply.body["resources"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| !r["name"].as_str().unwrap_or("/").contains('/'))
                .map(|r| Resource {
                    name: r["name"].as_str().unwrap_or_default().to_string(),
                    kind: r["kind"].as_str().unwrap_or_default().to_string(),
                    namespaced: r["namespaced"].as_bool().unwrap_or(false),
                })
                .collect()
        } else {
            Vec::new()
        };
        self.lock().insert(api_version.to_string(), list.clone());
        Ok(list)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Resource>>> {
        self.discovery
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The served resource named `name` (`pods`, not `pods/status`), if any.
    pub async fn resource_named(&self, api_version: &str, name: &str) -> Result<Option<bool>> {
        for refresh in [false, true] {
            let resources = self.resources(api_version, refresh).await?;
            if let Some(r) = resources.iter().find(|r| r.name == name) {
                return Ok(Some(r.namespaced));
            }
        }
        Ok(None)
    }

    /// (plural, namespaced) of the resource serving `kind` in `api_version`.
    pub async fn resource_for(&self, api_version: &str, kind: &str) -> Result<(String, bool)> {
        for refresh in [false, true] {
            let resources = self.resources(api_version, refresh).await?;
            if let Some(r) = resources.iter().find(|r| r.kind == kind) {
                return Ok((r.name.clone(), r.namespaced));
            }
        }
        Err(format!("no resource serves {api_version} {kind}").into())
    }

    /// The collection path of `object` (and whether it is namespaced); `namespace` when
    /// the object names none.
    pub async fn collection(&self, object: &Value, namespace: &str) -> Result<(String, bool)> {
        let api_version = object["apiVersion"].as_str().ok_or("no apiVersion")?;
        let kind = object["kind"].as_str().ok_or("no kind")?;
        let (plural, namespaced) = self.resource_for(api_version, kind).await?;
        let mut path = api_base(api_version);
        if namespaced {
            let ns = object["metadata"]["namespace"]
                .as_str()
                .unwrap_or(namespace);
            path.push_str(&format!("/namespaces/{ns}"));
        }
        path.push_str(&format!("/{plural}"));
        Ok((path, namespaced))
    }

    /// The path of `object` itself.
    pub async fn item(&self, object: &Value, namespace: &str) -> Result<String> {
        let (collection, _) = self.collection(object, namespace).await?;
        let name = object["metadata"]["name"].as_str().ok_or("no name")?;
        Ok(format!("{collection}/{name}"))
    }

    pub async fn create(&self, object: &Value, namespace: &str) -> Result<Reply> {
        self.post(object, namespace, "").await
    }

    /// A server-side dry run of the CREATE: what would be stored, nothing persisted.
    pub async fn dry_run_create(&self, object: &Value, namespace: &str) -> Result<Reply> {
        self.post(object, namespace, "&dryRun=All").await
    }

    async fn post(&self, object: &Value, namespace: &str, query: &str) -> Result<Reply> {
        let (path, _) = self.collection(object, namespace).await?;
        let path = format!("{path}?fieldManager={FIELD_MANAGER}{query}");
        self.call("POST", &path, Some(object)).await
    }

    pub async fn replace(
        &self,
        object: &Value,
        namespace: &str,
        subresource: Option<&str>,
    ) -> Result<Reply> {
        let mut path = self.item(object, namespace).await?;
        if let Some(subresource) = subresource {
            path.push_str(&format!("/{subresource}"));
        }
        self.call(
            "PUT",
            &format!("{path}?fieldManager={FIELD_MANAGER}"),
            Some(object),
        )
        .await
    }

    pub async fn delete(&self, object: &Value, namespace: &str) -> Result<Reply> {
        let path = self.item(object, namespace).await?;
        self.call("DELETE", &path, None).await
    }

    pub async fn get(&self, object: &Value, namespace: &str) -> Result<Reply> {
        let path = self.item(object, namespace).await?;
        self.call("GET", &path, None).await
    }

    /// Waits until the CustomResourceDefinition `crd` is Established and each of its
    /// served versions is discoverable.
    pub async fn wait_crd(&self, crd: &Value) -> Result {
        let name = crd["metadata"]["name"].as_str().ok_or("CRD without name")?;
        let group = crd["spec"]["group"].as_str().ok_or("CRD without group")?;
        let kind = crd["spec"]["names"]["kind"]
            .as_str()
            .ok_or("CRD without kind")?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let current = self
                .call(
                    "GET",
                    &format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"),
                    None,
                )
                .await?;
            let established = current.body["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Established" && c["status"] == "True");
            if established {
                let mut all = true;
                for version in crd["spec"]["versions"].as_array().into_iter().flatten() {
                    if version["served"] == json!(false) {
                        continue;
                    }
                    let v = version["name"].as_str().unwrap_or_default();
                    all &= self
                        .resource_for(&format!("{group}/{v}"), kind)
                        .await
                        .is_ok();
                }
                if all {
                    return Ok(());
                }
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!("CRD {name} not established after 60 s").into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn api_base(api_version: &str) -> String {
    if api_version == "v1" {
        "/api/v1".to_string()
    } else {
        format!("/apis/{api_version}")
    }
}
