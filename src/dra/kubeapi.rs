//! The API server through `kube`: [`KubeClaims`], the [`ClaimApi`] of the
//! running driver, and the words its errors are put in.
//!
//! A claim's `status.devices` is shared by every driver allocated in it:
//! writing it reads the claim, keeps the other drivers' entries, puts ours
//! in place and sends the whole list as a JSON merge patch of the status
//! subresource that carries the resourceVersion read, so the API server
//! refuses it (409) when someone wrote meanwhile; then it starts again,
//! a few times.

use k8s_openapi::api::resource::v1::{AllocatedDeviceStatus, ResourceClaim};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::{ApiError, ApiFuture, ClaimApi};

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "cdigen";

/// How many times a status write is tried when others write the claim
/// meanwhile.
pub const CONFLICT_TRIES: usize = 5;

/// The [`ClaimApi`] of the driver: ResourceClaims through a kube client.
#[derive(Clone)]
pub struct KubeClaims {
    client: kube::Client,
}

impl std::fmt::Debug for KubeClaims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClaims").finish_non_exhaustive()
    }
}

impl KubeClaims {
    /// Claims through `client`.
    pub fn new(client: kube::Client) -> Self {
        KubeClaims { client }
    }

    async fn get(&self, namespace: &str, name: &str) -> Result<ResourceClaim, ApiError> {
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), namespace);
        api.get(name)
            .await
            .map_err(|e| error(&format!("ResourceClaim {namespace}/{name}"), "get", &e))
    }

    async fn set_status(
        &self,
        namespace: &str,
        name: &str,
        driver: &str,
        devices: Vec<AllocatedDeviceStatus>,
    ) -> Result<(), ApiError> {
        let what = format!("ResourceClaim {namespace}/{name}");
        let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), namespace);
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PatchParams::default()
        };
        let mut last = None;
        for _ in 0..CONFLICT_TRIES {
            let claim = self.get(namespace, name).await?;
            let current = claim
                .status
                .as_ref()
                .and_then(|s| s.devices.clone())
                .unwrap_or_default();
            let Some(merged) = merge_devices(&current, driver, &devices) else {
                return Ok(());
            };
            let Some(rv) = claim.metadata.resource_version.clone() else {
                return Err(ApiError(format!(
                    "{what}: the API server sent it without a resourceVersion"
                )));
            };
            let patch = json!({
                "metadata": { "resourceVersion": rv },
                "status": { "devices": merged },
            });
            match api.patch_status(name, &params, &Patch::Merge(&patch)).await {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    tracing::debug!("{what}: written meanwhile ({}); again", s.message);
                    last = Some(s.message);
                }
                Err(e) => return Err(error(&what, "update the status of", &e)),
            }
        }
        Err(ApiError(format!(
            "cannot update the status of {what}: written by others {CONFLICT_TRIES} times while we tried{}",
            last.map(|m| format!(" ({m})")).unwrap_or_default()
        )))
    }
}

impl ClaimApi for KubeClaims {
    fn get_claim<'a>(&'a self, namespace: &'a str, name: &'a str) -> ApiFuture<'a, ResourceClaim> {
        Box::pin(self.get(namespace, name))
    }

    fn set_device_status<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        driver: &'a str,
        devices: Vec<AllocatedDeviceStatus>,
    ) -> ApiFuture<'a, ()> {
        Box::pin(self.set_status(namespace, name, driver, devices))
    }
}

/// `current` with `driver`'s entries replaced by `ours` (which must all be
/// `driver`'s; others are dropped), the other drivers' entries first and
/// in their order; `None` when that is `current` already.
pub fn merge_devices(
    current: &[AllocatedDeviceStatus],
    driver: &str,
    ours: &[AllocatedDeviceStatus],
) -> Option<Vec<AllocatedDeviceStatus>> {
    let mut merged: Vec<AllocatedDeviceStatus> = current
        .iter()
        .filter(|d| d.driver != driver)
        .cloned()
        .collect();
    merged.extend(ours.iter().filter(|d| d.driver == driver).cloned());
    (merged.as_slice() != current).then_some(merged)
}

/// `e`, from trying to `verb` `what`, in words: the API server's message
/// and code, or what went wrong on the way.
pub fn error(what: &str, verb: &str, e: &kube::Error) -> ApiError {
    match e {
        kube::Error::Api(s) if s.code == 404 => ApiError(format!("{what} not found")),
        kube::Error::Api(s) if s.code == 403 => ApiError(format!(
            "cannot {verb} {what}: forbidden ({}); check the driver's RBAC",
            s.message
        )),
        kube::Error::Api(s) => ApiError(format!(
            "cannot {verb} {what}: the API server says {} ({}{})",
            if s.message.is_empty() {
                "nothing"
            } else {
                s.message.as_str()
            },
            s.code,
            if s.reason.is_empty() {
                String::new()
            } else {
                format!(" {}", s.reason)
            }
        )),
        other => ApiError(format!("cannot {verb} {what}: {other}")),
    }
}

/// A kube client from the environment: `KUBECONFIG` (or
/// `~/.kube/config`) when there is one, else the pod's service account.
///
/// # Errors
/// Neither found, or one that cannot be used, in words.
pub async fn client() -> Result<kube::Client, ApiError> {
    kube::Client::try_default().await.map_err(|e| {
        ApiError(format!(
            "cannot reach the Kubernetes API: {e} (running outside a pod needs KUBECONFIG)"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(driver: &str, device: &str) -> AllocatedDeviceStatus {
        AllocatedDeviceStatus {
            driver: driver.into(),
            pool: "node".into(),
            device: device.into(),
            ..AllocatedDeviceStatus::default()
        }
    }

    #[test]
    fn merging_replaces_only_our_entries() {
        let current = [
            status("other.example.com", "a"),
            status("dra.cdigen.io", "old"),
            status("third.example.com", "b"),
        ];
        let ours = [status("dra.cdigen.io", "new")];
        assert_eq!(
            merge_devices(&current, "dra.cdigen.io", &ours),
            Some(vec![
                status("other.example.com", "a"),
                status("third.example.com", "b"),
                status("dra.cdigen.io", "new"),
            ])
        );
        // Entries of another driver handed in are not ours to write.
        assert_eq!(
            merge_devices(
                &current,
                "dra.cdigen.io",
                &[status("other.example.com", "x")]
            ),
            Some(vec![
                status("other.example.com", "a"),
                status("third.example.com", "b"),
            ])
        );
        // Nothing to change: nothing to write.
        let done = [
            status("other.example.com", "a"),
            status("dra.cdigen.io", "new"),
        ];
        assert_eq!(merge_devices(&done, "dra.cdigen.io", &ours), None);
    }
}
