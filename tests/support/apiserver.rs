//! A small in-process fake Kubernetes API server for the DRA driver's
//! tests: plain HTTP/1.1 on 127.0.0.1, written by hand (std threads, one
//! per connection), holding ResourceClaims and ResourceSlices
//! (`resource.k8s.io/v1`) as JSON, and implementing just the calls the
//! `kube` client makes for them: GET, LIST with `fieldSelector`, POST, PUT
//! (resourceVersion checked), PATCH of a claim's status (JSON merge patch,
//! resourceVersion checked), DELETE (with DeleteOptions' UID and
//! resourceVersion preconditions), and WATCH of ResourceSlices.
//!
//! The watch is the API server's (its watch cache, storage/cacher): JSON
//! lines in a chunked response, with the field selector, from a
//! resourceVersion (from `0` or none: the objects held, as ADDED events,
//! then what follows), until `timeoutSeconds`. With
//! `allowWatchBookmarks=true`, BOOKMARK events (an empty ResourceSlice
//! whose metadata holds only the resourceVersion the server is at) when a
//! test asks ([`FakeApi::bookmark`], as the server does about every
//! minute) and right before the timeout ends the watch. Events up to a
//! resourceVersion can be compacted away ([`FakeApi::compact`]): a watch
//! from before then gets the cacher's answer, a 200 whose one event is
//! an ERROR with a 410 Expired Status, "too old resource version".
//!
//! It also holds Nodes (GET; deleting one deletes the slices it owns, as
//! the garbage collector does).
//!
//! Every request is authorized as the real server authorizes the driver's
//! service account: against the ClusterRole of
//! `deploy/kubernetes/overlays/dra/rbac.yaml` (RBAC's matching of API group,
//! resource, subresource, verb and resourceNames; 403 when no rule
//! allows), the token naming the pod's node. A status write that changes
//! `status.devices` of an allocated claim is checked as 1.36's
//! `DRAResourceClaimGranularStatusAuthorization` does
//! (pkg/registry/resource/utils.go, `AuthorizedForDeviceStatus`): for each
//! driver whose entries change, the synthetic `resourceclaims/driver`
//! subresource named after the driver, verb `associated-node:<verb>` when
//! the token's node is the one the claim is allocated on, else (or
//! failing that) `arbitrary-node:<verb>`; 422 Invalid when none is
//! allowed.
//!
//! Every request, every authorization check and every write is recorded;
//! the next requests can be made to fail, or those for claims to hang; a
//! wipe deletes a node's slices as the kubelet does.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const GROUP: &str = "/apis/resource.k8s.io/v1";

/// The node of the driver pod's token, and the one Node held, unless the
/// server is started with [`FakeApi::start_on`].
pub const TOKEN_NODE: &str = "node-a";

/// The driver's service account, as the API server names the user.
pub const USER: &str = "system:serviceaccount:cdigen:cdigen-dra";

/// One rule of a ClusterRole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rule {
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub verbs: Vec<String>,
    pub resource_names: Vec<String>,
}

/// What an authorizer is asked: RBAC's request attributes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Attributes {
    pub verb: String,
    pub api_group: String,
    pub resource: String,
    /// Empty for none.
    pub subresource: String,
    /// Empty at the cluster scope.
    pub namespace: String,
    /// Empty for a collection.
    pub name: String,
}

impl Attributes {
    /// `resource` or `resource/subresource`.
    pub fn resource_path(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// One authorization check: what was asked and whether it was allowed.
#[derive(Debug, Clone)]
pub struct Check {
    pub attributes: Attributes,
    pub allowed: bool,
}

/// Whether `rule` allows `a`, as RBAC matches (rbac/v1 helpers: `*`
/// matches any group, resource or verb; resourceNames, when given, only
/// requests for one of those names).
pub fn rule_allows(rule: &Rule, a: &Attributes) -> bool {
    let any = |list: &[String], v: &str| list.iter().any(|x| x == "*" || x == v);
    let resource = a.resource_path();
    any(&rule.verbs, &a.verb)
        && any(&rule.api_groups, &a.api_group)
        && rule.resources.iter().any(|r| r == "*" || *r == resource)
        && (rule.resource_names.is_empty() || rule.resource_names.contains(&a.name))
}

/// Whether any of `rules` allows `a`.
pub fn allows(rules: &[Rule], a: &Attributes) -> bool {
    rules.iter().any(|r| rule_allows(r, a))
}

/// The rules of the ClusterRole `name` in the YAML documents of `path`.
pub fn cluster_role(path: &Path, name: &str) -> Vec<Rule> {
    let text = std::fs::read_to_string(path).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let role = docs
        .iter()
        .find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no ClusterRole {name} in {}", path.display()));
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    };
    role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| Rule {
            api_groups: strings(&r["apiGroups"]),
            resources: strings(&r["resources"]),
            verbs: strings(&r["verbs"]),
            resource_names: strings(&r["resourceNames"]),
        })
        .collect()
}

/// The driver's ClusterRole as deployed (deploy/kubernetes/overlays/dra/rbac.yaml).
pub fn shipped_rules() -> Vec<Rule> {
    cluster_role(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/overlays/dra/rbac.yaml"),
        "cdigen-dra",
    )
}

/// One request the server answered.
#[derive(Debug, Clone)]
pub struct Request {
    /// GET, POST, PUT, PATCH, DELETE.
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The query, undecoded.
    pub query: String,
    /// The status it got.
    pub status: u16,
    /// What it asked of the authorizer.
    pub attributes: Attributes,
}

/// One write that changed the store.
#[derive(Debug, Clone)]
pub struct Write {
    /// `create`, `update`, `delete`, `patch`.
    pub verb: String,
    /// `resourceslices` or `resourceclaims`.
    pub resource: String,
    /// The object's name.
    pub name: String,
    /// The object after the write (before, for a delete).
    pub object: Value,
    /// When it was made.
    pub at: Instant,
    /// The field manager the client named (`?fieldManager=`).
    pub field_manager: Option<String>,
}

#[derive(Default)]
struct State {
    rv: u64,
    /// ResourceSlices by name.
    slices: BTreeMap<String, Value>,
    /// ResourceClaims by (namespace, name).
    claims: BTreeMap<(String, String), Value>,
    /// Slice events: (resourceVersion, type, object), those after
    /// `compacted`.
    events: Vec<(u64, &'static str, Value)>,
    /// The resourceVersion up to which events are compacted away.
    compacted: u64,
    /// Bumped to send a bookmark on every open watch that allows them.
    bookmark_epoch: u64,
    /// Bookmarks sent.
    bookmarks_sent: usize,
    requests: Vec<Request>,
    writes: Vec<Write>,
    /// How many of the next requests fail, and with which status.
    fail: Option<(usize, u16)>,
    /// Before the next status patch: a write by someone else to that
    /// claim (so the patch conflicts).
    interfere: Option<Value>,
    /// Bumped to end every open watch.
    watch_epoch: u64,
    /// While set, requests for ResourceClaims hang (a hung API server).
    hang_claims: bool,
    /// Requests hanging now.
    hanging: usize,
    /// Nodes by name.
    nodes: BTreeMap<String, Value>,
    /// The ClusterRole's rules; `None`: everything is allowed.
    rules: Option<Vec<Rule>>,
    /// The node the token names (`authentication.kubernetes.io/node-name`).
    token_node: Option<String>,
    checks: Vec<Check>,
    /// Namespaces' labels, by name (for admin access; a namespace not
    /// here does not exist).
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
}

impl State {
    /// Asks the authorizer; records the check.
    fn authorize(&mut self, attributes: Attributes) -> bool {
        let allowed = self.rules.as_ref().is_none_or(|r| allows(r, &attributes));
        self.checks.push(Check {
            attributes,
            allowed,
        });
        allowed
    }
}

/// The fake API server; it runs until the test process ends.
#[derive(Clone)]
pub struct FakeApi {
    state: Arc<(Mutex<State>, Condvar)>,
    /// `http://127.0.0.1:<port>`.
    pub url: String,
}

impl FakeApi {
    /// Starts one on a free port, authorizing as the deployed ClusterRole
    /// a driver pod on [`TOKEN_NODE`], which is the one Node held.
    pub fn start() -> FakeApi {
        FakeApi::start_on(TOKEN_NODE)
    }

    /// The same, the pod (and the one Node) on `node`.
    pub fn start_on(node: &str) -> FakeApi {
        let api = FakeApi::start_bare();
        api.set_rules(Some(shipped_rules()));
        api.set_token_node(Some(node));
        api.put_node(node);
        api
    }

    fn start_bare() -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let api = FakeApi {
            state: Arc::new((Mutex::new(State::default()), Condvar::new())),
            url,
        };
        let server = api.clone();
        thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let server = server.clone();
                thread::spawn(move || server.connection(conn));
            }
        });
        api
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A kubeconfig file in `dir` pointing at this server (no TLS, no
    /// credentials); its path.
    pub fn kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\n\
users:\n- name: fake\n  user: {{}}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n\
current-context: fake\n",
            self.url
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    /// A kube client for this server.
    pub fn client(&self) -> kube::Client {
        let config = kube::Config::new(self.url.parse().unwrap());
        kube::Client::try_from(config).unwrap()
    }

    // ---- what tests see and do ----

    /// Authorizes with `rules` from now on (`None`: allows everything).
    pub fn set_rules(&self, rules: Option<Vec<Rule>>) {
        self.lock().rules = rules;
    }

    /// The node the token names from now on (`None`: none, as without
    /// ServiceAccountTokenPodNodeInfo).
    pub fn set_token_node(&self, node: Option<&str>) {
        self.lock().token_node = node.map(str::to_string);
    }

    /// The authorization checks so far.
    pub fn checks(&self) -> Vec<Check> {
        self.lock().checks.clone()
    }

    /// Creates the Node `name`, or re-creates it (its slices then go, as
    /// with [`FakeApi::delete_node`]): its new UID.
    pub fn put_node(&self, name: &str) -> String {
        self.delete_node(name);
        let mut s = self.lock();
        s.rv += 1;
        let uid = format!("node-uid-{}", s.rv);
        let node = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": uid, "resourceVersion": s.rv.to_string()},
        });
        s.nodes.insert(name.to_string(), node);
        uid
    }

    /// The UID of the Node `name`, if held.
    pub fn node_uid(&self, name: &str) -> Option<String> {
        self.lock()
            .nodes
            .get(name)
            .map(|n| n["metadata"]["uid"].as_str().unwrap().to_string())
    }

    /// Deletes the Node `name`, and as the garbage collector does, the
    /// slices whose owner is a Node that no longer exists: how many.
    pub fn delete_node(&self, name: &str) -> usize {
        let mut s = self.lock();
        s.nodes.remove(name);
        let live: Vec<Value> = s
            .nodes
            .values()
            .map(|n| n["metadata"]["uid"].clone())
            .collect();
        let orphans: Vec<String> = s
            .slices
            .iter()
            .filter(|(_, v)| {
                v["metadata"]["ownerReferences"]
                    .as_array()
                    .is_some_and(|o| {
                        o.iter()
                            .any(|r| r["kind"] == "Node" && !live.contains(&r["uid"]))
                    })
            })
            .map(|(n, _)| n.clone())
            .collect();
        for n in &orphans {
            delete_slice(&mut s, n);
        }
        drop(s);
        self.state.1.notify_all();
        orphans.len()
    }

    /// The slices held now, by name.
    pub fn slices(&self) -> BTreeMap<String, Value> {
        self.lock().slices.clone()
    }

    /// The writes so far.
    pub fn writes(&self) -> Vec<Write> {
        self.lock().writes.clone()
    }

    /// How many writes so far: a cheap test of whether anything changed
    /// (for a poller that must not hold the lock the server answers under
    /// while it copies every object).
    #[allow(dead_code)] // the bench's
    pub fn write_count(&self) -> usize {
        self.lock().writes.len()
    }

    /// The resource and time of each write so far, without the objects.
    #[allow(dead_code)] // the bench's
    pub fn write_times(&self) -> Vec<(String, Instant)> {
        self.lock()
            .writes
            .iter()
            .map(|w| (w.resource.clone(), w.at))
            .collect()
    }

    /// The requests so far.
    pub fn requests(&self) -> Vec<Request> {
        self.lock().requests.clone()
    }

    /// The claim `namespace/name`.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<Value> {
        self.lock()
            .claims
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// Creates namespace `name` with `labels` (for admin access:
    /// [`ADMIN_LABEL`]).
    pub fn put_namespace(&self, name: &str, labels: &[(&str, &str)]) {
        let labels = labels
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
        self.lock().namespaces.insert(name.to_string(), labels);
    }

    /// Stores `claim` (as someone else would), with a new resourceVersion.
    /// Admin access in its spec or allocation needs its namespace labelled
    /// (as the API server's checks of a create and of a status write
    /// require); a claim the API server would refuse is a mistake of the
    /// test, and panics with the API server's message.
    pub fn put_claim(&self, mut claim: Value) {
        let mut s = self.lock();
        let ns = claim["metadata"]["namespace"].as_str().unwrap().to_string();
        let asked = claim["spec"]["devices"]["requests"]
            .as_array()
            .into_iter()
            .flatten()
            .position(|r| r["exactly"]["adminAccess"] == json!(true))
            .map(|i| format!("spec.devices.requests[{i}].adminAccess"));
        let refused = asked.and_then(|path| admin_namespace_refused(&s, &ns, &path));
        let refused =
            refused.or_else(|| admin_access_refused(&s, &ns, &Value::Null, &claim["status"]));
        if let Some(message) = refused {
            panic!("the API server refuses this claim: {message}");
        }
        s.rv += 1;
        let name = claim["metadata"]["name"].as_str().unwrap().to_string();
        claim["apiVersion"] = json!("resource.k8s.io/v1");
        claim["kind"] = json!("ResourceClaim");
        claim["metadata"]["resourceVersion"] = json!(s.rv.to_string());
        s.claims.insert((ns, name), claim);
    }

    /// Before the next status patch, `status.devices` of that claim
    /// becomes `devices`, written by someone else: the patch conflicts.
    pub fn interfere_with_next_patch(&self, devices: Value) {
        self.lock().interfere = Some(devices);
    }

    /// Stores `slice` as someone else would (an ADDED or MODIFIED event).
    pub fn put_slice(&self, mut slice: Value) {
        let name = slice["metadata"]["name"].as_str().unwrap().to_string();
        slice["apiVersion"] = json!("resource.k8s.io/v1");
        slice["kind"] = json!("ResourceSlice");
        let mut s = self.lock();
        let kind = if s.slices.contains_key(&name) {
            "MODIFIED"
        } else {
            "ADDED"
        };
        store_slice(&mut s, &name, slice, kind);
        drop(s);
        self.state.1.notify_all();
    }

    /// Deletes the slice `name` as someone else would (a DELETED event);
    /// whether it was there.
    pub fn remove_slice(&self, name: &str) -> bool {
        let mut s = self.lock();
        let gone = delete_slice(&mut s, name).is_some();
        drop(s);
        self.state.1.notify_all();
        gone
    }

    /// How many bookmarks the watches have sent.
    pub fn bookmarks_sent(&self) -> usize {
        self.lock().bookmarks_sent
    }

    /// Deletes every slice of `node` (whatever the driver), as the kubelet
    /// does at start: DELETED events. How many.
    pub fn wipe(&self, node: &str) -> usize {
        let mut s = self.lock();
        let names: Vec<String> = s
            .slices
            .iter()
            .filter(|(_, v)| v["spec"]["nodeName"] == json!(node))
            .map(|(n, _)| n.clone())
            .collect();
        for n in &names {
            delete_slice(&mut s, n);
        }
        drop(s);
        self.state.1.notify_all();
        names.len()
    }

    /// The next `n` requests fail with `status` (a Status body).
    pub fn fail_next(&self, n: usize, status: u16) {
        self.lock().fail = Some((n, status));
    }

    /// While `hang` is set, every request for a ResourceClaim hangs,
    /// unanswered, until it is cleared.
    pub fn hang_claims(&self, hang: bool) {
        self.lock().hang_claims = hang;
        self.state.1.notify_all();
    }

    /// How many requests hang now.
    pub fn hanging(&self) -> usize {
        self.lock().hanging
    }

    /// Ends every open watch, without a bookmark (as an API server
    /// going away does).
    pub fn end_watches(&self) {
        self.lock().watch_epoch += 1;
        self.state.1.notify_all();
    }

    /// Sends a bookmark on every open watch that allows them (the API
    /// server does about once a minute).
    pub fn bookmark(&self) {
        self.lock().bookmark_epoch += 1;
        self.state.1.notify_all();
    }

    /// Compacts the events away up to the resourceVersion held now: a
    /// watch from before it gets 410 Expired. The resourceVersion.
    pub fn compact(&self) -> u64 {
        let mut s = self.lock();
        let rv = s.rv;
        s.compacted = rv;
        s.events.retain(|(v, _, _)| *v > rv);
        rv
    }

    /// Moves the resourceVersion on with a write nobody watching our
    /// slices sees (another resource's).
    pub fn write_elsewhere(&self) -> u64 {
        let mut s = self.lock();
        s.rv += 1;
        s.rv
    }

    /// The requests so far of `verb` (`list`, `watch`, `update`, ...) on
    /// ResourceSlices.
    pub fn slice_requests(&self, verb: &str) -> Vec<Request> {
        self.lock()
            .requests
            .iter()
            .filter(|r| r.attributes.resource == "resourceslices" && r.attributes.verb == verb)
            .cloned()
            .collect()
    }

    /// Waits until `f` holds of the slices; panics after `within`.
    pub fn wait_slices(
        &self,
        within: Duration,
        what: &str,
        f: impl Fn(&BTreeMap<String, Value>) -> bool,
    ) -> BTreeMap<String, Value> {
        let end = Instant::now() + within;
        loop {
            let s = self.slices();
            if f(&s) {
                return s;
            }
            assert!(
                Instant::now() < end,
                "timed out waiting for {what}; slices: {}",
                serde_json::to_string_pretty(&s).unwrap()
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    // ---- HTTP ----

    fn connection(&self, conn: TcpStream) {
        // Each response goes out whole at once: no Nagle delay (40 ms a
        // response against the client's delayed ACKs).
        let _ = conn.set_nodelay(true);
        let mut reader = BufReader::new(conn.try_clone().unwrap());
        let mut out = conn;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let mut parts = line.split_whitespace();
            let method = parts.next().unwrap_or_default().to_string();
            let target = parts.next().unwrap_or_default().to_string();
            let mut length = 0usize;
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 {
                    return;
                }
                let h = h.trim_end();
                if h.is_empty() {
                    break;
                }
                if let Some((k, v)) = h.split_once(':')
                    && k.eq_ignore_ascii_case("content-length")
                {
                    length = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; length];
            if reader.read_exact(&mut body).is_err() {
                return;
            }
            let (path, query) = match target.split_once('?') {
                Some((p, q)) => (p.to_string(), q.to_string()),
                None => (target.clone(), String::new()),
            };
            let params = parse_query(&query);
            if method == "GET"
                && matches!(params.get("watch").map(String::as_str), Some("1" | "true"))
            {
                if !self.watch(&mut out, &path, &query, &params) {
                    return;
                }
                continue;
            }
            let (status, response) = self.handle(&method, &path, &query, &params, &body);
            let text = response.to_string();
            let whole = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}",
                text.len()
            );
            if out.write_all(whole.as_bytes()).is_err() {
                return;
            }
        }
    }

    /// A failure the test asked for, if one is due; records the request.
    /// Then authorizes it: 403 when no rule allows it.
    fn record(&self, s: &mut State, method: &str, path: &str, query: &str) -> Option<(u16, Value)> {
        let failing = match &mut s.fail {
            Some((n, code)) if *n > 0 => {
                *n -= 1;
                Some(*code)
            }
            _ => None,
        };
        let attributes = attributes(method, path, &parse_query(query));
        s.requests.push(Request {
            method: method.to_string(),
            path: path.to_string(),
            query: query.to_string(),
            status: failing.unwrap_or(0),
            attributes: attributes.clone(),
        });
        if let Some(code) = failing {
            return Some((code, status(code, "InternalError", "injected failure")));
        }
        if !s.authorize(attributes.clone()) {
            if let Some(last) = s.requests.last_mut() {
                last.status = 403;
            }
            return Some((403, forbidden(&attributes)));
        }
        None
    }

    fn handle(
        &self,
        method: &str,
        path: &str,
        query: &str,
        params: &BTreeMap<String, String>,
        body: &[u8],
    ) -> (u16, Value) {
        let mut s = self.lock();
        if s.hang_claims && path.contains("/resourceclaims") {
            s.hanging += 1;
            while s.hang_claims {
                s = self.state.1.wait(s).unwrap_or_else(|e| e.into_inner());
            }
            s.hanging -= 1;
        }
        if let Some(refused) = self.record(&mut s, method, path, query) {
            return refused;
        }
        let manager = params.get("fieldManager").cloned();
        let r = route(&mut s, method, path, params, body, manager);
        if let Some(last) = s.requests.last_mut() {
            last.status = r.0;
        }
        drop(s);
        self.state.1.notify_all();
        r
    }

    /// Serves a watch of slices; false when the connection is gone.
    fn watch(
        &self,
        out: &mut TcpStream,
        path: &str,
        query: &str,
        params: &BTreeMap<String, String>,
    ) -> bool {
        let mut s = self.lock();
        if let Some((code, refused)) = self.record(&mut s, "GET", path, query) {
            drop(s);
            let text = refused.to_string();
            let head = format!(
                "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                text.len()
            );
            return out.write_all(head.as_bytes()).is_ok()
                && out.write_all(text.as_bytes()).is_ok();
        }
        if path != format!("{GROUP}/resourceslices") {
            drop(s);
            return false;
        }
        let selector = params.get("fieldSelector").cloned().unwrap_or_default();
        let bookmarks = matches!(
            params.get("allowWatchBookmarks").map(String::as_str),
            Some("1" | "true")
        );
        let timeout = params
            .get("timeoutSeconds")
            .and_then(|v| v.parse().ok())
            .unwrap_or(290);
        let end = Instant::now() + Duration::from_secs(timeout);
        let epoch = s.watch_epoch;
        let mut bookmark_epoch = s.bookmark_epoch;
        // From 0 (or none): the objects held, then what follows.
        let (mut from, initial): (u64, Vec<(u64, &'static str, Value)>) =
            match params.get("resourceVersion").and_then(|v| v.parse().ok()) {
                Some(rv) if rv > 0 => (rv, Vec::new()),
                _ => (
                    s.rv,
                    s.slices
                        .values()
                        .filter(|o| selects(&selector, o))
                        .map(|o| (s.rv, "ADDED", o.clone()))
                        .collect(),
                ),
            };
        let expired = (from < s.compacted).then(|| {
            status(
                410,
                "Expired",
                &format!("too old resource version: {from} ({})", s.compacted),
            )
        });
        drop(s);
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
        if out.write_all(head.as_bytes()).is_err() {
            return false;
        }
        let send = |out: &mut TcpStream, kind: &str, object: &Value| {
            let line = format!("{}\n", json!({"type": kind, "object": object}));
            let chunk = format!("{:x}\r\n{line}\r\n", line.len());
            out.write_all(chunk.as_bytes()).is_ok()
        };
        // The cacher's answer to a compacted resourceVersion: one ERROR
        // event, then the end.
        if let Some(e) = expired {
            return send(out, "ERROR", &e) && out.write_all(b"0\r\n\r\n").is_ok();
        }
        for (_, kind, object) in &initial {
            if !send(out, kind, object) {
                return false;
            }
        }
        let bookmark = |rv: u64| {
            json!({
                "kind": "ResourceSlice", "apiVersion": "resource.k8s.io/v1",
                "metadata": {"resourceVersion": rv.to_string()},
                "spec": {"driver": "", "pool": {"name": "", "generation": 0, "resourceSliceCount": 0}},
            })
        };
        loop {
            let mut s = self.lock();
            let new: Vec<(u64, &'static str, Value)> = s
                .events
                .iter()
                .filter(|(rv, _, o)| *rv > from && selects(&selector, o))
                .cloned()
                .collect();
            if new.is_empty() {
                let timed_out = Instant::now() >= end;
                if s.watch_epoch != epoch || timed_out {
                    let rv = s.rv;
                    drop(s);
                    // Right before the timeout, a bookmark (the cacher's
                    // 2 s before the deadline).
                    if timed_out && bookmarks && !send(out, "BOOKMARK", &bookmark(rv)) {
                        return false;
                    }
                    return out.write_all(b"0\r\n\r\n").is_ok();
                }
                if s.bookmark_epoch != bookmark_epoch {
                    bookmark_epoch = s.bookmark_epoch;
                    if bookmarks {
                        // Everything up to it is sent: the events after
                        // `from` that are not ours are none of ours.
                        from = s.rv;
                        drop(s);
                        if !send(out, "BOOKMARK", &bookmark(from)) {
                            return false;
                        }
                        self.lock().bookmarks_sent += 1;
                        continue;
                    }
                }
                let (g, _) = self
                    .state
                    .1
                    .wait_timeout(s, Duration::from_millis(100))
                    .unwrap();
                s = g;
                drop(s);
                continue;
            }
            drop(s);
            for (rv, kind, object) in new {
                from = rv;
                if !send(out, kind, &object) {
                    return false;
                }
            }
        }
    }
}

/// RBAC's attributes of a request (the API server's request info: the
/// verb from the method, `list` or `watch` for a collection).
fn attributes(method: &str, path: &str, params: &BTreeMap<String, String>) -> Attributes {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (api_group, rest) = match parts.as_slice() {
        ["api", _version, rest @ ..] => (String::new(), rest),
        ["apis", group, _version, rest @ ..] => ((*group).to_string(), rest),
        _ => (String::new(), &[][..]),
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => ((*ns).to_string(), rest),
        rest => (String::new(), rest),
    };
    let get = |i: usize| rest.get(i).map(|s| (*s).to_string()).unwrap_or_default();
    let (resource, name, subresource) = (get(0), get(1), get(2));
    let watch = matches!(params.get("watch").map(String::as_str), Some("1" | "true"));
    let verb = match (method, name.is_empty()) {
        ("GET", _) if watch => "watch",
        ("GET", true) => "list",
        ("GET", false) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "deletecollection",
        ("DELETE", false) => "delete",
        (other, _) => other,
    };
    Attributes {
        verb: verb.to_string(),
        api_group,
        resource,
        subresource,
        namespace,
        name,
    }
}

/// The 403 of RBAC, in the API server's words.
fn forbidden(a: &Attributes) -> Value {
    let group = if a.api_group.is_empty() {
        String::new()
    } else {
        format!(".{}", a.api_group)
    };
    let scope = if a.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace \"{}\"", a.namespace)
    };
    status(
        403,
        "Forbidden",
        &format!(
            "{}{group} \"{}\" is forbidden: User \"{USER}\" cannot {} resource \"{}\" in API group \"{}\" {scope}",
            a.resource,
            a.name,
            a.verb,
            a.resource_path(),
            a.api_group
        ),
    )
}

/// The node a claim's allocation is on, as the API server reads it: a
/// node selector of exactly one term with exactly one
/// `metadata.name In [node]` field match; empty otherwise.
fn allocated_node(allocation: &Value) -> String {
    let terms = &allocation["nodeSelector"]["nodeSelectorTerms"];
    let [term] = terms.as_array().map(Vec::as_slice).unwrap_or_default() else {
        return String::new();
    };
    let expressions = term["matchExpressions"].as_array().map_or(0, Vec::len);
    let fields = term["matchFields"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    match fields {
        [f] if expressions == 0
            && f["key"] == "metadata.name"
            && f["operator"] == "In"
            && f["values"].as_array().map_or(0, Vec::len) == 1 =>
        {
            f["values"][0].as_str().unwrap_or_default().to_string()
        }
        _ => String::new(),
    }
}

/// The drivers whose `status.devices` entries (by driver, pool, device
/// and shareID) were added, removed or changed from `old` to `new`.
fn modified_drivers(old: &Value, new: &Value) -> std::collections::BTreeSet<String> {
    let key = |d: &Value| {
        (
            d["driver"].clone(),
            d["pool"].clone(),
            d["device"].clone(),
            d["shareID"].clone(),
        )
    };
    let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
    let mut before: BTreeMap<String, Value> = list(old)
        .iter()
        .map(|d| (format!("{:?}", key(d)), d.clone()))
        .collect();
    let mut out = std::collections::BTreeSet::new();
    for d in list(new) {
        let k = format!("{:?}", key(&d));
        if before.remove(&k).as_ref() != Some(&d) {
            out.insert(d["driver"].as_str().unwrap_or_default().to_string());
        }
    }
    for d in before.values() {
        out.insert(d["driver"].as_str().unwrap_or_default().to_string());
    }
    out
}

/// The namespace label that allows admin access
/// (`resource.DRAAdminNamespaceLabelKey`).
pub const ADMIN_LABEL: &str = "resource.kubernetes.io/admin-access";

/// 1.36's `AuthorizedForAdmin…` of a claim in `namespace` asking for admin
/// access at `path`: the field error, if the namespace is not labelled.
fn admin_namespace_refused(s: &State, namespace: &str, path: &str) -> Option<String> {
    match s.namespaces.get(namespace) {
        None => Some(format!(
            "{path}: Internal error: could not retrieve namespace to verify admin access: namespaces \"{namespace}\" not found"
        )),
        Some(labels) if labels.get(ADMIN_LABEL).map(String::as_str) != Some("true") => {
            Some(format!(
                "{path}: Forbidden: admin access to devices requires the `{ADMIN_LABEL}: true` label on the containing namespace"
            ))
        }
        Some(_) => None,
    }
}

/// 1.36's `AuthorizedForAdminStatus` of a status write from `old` to `new`
/// in `namespace`: nothing to check when the old allocation already
/// granted admin access (an allocation is immutable) or the new one does
/// not; else the namespace must be labelled.
fn admin_access_refused(s: &State, namespace: &str, old: &Value, new: &Value) -> Option<String> {
    let granted = |status: &Value| {
        status["allocation"]["devices"]["results"]
            .as_array()
            .into_iter()
            .flatten()
            .position(|r| r["adminAccess"] == json!(true))
    };
    if granted(old).is_some() {
        return None;
    }
    let i = granted(new)?;
    admin_namespace_refused(
        s,
        namespace,
        &format!("status.allocation.devices.results[{i}].adminAccess"),
    )
}

/// 1.36's check of a status write of claim `namespace/name` from `old` to
/// `new` by a request of `verb`: the message of the 422, if refused.
fn device_status_refused(
    s: &mut State,
    verb: &str,
    namespace: &str,
    name: &str,
    old: &Value,
    new: &Value,
) -> Option<String> {
    if new["allocation"].is_null() {
        return None;
    }
    let node = allocated_node(&new["allocation"]);
    let verbs: Vec<String> = if !node.is_empty() && s.token_node.as_deref() == Some(node.as_str()) {
        vec![
            format!("associated-node:{verb}"),
            format!("arbitrary-node:{verb}"),
        ]
    } else {
        vec![format!("arbitrary-node:{verb}")]
    };
    let mut refused = Vec::new();
    for driver in modified_drivers(&old["devices"], &new["devices"]) {
        let mut allowed = false;
        for v in &verbs {
            if s.authorize(Attributes {
                verb: v.clone(),
                api_group: "resource.k8s.io".into(),
                resource: "resourceclaims".into(),
                subresource: "driver".into(),
                namespace: namespace.into(),
                name: driver.clone(),
            }) {
                allowed = true;
                break;
            }
        }
        if !allowed {
            refused.push(format!(
                "status.devices: Forbidden: changing status.devices requires resource=\"resourceclaims/driver\", verb=\"[{}]\" permission: User \"{USER}\" cannot {} resource \"resourceclaims/driver\" in API group \"resource.k8s.io\" in the namespace \"{namespace}\"",
                verbs.join(" "),
                verbs[0],
            ));
        }
    }
    (!refused.is_empty()).then(|| {
        format!(
            "ResourceClaim.resource.k8s.io \"{name}\" is invalid: {}",
            refused.join(", ")
        )
    })
}

fn parse_query(q: &str) -> BTreeMap<String, String> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// Percent-decoding (and `+` as space).
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap()
}

/// Whether `o` matches a field selector `a.b=x,c=y` (`==` and `!=` too).
fn selects(selector: &str, o: &Value) -> bool {
    selector.split(',').filter(|t| !t.is_empty()).all(|term| {
        let (field, want, equal) = if let Some((f, v)) = term.split_once("!=") {
            (f, v, false)
        } else if let Some((f, v)) = term.split_once("==") {
            (f, v, true)
        } else {
            let (f, v) = term.split_once('=').unwrap();
            (f, v, true)
        };
        let mut cur = o;
        for part in field.split('.') {
            cur = &cur[part];
        }
        (cur.as_str() == Some(want)) == equal
    })
}

/// A Status object.
fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code,
    })
}

fn store_slice(s: &mut State, name: &str, mut slice: Value, kind: &'static str) -> Value {
    s.rv += 1;
    slice["metadata"]["resourceVersion"] = json!(s.rv.to_string());
    if slice["metadata"]["uid"].is_null() {
        slice["metadata"]["uid"] = json!(format!("uid-{}", s.rv));
    }
    s.slices.insert(name.to_string(), slice.clone());
    s.events.push((s.rv, kind, slice.clone()));
    slice
}

fn delete_slice(s: &mut State, name: &str) -> Option<Value> {
    let mut old = s.slices.remove(name)?;
    s.rv += 1;
    old["metadata"]["resourceVersion"] = json!(s.rv.to_string());
    s.events.push((s.rv, "DELETED", old.clone()));
    Some(old)
}

/// RFC 7386.
fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = json!({});
            }
            let t = target.as_object_mut().unwrap();
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        other => *target = other.clone(),
    }
}

fn route(
    s: &mut State,
    method: &str,
    path: &str,
    params: &BTreeMap<String, String>,
    body: &[u8],
    manager: Option<String>,
) -> (u16, Value) {
    let slices = format!("{GROUP}/resourceslices");
    let write = |s: &mut State, verb: &str, resource: &str, name: &str, object: &Value| {
        s.writes.push(Write {
            verb: verb.into(),
            resource: resource.into(),
            name: name.into(),
            object: object.clone(),
            at: Instant::now(),
            field_manager: manager.clone(),
        });
    };
    if path == slices {
        return match method {
            "GET" => {
                let selector = params.get("fieldSelector").cloned().unwrap_or_default();
                let items: Vec<Value> = s
                    .slices
                    .values()
                    .filter(|o| selects(&selector, o))
                    .cloned()
                    .collect();
                (
                    200,
                    json!({
                        "kind": "ResourceSliceList", "apiVersion": "resource.k8s.io/v1",
                        "metadata": {"resourceVersion": s.rv.to_string()},
                        "items": items,
                    }),
                )
            }
            "POST" => {
                let mut o: Value = serde_json::from_slice(body).unwrap();
                let Some(name) = o["metadata"]["name"].as_str().map(str::to_string) else {
                    return (422, status(422, "Invalid", "metadata.name: Required value"));
                };
                if s.slices.contains_key(&name) {
                    return (
                        409,
                        status(
                            409,
                            "AlreadyExists",
                            &format!("resourceslices \"{name}\" already exists"),
                        ),
                    );
                }
                o["metadata"]["resourceVersion"] = Value::Null;
                let stored = store_slice(s, &name, o, "ADDED");
                write(s, "create", "resourceslices", &name, &stored);
                (201, stored)
            }
            _ => (405, status(405, "MethodNotAllowed", method)),
        };
    }
    if let Some(name) = path.strip_prefix(&format!("{slices}/")) {
        let name = name.to_string();
        return match method {
            "GET" => match s.slices.get(&name) {
                Some(o) => (200, o.clone()),
                None => not_found("resourceslices", &name),
            },
            "PUT" => {
                let o: Value = serde_json::from_slice(body).unwrap();
                let Some(cur) = s.slices.get(&name) else {
                    return not_found("resourceslices", &name);
                };
                if o["metadata"]["resourceVersion"] != cur["metadata"]["resourceVersion"] {
                    return conflict("resourceslices", &name);
                }
                if o["spec"]["driver"] != cur["spec"]["driver"] {
                    return (
                        422,
                        status(422, "Invalid", "spec.driver: field is immutable"),
                    );
                }
                let stored = store_slice(s, &name, o, "MODIFIED");
                write(s, "update", "resourceslices", &name, &stored);
                (200, stored)
            }
            "DELETE" => {
                if let Some(refused) = precondition_failed(s, &name, body) {
                    return refused;
                }
                match delete_slice(s, &name) {
                    Some(old) => {
                        write(s, "delete", "resourceslices", &name, &old);
                        (200, old)
                    }
                    None => not_found("resourceslices", &name),
                }
            }
            _ => (405, status(405, "MethodNotAllowed", method)),
        };
    }
    if let Some(name) = path.strip_prefix("/api/v1/nodes/") {
        return match (method, s.nodes.get(name)) {
            ("GET", Some(n)) => (200, n.clone()),
            ("GET", None) => (
                404,
                status(404, "NotFound", &format!("nodes \"{name}\" not found")),
            ),
            _ => (405, status(405, "MethodNotAllowed", method)),
        };
    }
    if let Some(rest) = path.strip_prefix(&format!("{GROUP}/namespaces/")) {
        let parts: Vec<&str> = rest.split('/').collect();
        let (ns, name, sub) = match parts.as_slice() {
            [ns, "resourceclaims", name] => (*ns, *name, None),
            [ns, "resourceclaims", name, sub] => (*ns, *name, Some(*sub)),
            _ => return (404, status(404, "NotFound", "no such path")),
        };
        let key = (ns.to_string(), name.to_string());
        return match (method, sub) {
            ("GET", None | Some("status")) => match s.claims.get(&key) {
                Some(o) => (200, o.clone()),
                None => not_found("resourceclaims", name),
            },
            ("PATCH", Some("status")) => {
                if let Some(devices) = s.interfere.take()
                    && let Some(c) = s.claims.get_mut(&key)
                {
                    c["status"]["devices"] = devices;
                    s.rv += 1;
                    c["metadata"]["resourceVersion"] = json!(s.rv.to_string());
                }
                let patch: Value = serde_json::from_slice(body).unwrap();
                let rv = s.rv + 1;
                let Some(c) = s.claims.get_mut(&key) else {
                    return not_found("resourceclaims", name);
                };
                let want = &patch["metadata"]["resourceVersion"];
                if !want.is_null() && *want != c["metadata"]["resourceVersion"] {
                    return conflict("resourceclaims", name);
                }
                // The status subresource: only status changes.
                let mut next = c.clone();
                merge_patch(&mut next, &patch);
                let old = c["status"].clone();
                if let Some(message) = admin_access_refused(s, ns, &old, &next["status"]) {
                    let message =
                        format!("ResourceClaim.resource.k8s.io \"{name}\" is invalid: {message}");
                    return (422, status(422, "Invalid", &message));
                }
                if let Some(message) =
                    device_status_refused(s, "patch", ns, name, &old, &next["status"])
                {
                    return (422, status(422, "Invalid", &message));
                }
                let Some(c) = s.claims.get_mut(&key) else {
                    return not_found("resourceclaims", name);
                };
                c["status"] = next["status"].clone();
                c["metadata"]["resourceVersion"] = json!(rv.to_string());
                let stored = c.clone();
                s.rv = rv;
                write(s, "patch", "resourceclaims", name, &stored);
                (200, stored)
            }
            _ => (405, status(405, "MethodNotAllowed", method)),
        };
    }
    (
        404,
        status(404, "NotFound", &format!("no such path {path}")),
    )
}

/// The 409 of a delete whose DeleteOptions' preconditions (UID,
/// resourceVersion) the slice `name` does not meet, in the API server's
/// words (storage.Preconditions.Check, a conflict).
fn precondition_failed(s: &State, name: &str, body: &[u8]) -> Option<(u16, Value)> {
    let options: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let pre = &options["preconditions"];
    let cur = s.slices.get(name)?;
    let refused = |what: &str, want: &Value, have: &Value| {
        let message = format!(
            "Operation cannot be fulfilled on resourceslices.resource.k8s.io \"{name}\": Precondition failed: {what} in precondition: {}, {what} in object meta: {}",
            want.as_str().unwrap_or_default(),
            have.as_str().unwrap_or_default()
        );
        (409, status(409, "Conflict", &message))
    };
    let meta = &cur["metadata"];
    if !pre["uid"].is_null() && pre["uid"] != meta["uid"] {
        return Some(refused("UID", &pre["uid"], &meta["uid"]));
    }
    if !pre["resourceVersion"].is_null() && pre["resourceVersion"] != meta["resourceVersion"] {
        return Some(refused(
            "ResourceVersion",
            &pre["resourceVersion"],
            &meta["resourceVersion"],
        ));
    }
    None
}

fn not_found(resource: &str, name: &str) -> (u16, Value) {
    (
        404,
        status(
            404,
            "NotFound",
            &format!("{resource}.resource.k8s.io \"{name}\" not found"),
        ),
    )
}

fn conflict(resource: &str, name: &str) -> (u16, Value) {
    (
        409,
        status(
            409,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on {resource}.resource.k8s.io \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
        ),
    )
}
