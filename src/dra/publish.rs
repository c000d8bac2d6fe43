//! The ResourceSlice publisher: keeps the API server's slices of
//! (driver, node) equal to the ones wanted ([`super::slices`]), whoever
//! changes them, writing only the slices that differ.
//!
//! - What the server holds is kept as a reflector keeps it: a list
//!   (field selectors `spec.driver=<driver>,spec.nodeName=<node>`), then a
//!   watch from the list's resourceVersion with bookmarks, every event and
//!   bookmark moving the resourceVersion on. A watch that ends (its
//!   timeout) is made again from there; one that fails with 410
//!   Gone/Expired (that resourceVersion is compacted away) leads to one
//!   list at once; a watch refused with 429 or not connected is tried
//!   again from the same resourceVersion after the backoff; any other
//!   failure (an undecodable event, another error) lists again after the
//!   backoff (as client-go's reflector does). A change by someone else
//!   arrives as an event: the publisher compares and writes back only
//!   what differs, without listing.
//! - Our own writes are known before the watch says them (the answer to
//!   each write is kept over the watched state until the watch reaches
//!   it), so a round right after a write sees it, and our own events are
//!   not news. Updates carry the resourceVersion held and deletes the
//!   UID and resourceVersion as preconditions: a write made on a stale
//!   view fails (409) and is tried again once the watch has caught up.
//! - The pool generation (`spec.pool.generation`, `resourceSliceCount`,
//!   resource.k8s.io/v1 `ResourcePool`): a consumer only considers the
//!   slices of a pool at its highest generation, and the pool as
//!   complete when it sees `resourceSliceCount` of them. Whenever a
//!   driver changes what the pool says, the API asks for a new
//!   generation in all its slices; a change that is one update of one
//!   slice (no slice created or deleted, so the count stays) is the
//!   exception the upstream resourceslice controller makes: the scheduler
//!   sees that slice before or after, each a complete pool that is true,
//!   so the generation stays and only that slice is written. Any other
//!   change (two slices, a slice more or less, a device moved from one
//!   slice to another) goes to the next generation in every slice, so
//!   that no mix of old and new slices counts as the pool. The generation
//!   starts above the highest one seen in the pool; a repair (the same
//!   content again after a wipe, a slice deleted or edited by someone
//!   else, a stale slice) writes only what was broken, at the generation
//!   published; slices that already say what is wanted at one generation
//!   are adopted as they are (a driver restart writes nothing); someone
//!   publishing the pool above us makes us go above them.
//! - Every slice names the node's `Node` as its controlling owner (as the
//!   upstream resourceslice controller does), so the garbage collector
//!   removes the slices with the Node. The Node's UID is read (`nodes get`)
//!   at the first round and again before any slice is created: a Node
//!   deleted and re-created under the same name has a new UID, and the
//!   collector has then deleted the slices that named the old one. A
//!   slice that does not name the Node read (an older driver's) is
//!   replaced to name it, in place of any other Node.
//! - [`Publisher::run`] does that whenever the wanted slices change, and
//!   whenever the slices change on the server (the kubelet wipes a
//!   driver's slices when it starts, and 30 s after the driver goes
//!   away), with backoff on failures (logged once per streak); on the way
//!   out it deletes them. [`Publisher::sync`] is one round of it on its
//!   own: a list, then the writes.

use std::collections::{BTreeMap, BTreeSet};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{Device, ResourceSlice, ResourceSliceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams, Preconditions, WatchEvent, WatchParams};
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

/// A watch that ends sooner with nothing sent is a failure (client-go's
/// reflector: `VeryShortWatchError`).
const SHORT_WATCH: Duration = Duration::from_secs(1);

/// The slices to publish, and when the watch pass that made them started.
///
/// Each slice's spec is held as its JSON (at pool generation 0: the
/// generation is the publisher's to set), LZ4-compressed: several times
/// smaller than the typed spec (maps of attributes), and the JSON of
/// devices that differ in a few values compresses well (a slice of 125
/// VFs: 151 KB, 11 KB compressed). The
/// wanted slices are most of what the driver holds between passes, and
/// twice that while a pass makes the next ones. Two contents say the same
/// when their bytes are equal (the compression is deterministic); a spec
/// is read back only for a write, and to compare it with a slice from
/// the server.
#[derive(Debug, Clone)]
pub struct Desired {
    slices: Vec<Wanted>,
    /// When the pass that made them started: the log says how long after
    /// it they were written.
    pub since: Instant,
}

impl Desired {
    /// `slices` (as [`super::slices::slices`] makes them), made by the
    /// pass that started at `since`.
    pub fn new(slices: Vec<ResourceSlice>, since: Instant) -> Self {
        Desired {
            slices: slices.into_iter().map(Wanted::new).collect(),
            since,
        }
    }

    /// The slices [`super::slices::slices_since`] made, by name: those
    /// it made, and those it left out (`None`) as `before` has them.
    /// `None` when one left out is not in `before`.
    pub fn reusing(
        made: Vec<(String, Option<ResourceSlice>)>,
        before: Option<&Desired>,
        since: Instant,
    ) -> Option<Self> {
        let slices = made
            .into_iter()
            .map(|(name, slice)| match slice {
                Some(s) => Some(Wanted::new(s)),
                None => before?.slices.iter().find(|w| w.name == name).cloned(),
            })
            .collect::<Option<Vec<Wanted>>>()?;
        Some(Desired { slices, since })
    }

    /// Whether it has a slice named `name`.
    pub fn has(&self, name: &str) -> bool {
        self.slices.iter().any(|w| w.name == name)
    }

    /// How many slices.
    pub fn len(&self) -> usize {
        self.slices.len()
    }

    /// Whether there is no slice.
    pub fn is_empty(&self) -> bool {
        self.slices.is_empty()
    }

    /// Whether `other` says the same slices (names and specs, whatever
    /// their generation or pass).
    pub fn same_slices(&self, other: &Desired) -> bool {
        self.slices == other.slices
    }
}

/// One wanted slice, compactly.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Wanted {
    name: String,
    /// Its pool's name.
    pool: String,
    /// Its spec as JSON, at pool generation 0, compressed
    /// (`lz4_flex::compress_prepend_size`).
    spec: Box<[u8]>,
}

impl Wanted {
    /// `slice`, taken apart as it is serialized.
    fn new(slice: ResourceSlice) -> Self {
        let mut spec = slice.spec;
        spec.pool.generation = 0;
        Wanted {
            name: slice.metadata.name.unwrap_or_default(),
            pool: spec.pool.name.clone(),
            // A typed spec always serializes; empty bytes would fail to
            // read back, as an error.
            spec: lz4_flex::compress_prepend_size(&serde_json::to_vec(&spec).unwrap_or_default())
                .into(),
        }
    }

    /// Its spec, typed again, at pool generation `g`.
    fn spec(&self, g: i64) -> Result<ResourceSliceSpec, ApiError> {
        let unreadable = |e: &dyn std::fmt::Display| {
            ApiError(format!(
                "ResourceSlice {}: the wanted spec cannot be read back: {e}",
                self.name
            ))
        };
        let json = lz4_flex::decompress_size_prepended(&self.spec).map_err(|e| unreadable(&e))?;
        let mut spec: ResourceSliceSpec =
            serde_json::from_slice(&json).map_err(|e| unreadable(&e))?;
        spec.pool.generation = g;
        Ok(spec)
    }
}

/// What one round of writes wrote.
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

/// Our writes of one slice that the watch has not shown yet.
#[derive(Debug)]
struct Pending {
    /// The resourceVersions they got, oldest first.
    versions: Vec<String>,
    /// The slice since (`None`: deleted).
    now: Option<Held>,
}

/// A slice of ours as the server has it. Its spec is shared with the
/// content published when it says that: the slices are most of what the
/// driver holds, and a copy of each from the server would double it.
#[derive(Debug, Clone)]
struct Held {
    /// Its metadata (managed fields dropped).
    metadata: kube::api::ObjectMeta,
    /// Its pool generation.
    generation: i64,
    spec: HeldSpec,
}

#[derive(Debug, Clone)]
enum HeldSpec {
    /// What slice `.1` of the content `.0` says (at the held generation).
    Published(Arc<Desired>, usize),
    /// Anything else, as the server has it.
    Own(Box<ResourceSliceSpec>),
}

/// The index of `content`'s slice named `name` when `spec` says it.
fn saying(content: &Desired, name: Option<&str>, spec: &ResourceSliceSpec) -> Option<usize> {
    let i = content
        .slices
        .iter()
        .position(|w| Some(w.name.as_str()) == name)?;
    let want = content.slices.get(i)?.spec(0).ok()?;
    says(spec, &want, None).then_some(i)
}

impl Held {
    /// `slice`, sharing the spec of the slice of `content` of its name
    /// when it says that.
    fn new(mut slice: ResourceSlice, content: Option<&Arc<Desired>>) -> Self {
        slice.metadata.managed_fields = None;
        let generation = slice.spec.pool.generation;
        let same = content.and_then(|c| {
            let i = saying(c, slice.metadata.name.as_deref(), &slice.spec)?;
            Some(HeldSpec::Published(Arc::clone(c), i))
        });
        Held {
            metadata: slice.metadata,
            generation,
            spec: same.unwrap_or_else(|| HeldSpec::Own(Box::new(slice.spec))),
        }
    }

    fn pool(&self) -> &str {
        match &self.spec {
            HeldSpec::Published(c, i) => c.slices.get(*i).map_or("", |w| w.pool.as_str()),
            HeldSpec::Own(s) => s.pool.name.as_str(),
        }
    }

    /// Whether it says `want`, at generation `g` when given.
    fn says(&self, want: &Wanted, g: Option<i64>) -> bool {
        if g.is_some_and(|g| self.generation != g) {
            return false;
        }
        match &self.spec {
            HeldSpec::Published(c, i) => c.slices.get(*i).is_some_and(|w| w.spec == want.spec),
            HeldSpec::Own(s) => want.spec(0).is_ok_and(|w| says(s, &w, None)),
        }
    }

    /// The same, sharing `content`'s spec in place of one of an older
    /// content (the spec kept when `content` says otherwise).
    fn rebase(&mut self, content: &Arc<Desired>) {
        let HeldSpec::Published(old, i) = &self.spec else {
            return;
        };
        if Arc::ptr_eq(old, content) {
            return;
        }
        let Some(was) = old.slices.get(*i) else {
            return;
        };
        self.spec = match content.slices.iter().position(|w| w == was) {
            Some(j) => HeldSpec::Published(Arc::clone(content), j),
            None => match was.spec(self.generation) {
                Ok(s) => HeldSpec::Own(Box::new(s)),
                // Unreadable (never, in practice): the old content stays.
                Err(_) => return,
            },
        };
    }
}

/// What a round writes, at one generation.
#[derive(Debug, Default)]
struct Plan {
    /// Indexes of the wanted slices to create.
    create: Vec<usize>,
    /// Indexes of the wanted slices to replace.
    update: Vec<usize>,
    /// Names of the slices to delete.
    delete: Vec<String>,
}

impl Plan {
    fn is_empty(&self) -> bool {
        self.create.is_empty() && self.update.is_empty() && self.delete.is_empty()
    }
}

/// Publishes one node's slices of one driver.
pub struct Publisher {
    api: Api<ResourceSlice>,
    nodes: Api<Node>,
    /// The Node as the slices' owner, once read.
    owner: Option<OwnerReference>,
    driver: String,
    node: String,
    backoff: (Duration, Duration),
    /// The content published, once there is one.
    content: Option<Arc<Desired>>,
    /// Its pool generation.
    generation: i64,
    /// Our slices on the server as the last list and the watch since
    /// say (managed fields dropped).
    store: BTreeMap<String, Held>,
    /// Our writes the watch has not shown yet, by slice.
    pending: BTreeMap<String, Pending>,
    /// The resourceVersion to watch from (the list's, then the last
    /// event's or bookmark's); `None` until listed, and when the watched
    /// state is lost (a list is due).
    since: Option<String>,
    /// Lists made (the driver's debug log says how long each took).
    lists: u64,
    /// Whether the slices stay on the way out ([`Publisher::keep_on_exit`]).
    keep: bool,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("driver", &self.driver)
            .field("node", &self.node)
            .field("generation", &self.generation)
            .field("since", &self.since)
            .finish_non_exhaustive()
    }
}

/// What a watch's failure leads to, as client-go's reflector decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Watch again from the same resourceVersion.
    Rewatch,
    /// List again: the resourceVersion is gone (410), or the watch
    /// cannot be trusted.
    Relist,
}

/// What a failed watch request or a failing watch leads to: 429 and a
/// connection refused or broken watch again from where they were;
/// anything else (410 Gone or Expired, another error, an event that
/// cannot be read) lists again.
fn after_watch_failure(e: &kube::Error) -> Next {
    match e {
        kube::Error::Api(s) if s.code == 429 => Next::Rewatch,
        kube::Error::HyperError(_) | kube::Error::ReadEvents(_) | kube::Error::Service(_) => {
            Next::Rewatch
        }
        _ => Next::Relist,
    }
}

/// Whether `e` is a 410: the resourceVersion watched from is compacted
/// away (an expected end, not a failure to log).
fn gone(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 410)
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
            store: BTreeMap::new(),
            pending: BTreeMap::new(),
            since: None,
            lists: 0,
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

    /// Lists our slices (what the field selectors gave and is ours
    /// indeed) into the store: the watched state starts again from the
    /// list's resourceVersion.
    async fn list(&mut self) -> Result<(), ApiError> {
        let started = Instant::now();
        let list = self
            .api
            .list(&ListParams::default().fields(&self.selector()))
            .await
            .map_err(|e| error(&self.what(), "list", &e))?;
        self.lists += 1;
        self.store.clear();
        // The list is newer than every write of ours that was answered.
        self.pending.clear();
        for s in list.items {
            if let (true, Some(name)) = (self.ours(&s), s.metadata.name.clone()) {
                let held = Held::new(s, self.content.as_ref());
                self.store.insert(name, held);
            }
        }
        self.since = list.metadata.resource_version;
        tracing::debug!(
            "{}: list took {} ms ({} slices)",
            self.what(),
            started.elapsed().as_millis(),
            self.store.len()
        );
        Ok(())
    }

    /// Our slices as they are now: the watched state, with our writes
    /// the watch has not shown yet over it.
    fn view(&self) -> BTreeMap<&str, &Held> {
        let mut view: BTreeMap<&str, &Held> = self
            .store
            .iter()
            .filter(|(n, _)| !self.pending.contains_key(*n))
            .map(|(n, s)| (n.as_str(), s))
            .collect();
        for (name, p) in &self.pending {
            if let Some(s) = &p.now {
                view.insert(name.as_str(), s);
            }
        }
        view
    }

    /// Makes the server's slices say `desired`: one round (a list, then
    /// the writes). The pool generation is set here.
    ///
    /// # Errors
    /// The first call to the API server that failed, naming the slice.
    pub async fn sync(&mut self, desired: &[ResourceSlice]) -> Result<Outcome, ApiError> {
        self.list().await?;
        let desired = Arc::new(Desired::new(desired.to_vec(), Instant::now()));
        self.reconcile(&desired).await
    }

    /// What writing `desired` at generation `g` over `view` takes, with
    /// the slices owned by `owner`.
    fn plan(
        view: &BTreeMap<&str, &Held>,
        desired: &[Wanted],
        g: i64,
        owner: Option<&OwnerReference>,
    ) -> Plan {
        let mut plan = Plan::default();
        for (i, want) in desired.iter().enumerate() {
            match view.get(want.name.as_str()) {
                None => plan.create.push(i),
                Some(e) => {
                    let refs = e.metadata.owner_references.as_deref().unwrap_or_default();
                    let owned = owner.is_none_or(|o| refs.contains(o));
                    if !owned || !e.says(want, Some(g)) {
                        plan.update.push(i);
                    }
                }
            }
        }
        let wanted: BTreeSet<&str> = desired.iter().map(|s| s.name.as_str()).collect();
        plan.delete = view
            .keys()
            .filter(|n| !wanted.contains(*n))
            .map(|n| (*n).to_string())
            .collect();
        plan
    }

    /// Makes the slices say `desired` from what is held of them (no
    /// list): writes only what differs, and sets the pool generation
    /// (see the module's doc).
    async fn reconcile(&mut self, desired: &Arc<Desired>) -> Result<Outcome, ApiError> {
        let wanted = desired.slices.as_slice();
        let pool = wanted
            .first()
            .map_or(self.node.as_str(), |s| s.pool.as_str())
            .to_string();
        let changed = !self
            .content
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(c, desired) || c.same_slices(desired));
        // The owner: read at the first round, and again when a slice is
        // to be created (the Node may be a new one of the same name).
        let missing = {
            let view = self.view();
            wanted.iter().any(|s| !view.contains_key(s.name.as_str()))
        };
        if self.owner.is_none() || missing {
            self.owner = Some(self.read_owner().await?);
        }
        let (plan, generation) = {
            let view = self.view();
            let seen = view
                .values()
                .filter(|s| s.pool() == pool)
                .map(|s| s.generation)
                .max();
            let owner = self.owner.as_ref();
            if self.content.is_some() && seen.is_some_and(|g| g > self.generation) {
                // Someone published the pool above us: ours would not count.
                let g = seen.unwrap_or(0).saturating_add(1);
                (Self::plan(&view, wanted, g, owner), g)
            } else {
                let base = if self.content.is_some() {
                    self.generation
                } else {
                    seen.unwrap_or(0)
                };
                let plan = Self::plan(&view, wanted, base, owner);
                let one_update =
                    plan.create.is_empty() && plan.delete.is_empty() && plan.update.len() == 1;
                if plan.is_empty() || !changed || (one_update && base > 0) {
                    // Adopted as it is; a repair; one slice replaced.
                    (plan, base)
                } else {
                    let g = base.saturating_add(1);
                    (Self::plan(&view, wanted, g, owner), g)
                }
            }
        };
        self.generation = generation;
        self.content = Some(Arc::clone(desired));
        // What the server holds shares the new content, not the old.
        for h in self.store.values_mut() {
            h.rebase(desired);
        }
        for h in self.pending.values_mut().filter_map(|p| p.now.as_mut()) {
            h.rebase(desired);
        }
        self.write(&plan, wanted, generation).await
    }

    /// Makes the writes of `plan`.
    async fn write(
        &mut self,
        plan: &Plan,
        wanted: &[Wanted],
        generation: i64,
    ) -> Result<Outcome, ApiError> {
        let mut out = Outcome {
            generation,
            ..Outcome::default()
        };
        let owners: Vec<OwnerReference> = self.owner.iter().cloned().collect();
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PostParams::default()
        };
        for &i in &plan.update {
            let Some(want) = wanted.get(i) else { continue };
            let name = want.name.clone();
            let what = format!("ResourceSlice {name}");
            let Some(metadata) = self.view().get(name.as_str()).map(|s| s.metadata.clone()) else {
                continue;
            };
            let mut slice = ResourceSlice {
                metadata,
                spec: want.spec(generation)?,
            };
            // Ours in place of any other Node's; other owners kept.
            let mut refs: Vec<OwnerReference> = slice
                .metadata
                .owner_references
                .take()
                .unwrap_or_default()
                .into_iter()
                .filter(|r| r.kind != "Node")
                .collect();
            refs.extend(owners.iter().cloned());
            slice.metadata.owner_references = Some(refs);
            let done = self
                .api
                .replace(&name, &params, &slice)
                .await
                .map_err(|e| error(&what, "update", &e))?;
            self.wrote(&name, Some(done));
            out.updated += 1;
        }
        for &i in &plan.create {
            let Some(want) = wanted.get(i) else { continue };
            let name = want.name.clone();
            let what = format!("ResourceSlice {name}");
            let slice = ResourceSlice {
                metadata: kube::api::ObjectMeta {
                    name: Some(name.clone()),
                    owner_references: Some(owners.clone()),
                    ..kube::api::ObjectMeta::default()
                },
                spec: want.spec(generation)?,
            };
            let done = self
                .api
                .create(&params, &slice)
                .await
                .map_err(|e| error(&what, "create", &e))?;
            self.wrote(&name, Some(done));
            out.created += 1;
        }
        for name in &plan.delete {
            let held = self
                .view()
                .get(name.as_str())
                .map(|s| (s.metadata.uid.clone(), s.metadata.resource_version.clone()));
            let Some((uid, rv)) = held else { continue };
            self.delete(name, uid, rv).await?;
            out.deleted += 1;
        }
        Ok(out)
    }

    /// Notes our write of `name`: what the server answered (`None`:
    /// deleted, at `rv`).
    fn wrote(&mut self, name: &str, done: Option<ResourceSlice>) {
        self.wrote_at(name, done, None);
    }

    fn wrote_at(&mut self, name: &str, done: Option<ResourceSlice>, deleted_at: Option<String>) {
        let rv = match &done {
            Some(s) => s.metadata.resource_version.clone(),
            None => deleted_at,
        };
        let now = done.map(|s| Held::new(s, self.content.as_ref()));
        let p = self.pending.entry(name.to_string()).or_insert(Pending {
            versions: Vec::new(),
            now: None,
        });
        p.now = now;
        // A write whose resourceVersion is not known (a delete answered
        // with a Status) is held until the watch shows the slice again
        // or a list replaces the store.
        p.versions.extend(rv);
    }

    /// Deletes `name` (with `uid` and `rv` as preconditions when known).
    async fn delete(
        &mut self,
        name: &str,
        uid: Option<String>,
        rv: Option<String>,
    ) -> Result<(), ApiError> {
        let params = DeleteParams {
            preconditions: (uid.is_some() || rv.is_some()).then_some(Preconditions {
                uid,
                resource_version: rv,
            }),
            ..DeleteParams::default()
        };
        match self.api.delete(name, &params).await {
            Ok(done) => {
                let at = done
                    .left()
                    .and_then(|s| s.metadata.resource_version.clone());
                self.wrote_at(name, None, at);
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {
                self.wrote_at(name, None, None);
                Ok(())
            }
            Err(e) => Err(error(&format!("ResourceSlice {name}"), "delete", &e)),
        }
    }

    /// Deletes all our slices (listed now); how many there were.
    ///
    /// # Errors
    /// The first call to the API server that failed.
    pub async fn delete_all(&mut self) -> Result<usize, ApiError> {
        self.list().await?;
        let names: Vec<String> = self.store.keys().cloned().collect();
        for name in &names {
            // Whatever it says now: no preconditions.
            self.delete(name, None, None).await?;
        }
        self.content = None;
        Ok(names.len())
    }

    /// Applies a watch event to the store: whether it is news (a slice of
    /// ours changed by someone else; our own writes and bookmarks only
    /// move the resourceVersion on). An error event is the caller's.
    fn apply(&mut self, event: WatchEvent<ResourceSlice>) -> bool {
        let (slice, deleted) = match event {
            WatchEvent::Added(s) | WatchEvent::Modified(s) => (s, false),
            WatchEvent::Deleted(s) => (s, true),
            WatchEvent::Bookmark(b) => {
                self.since = Some(b.metadata.resource_version);
                return false;
            }
            WatchEvent::Error(_) => return false,
        };
        let rv = slice.metadata.resource_version.clone();
        if let Some(rv) = &rv {
            self.since = Some(rv.clone());
        }
        if !self.ours(&slice) {
            return false;
        }
        let Some(name) = slice.metadata.name.clone() else {
            return false;
        };
        if deleted {
            self.store.remove(&name);
        } else {
            let held = Held::new(slice, self.content.as_ref());
            self.store.insert(name.clone(), held);
        }
        let Some(p) = self.pending.get_mut(&name) else {
            return true;
        };
        match rv.and_then(|rv| p.versions.iter().position(|v| *v == rv)) {
            // One of our writes: the watch has caught up with it.
            Some(i) => {
                p.versions.drain(..=i);
                if p.versions.is_empty() {
                    self.pending.remove(&name);
                }
                false
            }
            // Someone else's, after ours (a write of ours carries the
            // resourceVersion it saw, so nothing older can follow it).
            None => {
                self.pending.remove(&name);
                true
            }
        }
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
        let mut retry = Retry::new(self.backoff);
        let mut watch: Option<WatchStream> = None;
        // When the watch started, and whether it has sent anything.
        let mut watched = (tokio::time::Instant::now(), false);
        // The pass whose slices were last written.
        let mut last_pass: Option<Instant> = None;
        loop {
            if retry.due() && self.since.is_none() {
                // The watched state is lost (or not there yet): list.
                watch = None;
                match self.list().await {
                    Ok(()) => {
                        retry.listed(&self.what());
                        dirty |= desired.borrow().is_some();
                    }
                    Err(e) => retry.failed(&e.0),
                }
            }
            if dirty && retry.due() && self.since.is_some() {
                let want = desired.borrow().clone();
                let result = match &want {
                    Some(d) => self.reconcile(d).await.map(Some),
                    None => Ok(None),
                };
                match result {
                    Ok(out) => {
                        dirty = false;
                        retry.worked(&self.what());
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
                    Err(e) => retry.failed(&e.0),
                }
            }
            if watch.is_none()
                && retry.due()
                && let Some(rv) = self.since.clone()
            {
                let params = WatchParams::default()
                    .fields(&self.selector())
                    .timeout(WATCH_TIMEOUT_S);
                match self.api.watch(&params, &rv).await {
                    Ok(s) => {
                        watch = Some(Box::pin(s));
                        watched = (tokio::time::Instant::now(), false);
                    }
                    Err(e) => {
                        self.watch_failed(&e, &mut retry);
                        continue;
                    }
                }
            }
            tokio::select! {
                biased;
                _ = stop.wait_for(|s| *s) => break,
                r = desired.changed() => {
                    if r.is_err() {
                        break;
                    }
                    dirty = true;
                    // New content goes out at once.
                    retry.now();
                }
                ev = next_event(&mut watch) => match ev {
                    Some(Ok(WatchEvent::Error(s))) => {
                        watch = None;
                        self.watch_failed(&kube::Error::Api(s), &mut retry);
                    }
                    Some(Ok(event)) => {
                        watched.1 = true;
                        retry.watching();
                        if self.apply(event) {
                            dirty = true;
                        }
                    }
                    Some(Err(e)) => {
                        watch = None;
                        self.watch_failed(&e, &mut retry);
                    }
                    // Ended (its timeout): watch again from where it was;
                    // ended at once with nothing sent, as a failure (a
                    // proxy that cuts watches would have us loop).
                    None => {
                        watch = None;
                        if !watched.1 && watched.0.elapsed() < SHORT_WATCH {
                            self.since = None;
                            retry.failed(&format!(
                                "{}: the watch ended at once, with nothing sent; listing again",
                                self.what()
                            ));
                        }
                    }
                },
                () = retry.sleep() => {}
            }
        }
        drop(watch);
        if self.keep {
            tracing::info!("{}: left for the driver's next instance", self.what());
        } else {
            self.shut_down().await;
        }
    }

    /// A watch that could not start or ended with `e`: watched again
    /// from where it was, or listed again (see [`after_watch_failure`]),
    /// after the backoff. A 410 is expected (bookmarks make it rare) and
    /// logged at debug only.
    fn watch_failed(&mut self, e: &kube::Error, retry: &mut Retry) {
        let next = after_watch_failure(e);
        if next == Next::Relist {
            self.since = None;
        }
        let message = error(&self.what(), "watch", e).0;
        if gone(e) {
            tracing::debug!("{message}; listing again");
            retry.later();
        } else {
            retry.failed(&message);
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

/// The backoff between tries, and the log of a streak of failures.
struct Retry {
    min: Duration,
    max: Duration,
    /// The next wait.
    wait: Duration,
    /// When the next try is due, if not now.
    at: Option<tokio::time::Instant>,
    /// The first failure of the streak, logged; the streak's count.
    failing: Option<(String, u32)>,
}

impl Retry {
    fn new((min, max): (Duration, Duration)) -> Self {
        Retry {
            min,
            max,
            wait: min,
            at: None,
            failing: None,
        }
    }

    /// Whether the next try is due.
    fn due(&self) -> bool {
        self.at.is_none_or(|t| tokio::time::Instant::now() >= t)
    }

    /// The next try now.
    fn now(&mut self) {
        self.at = None;
    }

    /// The next try after the backoff, which grows.
    fn later(&mut self) {
        self.at = Some(tokio::time::Instant::now() + self.wait);
        self.wait = (self.wait * 2).min(self.max);
    }

    /// A failure: logged as an error if it is the first of a streak (the
    /// others at debug); the next try after the backoff.
    fn failed(&mut self, e: &str) {
        match &mut self.failing {
            Some((_, n)) => {
                *n += 1;
                tracing::debug!("{e}; retrying in {} ms", self.wait.as_millis());
            }
            None => {
                tracing::error!(
                    "{e}; retrying in {} ms, then with backoff (further failures are not logged until it works)",
                    self.wait.as_millis()
                );
                self.failing = Some((e.to_string(), 1));
            }
        }
        self.later();
    }

    /// A list worked: the streak (of failed lists or watches) is over,
    /// but the backoff stays until the watch or a round works.
    fn listed(&mut self, what: &str) {
        if let Some((_, n)) = self.failing.take() {
            tracing::info!("{what}: listed again after {n} failures");
        }
    }

    /// The watch delivered an event: it works.
    fn watching(&mut self) {
        self.wait = self.min;
    }

    /// A round of writes worked.
    fn worked(&mut self, what: &str) {
        self.at = None;
        self.wait = self.min;
        if let Some((_, n)) = self.failing.take() {
            tracing::info!("{what}: published again after {n} failures");
        }
    }

    /// Until the next try is due; never, when it is now.
    async fn sleep(&self) {
        match self.at {
            Some(t) => tokio::time::sleep_until(t).await,
            None => std::future::pending().await,
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

/// Whether the server's `existing` says `want`, at generation `g` when
/// given (`want`'s own generation is not compared): the same but for what
/// the server fills in (a taint's timeAdded we left empty). Nothing is
/// copied but a device with such a taint.
fn says(existing: &ResourceSliceSpec, want: &ResourceSliceSpec, g: Option<i64>) -> bool {
    let ResourceSliceSpec {
        all_nodes,
        devices,
        driver,
        node_name,
        node_selector,
        per_device_node_selection,
        pool,
        shared_counters,
    } = existing;
    pool.name == want.pool.name
        && pool.resource_slice_count == want.pool.resource_slice_count
        && g.is_none_or(|g| pool.generation == g)
        && *all_nodes == want.all_nodes
        && *driver == want.driver
        && *node_name == want.node_name
        && *node_selector == want.node_selector
        && *per_device_node_selection == want.per_device_node_selection
        && *shared_counters == want.shared_counters
        && match (devices, &want.devices) {
            (Some(e), Some(w)) => {
                e.len() == w.len() && e.iter().zip(w).all(|(e, w)| device_says(e, w))
            }
            (e, w) => e == w,
        }
}

/// Whether the server's device `e` says `w`, but for taint times the
/// server filled in.
fn device_says(e: &Device, w: &Device) -> bool {
    let filled = |t: &Option<Vec<k8s_openapi::api::resource::v1::DeviceTaint>>| {
        t.as_ref()
            .is_some_and(|t| t.iter().any(|t| t.time_added.is_none()))
    };
    if !filled(&w.taints) {
        return e == w;
    }
    let mut e = e.clone();
    if let (Some(et), Some(wt)) = (e.taints.as_mut(), w.taints.as_ref()) {
        for (et, wt) in et.iter_mut().zip(wt) {
            if wt.time_added.is_none() {
                et.time_added = None;
            }
        }
    }
    e == *w
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1::DeviceTaint;
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
        assert!(says(&existing, &want, None));
        let mut other = existing.clone();
        if let Some(d) = other.devices.as_mut().and_then(|d| d.first_mut()) {
            d.name = "b".into();
        }
        assert!(!says(&other, &want, None));
    }

    /// A slice named `name` of pool `node` with devices `devices`, at
    /// pool generation `g`.
    fn slice(name: &str, devices: &[&str], g: i64) -> ResourceSlice {
        ResourceSlice {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                ..kube::api::ObjectMeta::default()
            },
            spec: ResourceSliceSpec {
                driver: "dra.cdigen.io".into(),
                node_name: Some("node".into()),
                pool: k8s_openapi::api::resource::v1::ResourcePool {
                    name: "node".into(),
                    generation: g,
                    resource_slice_count: 1,
                },
                devices: Some(
                    devices
                        .iter()
                        .map(|d| Device {
                            name: (*d).into(),
                            ..Device::default()
                        })
                        .collect(),
                ),
                ..ResourceSliceSpec::default()
            },
        }
    }

    #[test]
    fn wanted_slices_read_back_as_they_were_at_the_generation_asked() {
        let s = slice("s-0", &["a", "b"], 4);
        let content = Desired::new(vec![s.clone()], Instant::now());
        let w = &content.slices[0];
        assert_eq!(w.name, "s-0");
        assert_eq!(w.pool, "node");
        let mut at_7 = s.spec.clone();
        at_7.pool.generation = 7;
        assert_eq!(w.spec(7).unwrap(), at_7);
        // Held as compressed JSON: no typed copy.
        let json = lz4_flex::decompress_size_prepended(&w.spec).unwrap();
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&json).unwrap()["pool"]["generation"],
            0
        );
        for (bytes, why) in [
            (lz4_flex::compress_prepend_size(b"{"), "EOF while parsing"),
            (b"{".to_vec(), "expected another byte"),
        ] {
            let broken = Wanted {
                spec: bytes.into(),
                ..w.clone()
            };
            let e = broken.spec(1).unwrap_err().0;
            assert!(
                e.starts_with("ResourceSlice s-0: the wanted spec cannot be read back:"),
                "{e}"
            );
            assert!(e.contains(why), "{e}");
        }
    }

    #[test]
    fn contents_are_the_same_whatever_their_generation_and_pass() {
        let a = Desired::new(vec![slice("s-0", &["a", "b"], 0)], Instant::now());
        let b = Desired::new(vec![slice("s-0", &["a", "b"], 3)], Instant::now());
        let c = Desired::new(vec![slice("s-0", &["a"], 0)], Instant::now());
        let d = Desired::new(vec![slice("s-1", &["a", "b"], 0)], Instant::now());
        assert!(a.same_slices(&b));
        assert!(!a.same_slices(&c));
        assert!(!a.same_slices(&d));
        // A slice from the server saying it is held as the content's.
        let a = Arc::new(a);
        let held = Held::new(slice("s-0", &["a", "b"], 2), Some(&a));
        assert!(matches!(held.spec, HeldSpec::Published(_, 0)));
        assert!(held.says(&a.slices[0], Some(2)));
        assert!(!held.says(&a.slices[0], Some(3)));
        let other = Held::new(slice("s-0", &["a"], 2), Some(&a));
        assert!(matches!(other.spec, HeldSpec::Own(_)));
        assert!(!other.says(&a.slices[0], None));
        assert!(other.says(&c.slices[0], Some(2)));
    }

    #[test]
    fn generations_are_compared_only_when_asked() {
        let want = ResourceSliceSpec::default();
        let mut existing = want.clone();
        existing.pool.generation = 3;
        assert!(says(&existing, &want, None));
        assert!(says(&existing, &want, Some(3)));
        assert!(!says(&existing, &want, Some(4)));
        existing.pool.resource_slice_count = 2;
        assert!(!says(&existing, &want, None));
    }

    #[test]
    fn watch_failures_lead_where_the_reflector_goes() {
        let status = |code: u16, reason: &str| {
            kube::Error::Api(
                kube::core::Status {
                    code,
                    reason: reason.into(),
                    ..kube::core::Status::default()
                }
                .boxed(),
            )
        };
        assert_eq!(after_watch_failure(&status(410, "Expired")), Next::Relist);
        assert_eq!(after_watch_failure(&status(410, "Gone")), Next::Relist);
        assert!(gone(&status(410, "Expired")));
        assert!(!gone(&status(500, "InternalError")));
        assert_eq!(
            after_watch_failure(&status(429, "TooManyRequests")),
            Next::Rewatch
        );
        assert_eq!(
            after_watch_failure(&status(500, "InternalError")),
            Next::Relist
        );
        assert_eq!(after_watch_failure(&status(403, "Forbidden")), Next::Relist);
        let io = std::io::Error::other("connection reset");
        assert_eq!(
            after_watch_failure(&kube::Error::ReadEvents(io)),
            Next::Rewatch
        );
        let bad = serde_json::from_str::<u8>("x").unwrap_err();
        assert_eq!(
            after_watch_failure(&kube::Error::SerdeError(bad)),
            Next::Relist
        );
    }
}
