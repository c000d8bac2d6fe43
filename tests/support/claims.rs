//! A fake of the API server as the DRA driver's kubelet side calls it
//! (`cdigen::dra::ClaimApi`): claims by namespace and name, status writes
//! recorded, and a gate that makes every call hang (a hung API server).
//! The binary-level tests use the HTTP fake of `apiserver.rs` instead.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Mutex;

use cdigen::dra::{ApiError, ApiFuture, ClaimApi};
use k8s_openapi::api::resource::v1::{AllocatedDeviceStatus, ResourceClaim};

/// A status write: namespace, name, driver, devices.
pub type StatusWrite = (String, String, String, Vec<AllocatedDeviceStatus>);

/// The API server as the driver needs it: claims by namespace/name,
/// status writes recorded.
#[derive(Default)]
pub struct FakeApi {
    pub claims: Mutex<BTreeMap<(String, String), ResourceClaim>>,
    pub gets: Mutex<usize>,
    pub statuses: Mutex<Vec<StatusWrite>>,
    pub refuse_status: bool,
    /// Held for writing: every call hangs until it is let go (a hung API
    /// server).
    pub gate: tokio::sync::RwLock<()>,
}

impl FakeApi {
    pub fn add(&self, claim: ResourceClaim) {
        let ns = claim.metadata.namespace.clone().unwrap();
        let name = claim.metadata.name.clone().unwrap();
        self.claims.lock().unwrap().insert((ns, name), claim);
    }
    pub fn gets(&self) -> usize {
        *self.gets.lock().unwrap()
    }
}

impl ClaimApi for FakeApi {
    fn get_claim<'a>(&'a self, namespace: &'a str, name: &'a str) -> ApiFuture<'a, ResourceClaim> {
        *self.gets.lock().unwrap() += 1;
        let found = self
            .claims
            .lock()
            .unwrap()
            .get(&(namespace.to_string(), name.to_string()))
            .cloned();
        Box::pin(async move {
            let _open = self.gate.read().await;
            found.ok_or_else(|| {
                ApiError(format!(
                    "resourceclaims.resource.k8s.io \"{name}\" not found"
                ))
            })
        })
    }

    fn set_device_status<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        driver: &'a str,
        devices: Vec<AllocatedDeviceStatus>,
    ) -> ApiFuture<'a, ()> {
        self.statuses
            .lock()
            .unwrap()
            .push((namespace.into(), name.into(), driver.into(), devices));
        let refuse = self.refuse_status;
        Box::pin(async move {
            let _open = self.gate.read().await;
            if refuse {
                Err(ApiError("forbidden".into()))
            } else {
                Ok(())
            }
        })
    }
}
