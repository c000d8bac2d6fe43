//! The ResourceSlice publisher: keeps the API server's slices of
//! (driver, node) equal to the ones wanted ([`super::slices`]), whoever
//! changes them.
//!
//! - [`Publisher::sync`] lists the slices (field selectors
//!   `spec.driver=<driver>,spec.nodeName=<node>`), creates the missing,
//!   replaces the changed (with the resourceVersion read, so a write in
//!   between fails and the next round reads again) and deletes the others.
//!   The pool generation goes up with every change of content, from above
//!   the highest one seen in the pool; slices that already say what is
//!   wanted at one generation are adopted as they are (a driver restart
//!   writes nothing).
//! - Every slice names the node's `Node` as its controlling owner (as the
//!   upstream resourceslice controller does), so the garbage collector
//!   removes the slices with the Node. The Node's UID is read (`nodes get`)
//!   at the first round and again before any slice is created: a Node
//!   deleted and re-created under the same name has a new UID, and the
//!   collector has then deleted the slices that named the old one. A
//!   slice that does not name the Node read (an older driver's) is
//!   replaced to name it, in place of any other Node.
//! - [`Publisher::run`] does that whenever the wanted slices change, and
//!   whenever the slices change on the server (a watch from the list's
//!   resourceVersion: the kubelet wipes a driver's slices when it starts,
//!   and 30 s after the driver goes away), with backoff on failures
//!   (logged once per streak); on the way out it deletes them.
//!
//! Our own writes come back through the watch; an event whose
//! resourceVersion is the one our write got is not a change.

use std::collections::{BTreeMap, BTreeSet};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{ResourceSlice, ResourceSliceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use tokio::sync::watch as tw;
use tokio_stream::{Stream, StreamExt as _};

use super::ApiError;
use super::kubeapi::{FIELD_MANAGER, error};

/// The first wait after a failure.
pub const BACKOFF_MIN: Duration = Duration::from_millis(500);

/// The longest wait between tries.
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// How long the slices are tried to be deleted on the way out.
pub const SHUTDOWN_WITHIN: Duration = Duration::from_secs(10);

/// How long one watch request lasts before it is made again (the API
/// server ends it anyway, after about as long).
const WATCH_TIMEOUT_S: u32 = 290;

/// The slices to publish, and when the watch pass that made them started.
#[derive(Debug, Clone)]
pub struct Desired {
    /// The slices, as [`super::slices::slices`] makes them (their pool
    /// generation is the publisher's to set).
    pub slices: Vec<ResourceSlice>,
    /// When the pass that made them started: the log says how long after
    /// it they were written.
    pub since: Instant,
}

/// What one [`Publisher::sync`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Slices created.
    pub created: usize,
    /// Slices replaced.
    pub updated: usize,
    /// Slices deleted.
    pub deleted: usize,
    /// The pool generation published.
    pub generation: i64,
}

impl Outcome {
    /// Whether anything was written.
    pub fn wrote(&self) -> bool {
        self.created + self.updated + self.deleted > 0
    }
}

type WatchStream = Pin<Box<dyn Stream<Item = kube::Result<WatchEvent<ResourceSlice>>> + Send>>;

/// Publishes one node's slices of one driver.
pub struct Publisher {
    api: Api<ResourceSlice>,
    nodes: Api<Node>,
    /// The Node as the slices' owner, once read.
    owner: Option<OwnerReference>,
    driver: String,
    node: String,
    backoff: (Duration, Duration),
    /// The content published (names and specs, generation 0), once there
    /// is one.
    content: Option<Vec<(String, ResourceSliceSpec)>>,
    /// Its pool generation.
    generation: i64,
    /// Our last write of each slice: the resourceVersion it got, and
    /// what it said.
    written: BTreeMap<String, (String, ResourceSliceSpec)>,
    /// Slices we deleted (their watch event is not news).
    deleted: BTreeSet<String>,
    /// The resourceVersion to watch from: the last list's, then the
    /// last event's.
    since: Option<String>,
    /// Whether the slices stay on the way out ([`Publisher::keep_on_exit`]).
    keep: bool,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("driver", &self.driver)
            .field("node", &self.node)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl Publisher {
    /// The publisher of `driver`'s slices of `node`, through `client`.
    pub fn new(client: kube::Client, driver: &str, node: &str) -> Self {
        Publisher {
            api: Api::all(client.clone()),
            nodes: Api::all(client),
            owner: None,
            driver: driver.to_string(),
            node: node.to_string(),
            backoff: (BACKOFF_MIN, BACKOFF_MAX),
            content: None,
            generation: 0,
            written: BTreeMap::new(),
            deleted: BTreeSet::new(),
            since: None,
            keep: false,
        }
    }

    /// Leaves the slices on the way out: in a rolling update the next
    /// instance publishes the same ones, and the kubelet deletes them
    /// itself 30 s after the driver's last instance is gone.
    #[must_use]
    pub fn keep_on_exit(mut self) -> Self {
        self.keep = true;
        self
    }

    /// The same, waiting `min` after a first failure and up to `max`.
    #[must_use]
    pub fn with_backoff(mut self, min: Duration, max: Duration) -> Self {
        self.backoff = (min, max.max(min));
        self
    }

    /// The pool generation last published (0 before the first).
    pub fn generation(&self) -> i64 {
        self.generation
    }

    fn selector(&self) -> String {
        format!("spec.driver={},spec.nodeName={}", self.driver, self.node)
    }

    fn ours(&self, s: &ResourceSlice) -> bool {
        s.spec.driver == self.driver && s.spec.node_name.as_deref() == Some(self.node.as_str())
    }

    fn what(&self) -> String {
        format!(
            "the ResourceSlices of {} on node {}",
            self.driver, self.node
        )
    }

    /// The node's `Node`, read now, as the slices' owner.
    async fn read_owner(&self) -> Result<OwnerReference, ApiError> {
        let what = format!("Node {}", self.node);
        let node = self
            .nodes
            .get(&self.node)
            .await
            .map_err(|e| error(&what, "get", &e))?;
        match node.metadata.uid {
            Some(uid) if !uid.is_empty() => Ok(super::slices::node_owner(&self.node, &uid)),
            _ => Err(ApiError(format!(
                "{what}: the API server sent it without a uid"
            ))),
        }
    }

    /// Our slices on the server (what the field selectors gave and is
    /// ours indeed), and the list's resourceVersion.
    async fn list(&self) -> Result<(Vec<ResourceSlice>, Option<String>), ApiError> {
        let list = self
            .api
            .list(&ListParams::default().fields(&self.selector()))
            .await
            .map_err(|e| error(&self.what(), "list", &e))?;
        let rv = list.metadata.resource_version.clone();
        let ours = list.items.into_iter().filter(|s| self.ours(s)).collect();
        Ok((ours, rv))
    }

    /// Makes the server's slices say `desired`: one round (list, then
    /// writes). The pool generation is set here.
    ///
    /// # Errors
    /// The first call to the API server that failed, naming the slice.
    pub async fn sync(&mut self, desired: &[ResourceSlice]) -> Result<Outcome, ApiError> {
        let started = Instant::now();
        let (existing, rv) = self.list().await?;
        tracing::debug!(
            "{}: list took {} ms ({} slices)",
            self.what(),
            started.elapsed().as_millis(),
            existing.len()
        );
        let pool = desired
            .first()
            .map_or(self.node.as_str(), |s| s.spec.pool.name.as_str())
            .to_string();
        let content: Vec<(String, ResourceSliceSpec)> = desired
            .iter()
            .map(|s| {
                (
                    s.metadata.name.clone().unwrap_or_default(),
                    with_generation(&s.spec, 0),
                )
            })
            .collect();
        let by_name: BTreeMap<String, &ResourceSlice> = existing
            .iter()
            .filter_map(|s| s.metadata.name.clone().map(|n| (n, s)))
            .collect();
        let seen = existing
            .iter()
            .filter(|s| s.spec.pool.name == pool)
            .map(|s| s.spec.pool.generation)
            .max();
        if self.content.as_ref() != Some(&content) {
            let adopt = seen.filter(|g| {
                self.content.is_none()
                    && existing.len() == content.len()
                    && content.iter().all(|(name, spec)| {
                        by_name
                            .get(name)
                            .is_some_and(|e| same(&e.spec, &with_generation(spec, *g)))
                    })
            });
            self.generation = match adopt {
                Some(g) => g,
                None => self.generation.max(seen.unwrap_or(0)).saturating_add(1),
            };
            self.content = Some(content.clone());
        } else if seen.is_some_and(|g| g > self.generation) {
            // Someone published the pool above us: ours would not count.
            self.generation = seen.unwrap_or(0).saturating_add(1);
        }
        // The owner: read at the first round, and again when a slice is
        // to be created (the Node may be a new one of the same name).
        if self.owner.is_none() || content.iter().any(|(n, _)| !by_name.contains_key(n)) {
            self.owner = Some(self.read_owner().await?);
        }
        let owners: Vec<OwnerReference> = self.owner.iter().cloned().collect();
        let generation = self.generation;
        let mut out = Outcome {
            generation,
            ..Outcome::default()
        };
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PostParams::default()
        };
        for (name, spec) in &content {
            let want = with_generation(spec, generation);
            let what = format!("ResourceSlice {name}");
            match by_name.get(name) {
                Some(e) => {
                    let rv = e.metadata.resource_version.clone();
                    let ours_unchanged = rv.is_some()
                        && self
                            .written
                            .get(name)
                            .is_some_and(|(w, s)| Some(w) == rv.as_ref() && *s == want);
                    let refs = e.metadata.owner_references.as_deref().unwrap_or_default();
                    let owned = owners.iter().all(|o| refs.contains(o));
                    if owned && (ours_unchanged || same(&e.spec, &want)) {
                        if let Some(rv) = rv {
                            self.written.insert(name.clone(), (rv, want));
                        }
                        continue;
                    }
                    let mut slice = ResourceSlice {
                        metadata: e.metadata.clone(),
                        spec: want.clone(),
                    };
                    slice.metadata.managed_fields = None;
                    // Ours in place of any other Node's; other owners kept.
                    let mut refs: Vec<OwnerReference> =
                        refs.iter().filter(|r| r.kind != "Node").cloned().collect();
                    refs.extend(owners.iter().cloned());
                    slice.metadata.owner_references = Some(refs);
                    let done = self
                        .api
                        .replace(name, &params, &slice)
                        .await
                        .map_err(|e| error(&what, "update", &e))?;
                    self.remember(name, &done, want);
                    out.updated += 1;
                }
                None => {
                    let slice = ResourceSlice {
                        metadata: kube::api::ObjectMeta {
                            name: Some(name.clone()),
                            owner_references: Some(owners.clone()),
                            ..kube::api::ObjectMeta::default()
                        },
                        spec: want.clone(),
                    };
                    let done = self
                        .api
                        .create(&params, &slice)
                        .await
                        .map_err(|e| error(&what, "create", &e))?;
                    self.remember(name, &done, want);
                    out.created += 1;
                }
            }
        }
        let wanted: BTreeSet<&String> = content.iter().map(|(n, _)| n).collect();
        for name in by_name.keys().filter(|n| !wanted.contains(n)) {
            self.delete(name).await?;
            out.deleted += 1;
        }
        self.since = rv;
        Ok(out)
    }

    fn remember(&mut self, name: &str, done: &ResourceSlice, spec: ResourceSliceSpec) {
        if let Some(rv) = done.metadata.resource_version.clone() {
            self.written.insert(name.to_string(), (rv, spec));
        }
        self.deleted.remove(name);
    }

    async fn delete(&mut self, name: &str) -> Result<(), ApiError> {
        self.deleted.insert(name.to_string());
        self.written.remove(name);
        match self.api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(error(&format!("ResourceSlice {name}"), "delete", &e)),
        }
    }

    /// Deletes all our slices; how many there were.
    ///
    /// # Errors
    /// The first call to the API server that failed.
    pub async fn delete_all(&mut self) -> Result<usize, ApiError> {
        let (existing, _) = self.list().await?;
        let names: Vec<String> = existing
            .iter()
            .filter_map(|s| s.metadata.name.clone())
            .collect();
        for name in &names {
            self.delete(name).await?;
        }
        self.content = None;
        Ok(names.len())
    }

    /// Whether a watch event is news: a slice of ours changed by someone
    /// else. Bookmarks and our own writes only move the resourceVersion
    /// on.
    fn news(&mut self, event: &WatchEvent<ResourceSlice>) -> bool {
        let (slice, deleted) = match event {
            WatchEvent::Added(s) | WatchEvent::Modified(s) => (s, false),
            WatchEvent::Deleted(s) => (s, true),
            WatchEvent::Bookmark(b) => {
                self.since = Some(b.metadata.resource_version.clone());
                return false;
            }
            WatchEvent::Error(_) => return true,
        };
        if let Some(rv) = &slice.metadata.resource_version {
            self.since = Some(rv.clone());
        }
        if !self.ours(slice) {
            return false;
        }
        let name = slice.metadata.name.clone().unwrap_or_default();
        if deleted {
            return !self.deleted.contains(&name);
        }
        let own = self
            .written
            .get(&name)
            .is_some_and(|(rv, _)| slice.metadata.resource_version.as_ref() == Some(rv));
        !own
    }

    /// Publishes what `desired` holds (nothing while it holds `None`)
    /// until `stop` is set or `desired`'s sender is gone, then deletes the
    /// slices.
    pub async fn run(
        mut self,
        mut desired: tw::Receiver<Option<Arc<Desired>>>,
        mut stop: tw::Receiver<bool>,
    ) {
        let mut dirty = desired.borrow_and_update().is_some();
        let mut wait = self.backoff.0;
        let mut retry_at: Option<tokio::time::Instant> = None;
        // The first failure of the streak, logged; the streak's count.
        let mut failing: Option<(String, u32)> = None;
        let mut watch: Option<WatchStream> = None;
        // The pass whose slices were last written.
        let mut last_pass: Option<Instant> = None;
        loop {
            let due = retry_at.is_none_or(|t| tokio::time::Instant::now() >= t);
            if dirty && due {
                let want = desired.borrow().clone();
                let result = match &want {
                    Some(d) => self.sync(&d.slices).await.map(Some),
                    None => Ok(None),
                };
                match result {
                    Ok(out) => {
                        dirty = false;
                        retry_at = None;
                        wait = self.backoff.0;
                        if let Some((_, n)) = failing.take() {
                            tracing::info!("{}: published again after {n} failures", self.what());
                        }
                        if let (Some(out), Some(d)) = (out, want)
                            && out.wrote()
                        {
                            // New content: how long after its pass; the
                            // same content again: a repair.
                            let when = if last_pass == Some(d.since) {
                                "repaired".to_string()
                            } else {
                                format!("{} ms after the pass", d.since.elapsed().as_millis())
                            };
                            last_pass = Some(d.since);
                            tracing::info!(
                                "{}: generation {}: {} created, {} updated, {} deleted, {when}",
                                self.what(),
                                out.generation,
                                out.created,
                                out.updated,
                                out.deleted,
                            );
                        }
                    }
                    Err(e) => {
                        note_failure(&mut failing, &e.0, wait);
                        retry_at = Some(tokio::time::Instant::now() + wait);
                        wait = (wait * 2).min(self.backoff.1);
                    }
                }
            }
            if watch.is_none()
                && !dirty
                && let Some(rv) = self.since.clone()
            {
                let params = WatchParams::default()
                    .fields(&self.selector())
                    .timeout(WATCH_TIMEOUT_S);
                match self.api.watch(&params, &rv).await {
                    Ok(s) => watch = Some(Box::pin(s)),
                    Err(e) => {
                        let e = error(&self.what(), "watch", &e);
                        note_failure(&mut failing, &e.0, wait);
                        // A fresh list gives a resourceVersion to watch from.
                        self.since = None;
                        dirty = true;
                        retry_at = Some(tokio::time::Instant::now() + wait);
                        wait = (wait * 2).min(self.backoff.1);
                    }
                }
            }
            let sleep_until = retry_at
                .unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(24 * 3600));
            tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => break,
                r = desired.changed() => {
                    if r.is_err() {
                        break;
                    }
                    dirty = true;
                    // New content goes out at once.
                    retry_at = None;
                }
                ev = next_event(&mut watch) => match ev {
                    Some(Ok(event)) => {
                        if let WatchEvent::Error(s) = &event {
                            tracing::debug!("{}: the watch ended: {}", self.what(), s.message);
                            watch = None;
                            self.since = None;
                        }
                        if self.news(&event) {
                            dirty = true;
                        }
                    }
                    Some(Err(e)) => {
                        tracing::debug!("{}: the watch failed: {e}", self.what());
                        watch = None;
                        self.since = None;
                        dirty = true;
                    }
                    // Ended (its timeout): watch again from where it was.
                    None => watch = None,
                },
                () = tokio::time::sleep_until(sleep_until), if retry_at.is_some() => {}
            }
        }
        drop(watch);
        if self.keep {
            tracing::info!("{}: left for the driver's next instance", self.what());
        } else {
            self.shut_down().await;
        }
    }

    /// Deletes the slices on the way out, trying for
    /// [`SHUTDOWN_WITHIN`].
    async fn shut_down(&mut self) {
        let what = self.what();
        let mut wait = self.backoff.0;
        let tries = async {
            loop {
                match self.delete_all().await {
                    Ok(n) => return Ok(n),
                    Err(e) => {
                        tracing::warn!("{e}; trying again");
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(Duration::from_secs(2));
                    }
                }
            }
        };
        match tokio::time::timeout(SHUTDOWN_WITHIN, tries).await {
            Ok(Ok(n)) => tracing::info!("{what}: deleted {n} on the way out"),
            Ok(Err::<usize, ApiError>(e)) => tracing::error!("{e}"),
            Err(_) => tracing::error!(
                "{what}: not deleted within {}s; the kubelet removes them 30 s after the driver is gone",
                SHUTDOWN_WITHIN.as_secs()
            ),
        }
    }
}

/// Logs the first failure of a streak as an error (later ones at debug).
fn note_failure(failing: &mut Option<(String, u32)>, e: &str, wait: Duration) {
    match failing {
        Some((_, n)) => {
            *n += 1;
            tracing::debug!("{e}; retrying in {} ms", wait.as_millis());
        }
        None => {
            tracing::error!(
                "{e}; retrying in {} ms, then with backoff (further failures are not logged until it works)",
                wait.as_millis()
            );
            *failing = Some((e.to_string(), 1));
        }
    }
}

/// The next event of the watch; never, when there is none.
async fn next_event(
    watch: &mut Option<WatchStream>,
) -> Option<kube::Result<WatchEvent<ResourceSlice>>> {
    match watch {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

/// `spec` at pool generation `g`.
fn with_generation(spec: &ResourceSliceSpec, g: i64) -> ResourceSliceSpec {
    let mut s = spec.clone();
    s.pool.generation = g;
    s
}

/// Whether the server's `existing` says `want`: the same but for what the
/// server fills in (a taint's timeAdded we left empty).
fn same(existing: &ResourceSliceSpec, want: &ResourceSliceSpec) -> bool {
    let mut e = existing.clone();
    if let (Some(ed), Some(wd)) = (e.devices.as_mut(), want.devices.as_ref()) {
        for (ed, wd) in ed.iter_mut().zip(wd) {
            if let (Some(et), Some(wt)) = (ed.taints.as_mut(), wd.taints.as_ref()) {
                for (et, wt) in et.iter_mut().zip(wt) {
                    if wt.time_added.is_none() {
                        et.time_added = None;
                    }
                }
            }
        }
    }
    e == *want
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1::{Device, DeviceTaint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    #[test]
    fn server_filled_taint_times_are_not_changes() {
        let taint = DeviceTaint {
            key: "cdigen.io/unhealthy".into(),
            effect: "NoSchedule".into(),
            ..DeviceTaint::default()
        };
        let want = ResourceSliceSpec {
            devices: Some(vec![Device {
                name: "a".into(),
                taints: Some(vec![taint.clone()]),
                ..Device::default()
            }]),
            ..ResourceSliceSpec::default()
        };
        let mut existing = want.clone();
        if let Some(d) = existing.devices.as_mut().and_then(|d| d.first_mut())
            && let Some(t) = d.taints.as_mut().and_then(|t| t.first_mut())
        {
            t.time_added = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        }
        assert!(same(&existing, &want));
        let mut other = existing.clone();
        if let Some(d) = other.devices.as_mut().and_then(|d| d.first_mut()) {
            d.name = "b".into();
        }
        assert!(!same(&other, &want));
    }
}
