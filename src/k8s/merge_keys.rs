//! Which lists Kubernetes merges item by item, and on which key: the `patchMergeKey`s of
//! the built-in types (`x-kubernetes-patch-merge-key` in their OpenAPI schemas), which
//! strategic merge patch uses. A list not named here has no merge key and is replaced
//! whole (tolerations, args, command).

use crate::jsonpath::Token;

/// The merge key of the list in field `field`. `item_of` is the list whose item holds
/// the field, when it is one (`containers` for a container's `ports`): the same field
/// name has different keys in different types.
pub fn merge_key(field: &str, item_of: Option<&str>) -> Option<&'static str> {
    Some(match field {
        // PodSpec
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims"
        | "schedulingGates" => "name",
        "hostAliases" => "ip",
        "topologySpreadConstraints" => "topologyKey",
        // Container
        "env" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "ports" if is_container_list(item_of) => "containerPort",
        // ServiceSpec
        "ports" => "port",
        // ObjectMeta
        "ownerReferences" => "uid",
        // Conditions of every built-in status.
        "conditions" => "type",
        _ => return None,
    })
}

/// The merge key of the list at `location`, when Kubernetes merges it item by item: the
/// list's field, and the list its parent is an item of (`spec.containers[0].ports`).
pub fn at(location: &[Token]) -> Option<&'static str> {
    let [.., Token::Key(field)] = location else {
        return None;
    };
    let item_of = match location {
        [.., Token::Key(list), Token::Index(_), Token::Key(_)] => Some(list.as_str()),
        _ => None,
    };
    merge_key(field, item_of)
}

fn is_container_list(list: Option<&str>) -> bool {
    matches!(
        list,
        Some("containers" | "initContainers" | "ephemeralContainers")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_merge_keys() {
        for (field, item_of, key) in [
            ("containers", None, Some("name")),
            ("initContainers", None, Some("name")),
            ("ephemeralContainers", None, Some("name")),
            ("volumes", None, Some("name")),
            ("imagePullSecrets", None, Some("name")),
            ("env", Some("containers"), Some("name")),
            ("volumeMounts", Some("initContainers"), Some("mountPath")),
            ("ports", Some("containers"), Some("containerPort")),
            ("ports", None, Some("port")),
            ("tolerations", None, None),
            ("args", Some("containers"), None),
            ("finalizers", None, None),
        ] {
            assert_eq!(merge_key(field, item_of), key, "{field} in {item_of:?}");
        }
    }
}
