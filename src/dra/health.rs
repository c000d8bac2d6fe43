//! The DRA resource health stream (KEP-4680): `NodeWatchResources` of the
//! `DRAResourceHealth` service on the DRA socket, in package `v1alpha1`
//! (what the 1.36 kubelet calls, feature `ResourceHealthStatus`) and `v1`
//! (later kubelets), both answered by one [`Source`]. The kubelet shows
//! what it gets in the pods' `status.containerStatuses[]
//! .allocatedResourcesStatus`.
//!
//! The health is the inventory's ([`crate::deviceplugin::inventory`]),
//! the one that taints a device in the slices and makes it Unhealthy to
//! the device plugin: every device the watch loop last sent
//! ([`super::names::devices`]) is HEALTHY, or UNHEALTHY with the reason
//! as its message (escaped, at most [`MAX_MESSAGE`] bytes).
//!
//! Each message is the full list, as the kubelet reads it (a device left
//! out turns Unknown after its timeout): sent when the stream opens, again
//! whenever the devices or their health change, and every period
//! ([`PERIOD`]) in between, a third of the timeout each device declares
//! ([`timeout`]). Every device of the node's pool is reported, not only
//! the prepared ones: the kubelet keeps the health of the devices of the
//! claims it knows and ignores the rest, so the superset stays right
//! across prepare and unprepare without reading the checkpoint, and a
//! claim the kubelet prepares has its devices' health already there.
//!
//! A stream is a task feeding a one-message channel from the devices'
//! watch channel: it never holds what prepare and unprepare use, sends
//! the latest list when the kubelet reads slowly (nothing piles up), ends
//! when the kubelet goes away (its receiver dropped), and ends cleanly
//! (status OK) when the plugin stops or the devices' channel closes.

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt as _};
use tonic::{Request, Response, Status};

use super::api::{health_v1, health_v1alpha1};
use super::names::DraDevice;

/// How often the full report is sent when nothing changes.
pub const PERIOD: Duration = Duration::from_secs(10);

/// The kubelet's limit on a message, in bytes (it cuts longer ones, maybe
/// inside a character).
pub const MAX_MESSAGE: usize = 1024;

/// The timeout each device declares when reports come every `period`:
/// three periods, at least a second.
pub fn timeout(period: Duration) -> Duration {
    (period * 3).max(Duration::from_secs(1))
}

/// One device's health in a report, whatever the version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceHealth {
    /// The pool (the node).
    pub pool: String,
    /// The device's name in the pool, as the slices publish it.
    pub device: String,
    /// Whether it is healthy.
    pub healthy: bool,
    /// Why not (empty when healthy).
    pub message: String,
    /// Unix time of the report, in seconds.
    pub last_updated: i64,
    /// After how long without a report the kubelet says Unknown.
    pub timeout_seconds: i64,
}

/// The report of `devices` in `pool` at Unix time `now`, each declaring
/// `timeout`: every device, in the order given.
pub fn report(devices: &[DraDevice], pool: &str, now: i64, timeout: Duration) -> Vec<DeviceHealth> {
    let timeout_seconds = i64::try_from(timeout.as_secs().max(1)).unwrap_or(i64::MAX);
    devices
        .iter()
        .map(|d| DeviceHealth {
            pool: pool.to_string(),
            device: d.name.clone(),
            healthy: d.entry.unhealthy.is_none(),
            message: d
                .entry
                .unhealthy
                .as_ref()
                .map(|why| message(&why.to_string()))
                .unwrap_or_default(),
            last_updated: now,
            timeout_seconds,
        })
        .collect()
}

/// `why` for the kubelet: escaped, and cut to [`MAX_MESSAGE`] bytes at a
/// character boundary, ending in `...` when cut.
pub fn message(why: &str) -> String {
    let s = crate::text::escape(why);
    if s.len() <= MAX_MESSAGE {
        return s.into_owned();
    }
    let mut end = MAX_MESSAGE - 3;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", s.get(..end).unwrap_or_default())
}

/// What the health streams are made from; cloned into each service.
#[derive(Debug, Clone)]
pub struct Source {
    /// The pool of every device (the node).
    pub pool: String,
    /// The devices this node offers now, as the plugin gets them.
    pub devices: watch::Receiver<Arc<Vec<DraDevice>>>,
    /// Turns true when the plugin stops.
    pub stop: watch::Receiver<bool>,
    /// How often the report is sent when nothing changes.
    pub period: Duration,
}

impl Source {
    /// Opens one stream: the task feeding it runs until the stream is
    /// dropped, the plugin stops or the devices' channel closes.
    pub fn watch(&self) -> ReceiverStream<Vec<DeviceHealth>> {
        let (tx, rx) = mpsc::channel(1);
        tokio::spawn(self.clone().feed(tx));
        ReceiverStream::new(rx)
    }

    async fn feed(self, tx: mpsc::Sender<Vec<DeviceHealth>>) {
        let Source {
            pool,
            mut devices,
            mut stop,
            period,
        } = self;
        let timeout = timeout(period);
        tracing::debug!("health stream opened");
        loop {
            let now = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
            let list = report(&devices.borrow_and_update(), &pool, now, timeout);
            tokio::select! {
                biased;
                () = stopped(&mut stop) => break,
                sent = tx.send(list) => if sent.is_err() { break },
            }
            tokio::select! {
                biased;
                () = stopped(&mut stop) => break,
                () = tx.closed() => break,
                changed = devices.changed() => if changed.is_err() { break },
                () = tokio::time::sleep(period) => {}
            }
        }
        tracing::debug!("health stream closed");
    }
}

/// Resolves when the plugin stops (or its stop signal is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// The boxed stream a version's service answers.
type Boxed<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// The health service of both versions, whose messages are field for
/// field the same.
macro_rules! health_service {
    ($name:ident, $v:ident) => {
        /// The health service of one version.
        #[derive(Debug, Clone)]
        pub struct $name(Source);

        impl $name {
            /// The service of `source`, to add to the DRA socket's server.
            pub fn server(
                source: Source,
            ) -> $v::dra_resource_health_server::DraResourceHealthServer<Self> {
                $v::dra_resource_health_server::DraResourceHealthServer::new($name(source))
            }
        }

        #[tonic::async_trait]
        impl $v::dra_resource_health_server::DraResourceHealth for $name {
            type NodeWatchResourcesStream = Boxed<$v::NodeWatchResourcesResponse>;

            async fn node_watch_resources(
                &self,
                _: Request<$v::NodeWatchResourcesRequest>,
            ) -> Result<Response<Self::NodeWatchResourcesStream>, Status> {
                let stream = self.0.watch().map(|list| {
                    let devices = list
                        .into_iter()
                        .map(|d| $v::DeviceHealth {
                            device: Some($v::DeviceIdentifier {
                                pool_name: d.pool,
                                device_name: d.device,
                            }),
                            health: if d.healthy {
                                $v::HealthStatus::Healthy
                            } else {
                                $v::HealthStatus::Unhealthy
                            }
                            .into(),
                            last_updated_time: d.last_updated,
                            health_check_timeout_seconds: d.timeout_seconds,
                            message: d.message,
                        })
                        .collect();
                    Ok($v::NodeWatchResourcesResponse { devices })
                });
                Ok(Response::new(Box::pin(stream)))
            }
        }
    };
}

health_service!(HealthV1alpha1, health_v1alpha1);
health_service!(HealthV1, health_v1);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;
    use crate::deviceplugin::inventory::Entry;
    use crate::deviceplugin::preferred::Placement;

    fn device(name: &str, unhealthy: Option<&str>) -> DraDevice {
        DraDevice {
            name: name.into(),
            resource: "cdigen.io/vf".into(),
            generator: "sriov".into(),
            kind: "cdigen.io/vf".into(),
            shared: false,
            shares: 1,
            entry: Entry {
                id: name.into(),
                cdi_name: format!("cdigen.io/vf={name}"),
                unhealthy: unhealthy.map(Into::into),
                placement: Placement::default(),
                device: Arc::new(crate::model::Device::default()),
                present: true,
            },
        }
    }

    #[test]
    fn a_report_has_every_device_with_its_health() {
        let devices = [
            device("sriov-0000-3b-00-2", None),
            device("sriov-0000-3b-00-3", Some("/dev/x is missing")),
        ];
        let r = report(&devices, "node1", 1_700_000_000, timeout(PERIOD));
        assert_eq!(
            r,
            [
                DeviceHealth {
                    pool: "node1".into(),
                    device: "sriov-0000-3b-00-2".into(),
                    healthy: true,
                    message: String::new(),
                    last_updated: 1_700_000_000,
                    timeout_seconds: 30,
                },
                DeviceHealth {
                    pool: "node1".into(),
                    device: "sriov-0000-3b-00-3".into(),
                    healthy: false,
                    message: "/dev/x is missing".into(),
                    last_updated: 1_700_000_000,
                    timeout_seconds: 30,
                },
            ]
        );
        assert!(report(&[], "node1", 0, PERIOD).is_empty());
    }

    #[test]
    fn the_timeout_is_three_periods_and_never_zero() {
        assert_eq!(timeout(Duration::from_secs(10)), Duration::from_secs(30));
        assert_eq!(timeout(Duration::from_millis(10)), Duration::from_secs(1));
        let r = report(&[device("d", None)], "p", 0, Duration::from_millis(500));
        assert_eq!(r[0].timeout_seconds, 1);
    }

    #[test]
    fn messages_are_escaped_and_cut_at_a_character() {
        assert_eq!(message("a\nb"), "a\\nb");
        let long = "é".repeat(600);
        let m = message(&long);
        assert_eq!(m.len(), MAX_MESSAGE - 4 + 3, "{}", m.len());
        assert!(m.ends_with("..."));
        assert!(m.starts_with("éé"));
        let exact = "x".repeat(MAX_MESSAGE);
        assert_eq!(message(&exact), exact);
        let over = "x".repeat(MAX_MESSAGE + 1);
        assert_eq!(
            message(&over),
            format!("{}...", "x".repeat(MAX_MESSAGE - 3))
        );
    }
}
