//! The kubelet's side, as a client: registering a resource on
//! `kubelet.sock`, and asking the pod resources API which devices running
//! containers hold.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint};

use super::api::podresources::ListPodResourcesRequest;
use super::api::podresources::pod_resources_lister_client::PodResourcesListerClient;
use super::api::v1beta1::registration_client::RegistrationClient;
use super::api::v1beta1::{DevicePluginOptions, RegisterRequest};

/// The API version cdigen speaks.
pub const VERSION: &str = "v1beta1";

/// How long one call to the kubelet may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// A gRPC channel to the Unix socket `path` (the URI is a placeholder:
/// every connection goes to the socket). Its requests carry `:authority`
/// `localhost`, as the kubelet's own clients of a plugin do: the device
/// manager's (`grpc.WithAuthority("localhost")`,
/// pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go) and the DRA
/// manager's (`grpc.NewClient("unix:" + endpoint)`, whose unix resolver
/// overrides the authority to `localhost`,
/// pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go). The plugin watcher
/// sends the socket's path instead (see [`crate::front`]).
///
/// # Errors
/// When the socket cannot be connected to.
pub async fn connect(path: &Path) -> Result<Channel, tonic::transport::Error> {
    let path: PathBuf = path.to_path_buf();
    Endpoint::from_static("http://localhost")
        .connect_timeout(CALL_TIMEOUT)
        .timeout(CALL_TIMEOUT)
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let path = path.clone();
            async move {
                Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(path).await?))
            }
        }))
        .await
}

/// Registers `resource`, served on `endpoint` (a file name in the
/// kubelet's device-plugins directory), on the kubelet socket `kubelet`.
///
/// # Errors
/// The kubelet's refusal or why it could not be reached, in words.
pub async fn register(
    kubelet: &Path,
    resource: &str,
    endpoint: &str,
    options: DevicePluginOptions,
) -> Result<(), String> {
    let channel = connect(kubelet).await.map_err(|e| {
        format!(
            "cannot connect to {}: {:#}",
            kubelet.display(),
            anyhow::Error::new(e)
        )
    })?;
    RegistrationClient::new(channel)
        .register(RegisterRequest {
            version: VERSION.into(),
            endpoint: endpoint.into(),
            resource_name: resource.into(),
            options: Some(options),
        })
        .await
        .map_err(|s| format!("the kubelet refused {resource}: {}", s.message()))?;
    Ok(())
}

/// The (resource, device ID) pairs running containers hold, from the pod
/// resources API at `socket`.
///
/// # Errors
/// Why it could not be asked, in words.
pub async fn live_devices(socket: &Path) -> Result<Vec<(String, String)>, String> {
    let channel = connect(socket).await.map_err(|e| {
        format!(
            "cannot connect to {}: {:#}",
            socket.display(),
            anyhow::Error::new(e)
        )
    })?;
    let list = PodResourcesListerClient::new(channel)
        .list(ListPodResourcesRequest {})
        .await
        .map_err(|s| format!("{}: List failed: {}", socket.display(), s.message()))?
        .into_inner();
    Ok(list
        .pod_resources
        .into_iter()
        .flat_map(|p| p.containers)
        .flat_map(|c| c.devices)
        .flat_map(|d| {
            let r = d.resource_name;
            d.device_ids.into_iter().map(move |id| (r.clone(), id))
        })
        .collect())
}
