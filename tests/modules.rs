//! The module graph of `src/` has no cycles, at the top level (`discover`,
//! `generate`, `watch`) nor one level deeper (`discover::sriov`,
//! `discover::vdpa`).
//!
//! A module depends on another when its source names it by a `crate::` or
//! `super::` path, in a `use` group too (`use crate::generator::Loaded`,
//! `super::pf::Cache`, `use super::{pf, vfio::require_host_node}`).
//! Comments, string literals and `#[cfg(test)]` items are not read, nor
//! the files of test modules (`tests.rs`, `tests/`): tests may reach
//! anywhere. Paths relative to the module itself (`scan::Match`) name its
//! children, which never make a cycle. On a failure the message names
//! each set of modules that depend on each other, a cycle through them,
//! and the line behind each of its edges.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// What the graph needs of Rust source.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    /// `::`
    PathSep,
    Open,
    Close,
    Semi,
    Comma,
    Hash,
    OpenBracket,
    CloseBracket,
    Other,
}

/// The tokens of `text`, with their line numbers; comments, strings and
/// character literals are left out.
fn lex(text: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if ch == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                if at(i) == '\n' {
                    line += 1;
                }
                i += 1;
            }
            i += 1;
        } else if ch == '\'' {
            if at(i + 1) == '\\' {
                // '\n', '\'', '\u{..}': past the escaped character.
                i += 3;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                // A lifetime or a label.
                i += 1;
            }
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            // Raw and byte strings: r"..", r#".."#, b"..", br"..", c"..".
            let prefix = matches!(word.as_str(), "r" | "b" | "br" | "c" | "cr");
            if prefix && (at(i) == '"' || (word.contains('r') && at(i) == '#')) {
                let mut hashes = 0;
                while at(i) == '#' {
                    hashes += 1;
                    i += 1;
                }
                if at(i) != '"' {
                    // `r#ident`: a raw identifier.
                    continue;
                }
                i += 1;
                let raw = word.contains('r');
                loop {
                    if i >= c.len() {
                        break;
                    }
                    if c[i] == '\n' {
                        line += 1;
                    }
                    if !raw && c[i] == '\\' {
                        i += 2;
                        continue;
                    }
                    if c[i] == '"' && (0..hashes).all(|k| at(i + 1 + k) == '#') {
                        i += 1 + hashes;
                        break;
                    }
                    i += 1;
                }
                continue;
            }
            out.push((Tok::Ident(word), line));
        } else if ch.is_ascii_digit() {
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push((Tok::Other, line));
        } else {
            let tok = match ch {
                ':' if at(i + 1) == ':' => {
                    i += 1;
                    Tok::PathSep
                }
                '{' => Tok::Open,
                '}' => Tok::Close,
                ';' => Tok::Semi,
                ',' => Tok::Comma,
                '#' => Tok::Hash,
                '[' => Tok::OpenBracket,
                ']' => Tok::CloseBracket,
                _ => Tok::Other,
            };
            out.push((tok, line));
            i += 1;
        }
    }
    out
}

/// One place a module names another.
#[derive(Debug, Clone)]
struct Use {
    /// The module whose source it is in (`discover::sriov`).
    from: String,
    /// The path as written, from `crate` or `super` (`super::vdpa::by_parent`).
    path: String,
    /// Segments it names, relative to the crate root.
    target: Vec<String>,
    file: PathBuf,
    line: usize,
}

fn ident(t: Option<&(Tok, usize)>) -> Option<&str> {
    match t {
        Some((Tok::Ident(s), _)) => Some(s),
        _ => None,
    }
}

/// The index after the bracketed group that opens at `i` (`open` at `i`).
fn skip_group(toks: &[(Tok, usize)], i: usize, open: &Tok, close: &Tok) -> usize {
    let mut depth = 0;
    let mut j = i;
    while j < toks.len() {
        if &toks[j].0 == open {
            depth += 1;
        } else if &toks[j].0 == close {
            depth -= 1;
            if depth == 0 {
                return j + 1;
            }
        }
        j += 1;
    }
    j
}

/// Whether `#[cfg(test)]` starts at `i`.
fn is_cfg_test(toks: &[(Tok, usize)], i: usize) -> bool {
    let want = [
        Tok::Hash,
        Tok::OpenBracket,
        Tok::Ident("cfg".into()),
        Tok::Other,
        Tok::Ident("test".into()),
        Tok::Other,
        Tok::CloseBracket,
    ];
    toks.len() >= i + want.len() && toks[i..i + want.len()].iter().map(|t| &t.0).eq(want.iter())
}

/// The paths that continue `target` (written `text`) at `j`: `::a::b`,
/// or a group `::{a, b::c, d::{e, self}}`, into `out`; returns where they
/// end.
fn paths(
    toks: &[(Tok, usize)],
    mut j: usize,
    mut target: Vec<String>,
    mut text: String,
    out: &mut Vec<(Vec<String>, String)>,
) -> usize {
    while toks.get(j).map(|t| &t.0) == Some(&Tok::PathSep) {
        if let Some(s) = ident(toks.get(j + 1)) {
            target.push(s.to_string());
            text = format!("{text}::{s}");
            j += 2;
        } else if toks.get(j + 1).map(|t| &t.0) == Some(&Tok::Open) {
            j += 2;
            while j < toks.len() {
                match (&toks[j].0, ident(toks.get(j))) {
                    (Tok::Close, _) => return j + 1,
                    (_, Some("self")) => {
                        out.push((target.clone(), text.clone()));
                        j += 1;
                    }
                    // `x as y`
                    (_, Some("as")) => j += 2,
                    (_, Some(s)) => {
                        let mut t = target.clone();
                        t.push(s.to_string());
                        j = paths(toks, j + 1, t, format!("{text}::{s}"), out);
                    }
                    _ => j += 1,
                }
            }
            return j;
        } else {
            break;
        }
    }
    out.push((target, text));
    j
}

/// The `crate::` and `super::` paths of one file whose module is `module`,
/// outside `#[cfg(test)]` items; inline modules (`mod v1 { .. }`) are
/// modules of their own.
fn uses(module: &[String], text: &str, file: &Path) -> (Vec<Use>, BTreeSet<String>) {
    let toks = lex(text);
    let mut out = Vec::new();
    let mut inline = BTreeSet::new();
    // Inline modules open here: (name, brace depth inside them).
    let mut stack: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    while i < toks.len() {
        if is_cfg_test(&toks, i) {
            // Skip the item: its other attributes, then up to its `;` or
            // through its `{ .. }`.
            let mut j = i + 7;
            while toks.get(j).map(|t| &t.0) == Some(&Tok::Hash) {
                j = skip_group(&toks, j + 1, &Tok::OpenBracket, &Tok::CloseBracket);
            }
            while j < toks.len() && !matches!(toks[j].0, Tok::Semi | Tok::Open) {
                j += 1;
            }
            if toks.get(j).map(|t| &t.0) == Some(&Tok::Open) {
                j = skip_group(&toks, j, &Tok::Open, &Tok::Close);
            } else {
                j += 1;
            }
            i = j;
            continue;
        }
        let here: Vec<String> = module
            .iter()
            .cloned()
            .chain(stack.iter().map(|(n, _)| n.clone()))
            .collect();
        match &toks[i].0 {
            Tok::Open => {
                depth += 1;
                i += 1;
                continue;
            }
            Tok::Close => {
                if stack.last().is_some_and(|(_, d)| *d == depth) {
                    stack.pop();
                }
                depth -= 1;
                i += 1;
                continue;
            }
            _ => {}
        }
        let word = ident(toks.get(i));
        let after_sep = i > 0 && toks[i - 1].0 == Tok::PathSep;
        if word == Some("mod")
            && let Some(name) = ident(toks.get(i + 1))
            && toks.get(i + 2).map(|t| &t.0) == Some(&Tok::Open)
        {
            depth += 1;
            stack.push((name.to_string(), depth));
            let mut m = here.clone();
            m.push(name.to_string());
            inline.insert(m.join("::"));
            i += 3;
            continue;
        }
        let start = match word {
            Some("crate") if !after_sep => Some(Vec::new()),
            Some("super") if !after_sep => {
                let mut base = here.clone();
                let mut j = i;
                while ident(toks.get(j)) == Some("super")
                    && toks.get(j + 1).map(|t| &t.0) == Some(&Tok::PathSep)
                {
                    base.pop();
                    j += 2;
                }
                if j == i {
                    // `super` alone (`pub(super)`): no path.
                    None
                } else {
                    i = j - 2;
                    Some(base)
                }
            }
            _ => None,
        };
        let Some(target) = start else {
            i += 1;
            continue;
        };
        let line = toks[i].1;
        let mut text = word.unwrap_or_default().to_string();
        if word == Some("super") {
            // `i` is on the last `super`.
            for _ in 1..here.len().saturating_sub(target.len()) {
                text.push_str("::super");
            }
        }
        let mut found = Vec::new();
        let next = paths(&toks, i + 1, target, text, &mut found);
        for (target, path) in found {
            out.push(Use {
                from: here.join("::"),
                path,
                target,
                file: file.to_path_buf(),
                line,
            });
        }
        i = next.max(i + 1);
    }
    (out, inline)
}

/// The module a source file defines: `discover/generic.rs` is
/// `discover::generic`, `discover/mod.rs` is `discover`; `None` for the
/// binary (`main.rs`) and test modules.
fn module_of(rel: &Path) -> Option<Vec<String>> {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts == ["main"] || parts.iter().any(|p| p == "tests") {
        return None;
    }
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    Some(parts)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Module dependencies of the crate under `src`: (from, to) → where.
struct Graph {
    edges: BTreeMap<(String, String), Use>,
}

impl Graph {
    fn of(src: &Path) -> Graph {
        let mut files = Vec::new();
        rust_files(src, &mut files);
        files.sort();
        let mut modules = BTreeSet::new();
        let mut all = Vec::new();
        for f in &files {
            let rel = f.strip_prefix(src).unwrap();
            let Some(module) = module_of(rel) else {
                continue;
            };
            let text = fs::read_to_string(f).unwrap();
            let shown = Path::new("src").join(rel);
            let (u, inline) = uses(&module, &text, &shown);
            modules.insert(module.join("::"));
            modules.extend(inline);
            all.extend(u);
        }
        let mut edges = BTreeMap::new();
        for u in all {
            // The nearest module the path names (`crate::discover::Context`
            // is `discover`).
            let mut t = u.target.clone();
            while !t.is_empty() && !modules.contains(&t.join("::")) {
                t.pop();
            }
            let to = t.join("::");
            if to.is_empty() || is_within(&u.from, &to) || is_within(&to, &u.from) {
                continue;
            }
            edges.entry((u.from.clone(), to)).or_insert(u);
        }
        Graph { edges }
    }

    /// The graph with modules cut to `depth` segments, without edges
    /// between a module and its ancestors.
    fn at_depth(&self, depth: usize) -> BTreeMap<String, BTreeMap<String, &Use>> {
        let cut = |m: &str| m.split("::").take(depth).collect::<Vec<_>>().join("::");
        let mut g: BTreeMap<String, BTreeMap<String, &Use>> = BTreeMap::new();
        for ((a, b), u) in &self.edges {
            let (a, b) = (cut(a), cut(b));
            if is_within(&a, &b) || is_within(&b, &a) {
                continue;
            }
            g.entry(a).or_default().entry(b).or_insert(u);
        }
        g
    }

    /// The cycles of the graph at `depth`: for each set of modules that
    /// depend on each other, its members and one cycle through them, with
    /// the line behind each edge.
    fn cycles(&self, depth: usize) -> Vec<String> {
        type G<'u> = BTreeMap<String, BTreeMap<String, &'u Use>>;
        let g = self.at_depth(depth);
        let next = |n: &str| -> Vec<&str> {
            g.get(n)
                .into_iter()
                .flat_map(BTreeMap::keys)
                .map(String::as_str)
                .collect()
        };
        let reach = |from: &str| -> BTreeSet<String> {
            let mut seen = BTreeSet::new();
            let mut todo = next(from);
            while let Some(n) = todo.pop() {
                if seen.insert(n.to_string()) {
                    todo.extend(next(n));
                }
            }
            seen
        };
        let reached: BTreeMap<&str, BTreeSet<String>> =
            g.keys().map(|n| (n.as_str(), reach(n))).collect();
        let mut groups: BTreeSet<Vec<&str>> = BTreeSet::new();
        for (n, r) in &reached {
            let group: Vec<&str> = reached
                .iter()
                .filter(|(m, rm)| r.contains(**m) && rm.contains(*n))
                .map(|(m, _)| *m)
                .collect();
            if group.len() > 1 {
                groups.insert(group);
            }
        }
        // A path inside `group` from its first member back to it.
        fn cycle_in<'a>(g: &'a G, group: &[&'a str], path: &mut Vec<&'a str>) -> bool {
            let Some(last) = path.last().copied() else {
                return false;
            };
            for m in g.get(last).into_iter().flat_map(BTreeMap::keys) {
                if m == group[0] {
                    path.push(m);
                    return true;
                }
                if group.contains(&m.as_str()) && !path.contains(&m.as_str()) {
                    path.push(m);
                    if cycle_in(g, group, path) {
                        return true;
                    }
                    path.pop();
                }
            }
            false
        }
        groups
            .into_iter()
            .map(|group| {
                let mut c = vec![group[0]];
                cycle_in(&g, &group, &mut c);
                let mut text = format!(
                    "module cycle at depth {depth} among [{}]: {}",
                    group.join(", "),
                    c.join(" -> ")
                );
                for w in c.windows(2) {
                    let u = g[w[0]][w[1]];
                    text.push_str(&format!(
                        "\n  {} -> {}: {}:{}: {} (in {})",
                        w[0],
                        w[1],
                        u.file.display(),
                        u.line,
                        u.path,
                        u.from
                    ));
                }
                text
            })
            .collect()
    }
}

/// Whether module `inner` is `outer` or inside it.
fn is_within(inner: &str, outer: &str) -> bool {
    outer.is_empty()
        || inner == outer
        || inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.starts_with("::"))
}

/// The cycles of the graph of `src` at depths 1 and 2.
fn cycles(src: &Path) -> Vec<String> {
    let g = Graph::of(src);
    [1, 2].into_iter().flat_map(|d| g.cycles(d)).collect()
}

#[test]
fn the_module_graph_of_src_has_no_cycles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = cycles(&src);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// A crate of `files` (path under `src`, text) in a temporary directory.
fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = tmp.path().join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
    tmp
}

#[test]
fn a_cycle_is_named_with_the_lines_that_make_it() {
    let t = tree(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a.rs", "//! A.\n\nuse crate::b::Thing;\n"),
        ("b/mod.rs", "pub mod c;\n"),
        ("b/c.rs", "pub fn f() {\n    super::super::a::g();\n}\n"),
    ]);
    assert_eq!(
        cycles(t.path()),
        ["module cycle at depth 1 among [a, b]: a -> b -> a\n  \
             a -> b: src/a.rs:3: crate::b::Thing (in a)\n  \
             b -> a: src/b/c.rs:2: super::super::a::g (in b::c)"]
    );
}

#[test]
fn cycles_one_level_down_are_found_too() {
    let t = tree(&[
        ("lib.rs", "pub mod d;\n"),
        ("d/mod.rs", "pub mod x;\npub mod y;\nuse crate::d::x::F;\n"),
        ("d/x.rs", "use super::y::G;\n"),
        (
            "d/y.rs",
            "use super::{Z, x::F};\nfn f() { crate::d::x::h() }\n",
        ),
    ]);
    assert_eq!(
        cycles(t.path()),
        [
            "module cycle at depth 2 among [d::x, d::y]: d::x -> d::y -> d::x\n  \
          d::x -> d::y: src/d/x.rs:1: super::y::G (in d::x)\n  \
          d::y -> d::x: src/d/y.rs:1: super::x::F (in d::y)"
        ]
    );
}

#[test]
fn comments_strings_and_test_items_are_not_dependencies() {
    let t = tree(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a.rs", "use crate::b::Thing;\n"),
        (
            "b.rs",
            "//! See [`crate::a`].\n\
             /* crate::a::x /* nested */ crate::a */\n\
             const S: &str = \"crate::a::f\";\n\
             const R: &str = r#\"crate::a \"quoted\" \"#;\n\
             const C: char = '\"';\n\
             fn f<'a>(x: &'a str) -> &'a str { x } // crate::a\n\
             #[cfg(test)]\nfn helper() { crate::a::g(); }\n\
             #[cfg(test)]\n#[allow(unused)]\nuse crate::a::H;\n\
             #[cfg(test)]\nmod tests {\n    use crate::a::X;\n    fn t() { super::super::a::y() }\n}\n\
             pub(super) fn g() {}\n",
        ),
        ("b/tests.rs", "use crate::a::Y;\n"),
        ("main.rs", "fn main() { crate::a::z() }\n"),
    ]);
    assert_eq!(cycles(t.path()), Vec::<String>::new());
    // Without the test module, the same path is a dependency.
    let t = tree(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a.rs", "use crate::b::Thing;\n"),
        ("b.rs", "mod inner {\n    use crate::a::X;\n}\n"),
    ]);
    assert_eq!(
        cycles(t.path()),
        ["module cycle at depth 1 among [a, b]: a -> b -> a\n  \
          a -> b: src/a.rs:1: crate::b::Thing (in a)\n  \
          b -> a: src/b.rs:2: crate::a::X (in b::inner)"]
    );
}

#[test]
fn super_in_an_inline_module_is_the_file_module() {
    // `super` inside `mod v1 { .. }` of `b.rs` is `b`, not the root.
    let t = tree(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a.rs", "use crate::b::v1::X;\n"),
        ("b.rs", "pub mod v1 {\n    use super::Y;\n}\nstruct Y;\n"),
    ]);
    assert_eq!(cycles(t.path()), Vec::<String>::new());
}

// --- Reading the host tree ----------------------------------------------

/// The modules that open or examine files by path themselves (outside
/// `#[cfg(test)]` items), each with what it reads: none of it is the host
/// tree under `--root`, which only [`root`] reads (through [`fsio`]), and
/// which every other module reads through a `HostRoot`. A module that
/// reads files by path and is not here fails
/// [`only_the_listed_modules_read_files_by_path`]: read the host through
/// `HostRoot`, or, for a file of another kind, add the module here saying
/// what it reads.
const READERS: &[(&str, &str)] = &[
    ("root", "the host tree under --root: the one reader of it"),
    (
        "fsio",
        "the checked open and read every reader goes through",
    ),
    ("snapshot", "the snapshot directory it writes"),
    (
        "write",
        "cdigen's output directories, their state and lock files",
    ),
    (
        "cdi",
        "CDI spec files and directories, as runtimes read them",
    ),
    ("cdi::dirs", "CDI spec directories, as runtimes read them"),
    ("generator", "generator definitions"),
    ("render", "templates"),
    (
        "generate::coexist",
        "spec directories: other producers' specs",
    ),
    ("watch::ready", "the ready file it writes"),
    ("plugin::state", "cdigen's plugin state file"),
    (
        "hook",
        "the container's bundle and root filesystem (OCI hooks)",
    ),
    (
        "hook::ldconfig",
        "the container's root filesystem (OCI hooks)",
    ),
    (
        "hook::inroot",
        "the container's root filesystem, resolved inside it",
    ),
    (
        "hook::ldconfig::isolate",
        "the host's ldconfig program, and its own mount table and container root once isolated",
    ),
    (
        "trust",
        "the ownership and modes of the host programs hooks name, and of their directories \
         (on this machine or under --root, for HostRoot::program)",
    ),
    ("deviceplugin::run", "its own sockets and the kubelet's"),
    (
        "deviceplugin::vendor",
        "other plugins' sockets and the kubelet's checkpoint in the kubelet's directory",
    ),
    (
        "deviceplugin::held",
        "its own record of the devices handed out",
    ),
    ("dra::plugin", "its own sockets"),
    ("dra::checkpoint", "its own checkpoint"),
    ("dra::metadata", "its own metadata files"),
];

/// The lines of `text` (a module's source) that open or examine a file by
/// path: `fs::read*`, `fs::open*`, `fs::stat*`, `fs::lstat*` (std's and
/// rustix's), `fs::metadata`, `fs::symlink_metadata`, `fs::canonicalize`,
/// `File::open`, `fsio::read*`, `fsio::open*`, and the
/// `read_dir`, `read_link`, `symlink_metadata`, `canonicalize` methods of
/// a path; outside `#[cfg(test)]` items.
fn file_reads(text: &str) -> Vec<(usize, String)> {
    let toks = lex(text);
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if is_cfg_test(&toks, i) {
            let mut j = i + 7;
            while toks.get(j).map(|t| &t.0) == Some(&Tok::Hash) {
                j = skip_group(&toks, j + 1, &Tok::OpenBracket, &Tok::CloseBracket);
            }
            while j < toks.len() && !matches!(toks[j].0, Tok::Semi | Tok::Open) {
                j += 1;
            }
            if toks.get(j).map(|t| &t.0) == Some(&Tok::Open) {
                j = skip_group(&toks, j, &Tok::Open, &Tok::Close);
            } else {
                j += 1;
            }
            i = j;
            continue;
        }
        let line = toks[i].1;
        let word = ident(toks.get(i)).unwrap_or_default();
        let next = if toks.get(i + 1).map(|t| &t.0) == Some(&Tok::PathSep) {
            ident(toks.get(i + 2))
        } else {
            None
        };
        let hit = match (word, next) {
            ("fs", Some(f)) => {
                ["read", "open", "stat", "lstat"]
                    .iter()
                    .any(|p| f.starts_with(p))
                    || matches!(f, "metadata" | "symlink_metadata" | "canonicalize")
            }
            ("File", Some("open")) => true,
            ("fsio", Some(f)) => f.starts_with("read") || f.starts_with("open"),
            // A method: `.read_dir()` (`.` is `Other`; `fn canonicalize`
            // is not a call).
            (w, _) => {
                i > 0
                    && toks[i - 1].0 == Tok::Other
                    && matches!(
                        w,
                        "read_dir" | "read_link" | "symlink_metadata" | "canonicalize"
                    )
            }
        };
        if hit {
            let what = match next {
                Some(n) => format!("{word}::{n}"),
                None => word.to_string(),
            };
            out.push((line, what));
        }
        i += 1;
    }
    out
}

#[test]
fn only_the_listed_modules_read_files_by_path() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let listed: BTreeSet<&str> = READERS.iter().map(|(m, _)| *m).collect();
    let mut found = BTreeSet::new();
    let mut stray = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let Some(module) = module_of(rel) else {
            continue;
        };
        let name = module.join("::");
        let text = fs::read_to_string(f).unwrap();
        for (line, what) in file_reads(&text) {
            found.insert(name.clone());
            if !listed.contains(name.as_str()) {
                stray.push(format!("src/{}:{line}: {what}", rel.display()));
            }
        }
    }
    assert!(
        stray.is_empty(),
        "these read files by path outside the modules allowed to; read the host tree through HostRoot \
         (src/root.rs), or list the module in READERS with what it reads:\n{}",
        stray.join("\n")
    );
    let unused: Vec<&&str> = listed.iter().filter(|m| !found.contains(**m)).collect();
    assert!(
        unused.is_empty(),
        "listed in READERS but reading no file by path: {unused:?}"
    );
}

#[test]
fn file_reads_are_found_in_code_not_in_tests_or_words() {
    let text = r#"
use std::fs;
fn a(root: &Path) -> String {
    // fs::read_to_string(x) in a comment
    let s = "fs::read(x)";
    fsio::read_to_string(&root.join("sys/class/net"), 1, Links::Refuse)
}
fn b(p: &Path) { let _ = std::fs::symlink_metadata(p); let _ = p.read_link(); File::open(p); }
#[cfg(test)]
mod tests { fn t() { std::fs::read("x"); } }
"#;
    assert_eq!(
        file_reads(text),
        [
            (6, "fsio::read_to_string".to_string()),
            (8, "fs::symlink_metadata".to_string()),
            (8, "read_link".to_string()),
            (8, "File::open".to_string()),
        ]
    );
}
