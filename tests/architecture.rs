//! The house's layout, read from the source (`use` paths and inline `crate::`/`super::` paths), so
//! that it stays as docs/architecture.md draws it:
//! - `reconcile/plan/` is pure: it takes only the planner's vocabulary (`reconcile::types`), the
//!   model, the config and the pure helpers beside them (naming, hostlist), and no I/O (tokio,
//!   reqwest, sqlx, `std::process`, `std::fs`, `std::net`, a clock);
//! - `reconcile/types.rs` imports no edge;
//! - the edges (`reconcile/gce_edge/`, `reconcile/slurm_edge/`) answer the pass: they never import
//!   one of its phases (the reconciler, observe, ingest, commit, execute, report), nor each other;
//! - no two files import each other, directly or through a loop, in the product, the simulator,
//!   the test harness or the benches (a child module using its parent's items is not a loop);
//! - no production file (the lines before its first `#[cfg(test)]`) passes 800 lines, and each
//!   opens with a `//!` line saying its job.
//!
//! A failure names the files and the import. The checker itself is table-tested on small trees
//! written for the purpose (`the_checker_*`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The house's limit for a production file.
const MAX_LINES: usize = 800;
/// What `reconcile/plan/` may take from the crate, besides itself.
const PLAN_MAY_TAKE: &[&str] =
    &["crate::reconcile::types", "crate::model", "crate::config", "crate::naming", "crate::hostlist"];
/// What `reconcile/types.rs` may take from the crate.
const TYPES_MAY_TAKE: &[&str] = &["crate::model", "crate::config", "crate::naming", "crate::hostlist"];
/// Paths that are I/O or a clock, which `plan/` must not name anywhere in its code.
const IO: &[&str] = &[
    "tokio",
    "reqwest",
    "sqlx",
    "std::process",
    "std::fs",
    "std::net",
    "std::thread",
    "std::env",
    "Utc::now",
    "Local::now",
    "SystemTime::now",
    "Instant::now",
];
/// The phases of a pass, under `crate::reconcile`.
const PHASES: &[&str] = &["reconciler", "observe", "ingest", "commit", "execute", "report"];
/// The edges, under `crate::reconcile`.
const EDGES: &[&str] = &["gce_edge", "slurm_edge"];

/// One source file of a crate, as far as its production code goes.
#[derive(Debug)]
struct File {
    /// Relative to the repository root, for messages.
    path: String,
    /// `crate::a::b` as segments, `crate` first.
    module: Vec<String>,
    /// The production code without comments and string literals.
    code: String,
    /// Lines before the first `#[cfg(test)]`.
    lines: usize,
    /// Whether the file opens with a `//!` line.
    documented: bool,
}

/// An import of one file by another: the path as written (resolved) and the file it reaches.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Import {
    from: usize,
    to: usize,
    path: String,
}

/// One crate's files, indexed by module path, with what each file's `use` items say.
struct Crate {
    files: Vec<File>,
    by_module: BTreeMap<Vec<String>, usize>,
    /// Each file's `use` items: (public, the paths of the tree with the name each brings in).
    uses: Vec<Vec<(bool, Vec<UsePath>)>>,
    /// The names each file defines (struct, enum, fn, …).
    defined: Vec<BTreeSet<String>>,
    /// The names each file's `use` items bring into scope, as absolute paths.
    aliases: Vec<BTreeMap<String, Vec<String>>>,
}

/// A path of a use tree, with the name it brings into scope (`None` for a glob).
type UsePath = (Vec<String>, Option<String>);

// ---------------------------------------------------------------------------------------------
// Reading the source.

/// The code of `text` with comments and string/char literals blanked (lengths and lines kept).
fn strip(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                out.push(b' ');
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    out.extend(b"  ");
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    out.extend(b"  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(if b[i] == b'\n' { b'\n' } else { b' ' });
                    i += 1;
                }
            }
        } else if c == b'r' && matches!(b.get(i + 1), Some(b'"') | Some(b'#')) && !ident_byte(prev(b, i)) {
            // A raw string: r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
            let end = find(b, j + 1, &close).map_or(b.len(), |e| e + close.len());
            blank(&mut out, &b[i..end]);
            i = end;
        } else if c == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(b.len());
            blank(&mut out, &b[i..end]);
            i = end;
        } else if c == b'\'' {
            // A char literal ('a', '\n', '\''), or a lifetime ('a): only the former is blanked.
            let lit_end = if b.get(i + 1) == Some(&b'\\') {
                find(b, i + 2, b"'").map(|e| e + 1)
            } else if b.get(i + 2) == Some(&b'\'') {
                Some(i + 3)
            } else {
                // A multi-byte char: up to 4 bytes then a quote.
                (2..=5)
                    .map(|k| i + k)
                    .find(|&e| b.get(e) == Some(&b'\'') && !b[i + 1].is_ascii())
                    .map(|e| e + 1)
            };
            match lit_end {
                Some(end) => {
                    blank(&mut out, &b[i..end]);
                    i = end;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn prev(b: &[u8], i: usize) -> u8 {
    if i == 0 {
        b' '
    } else {
        b[i - 1]
    }
}

fn ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn find(b: &[u8], from: usize, what: &[u8]) -> Option<usize> {
    (from..b.len().saturating_sub(what.len() - 1)).find(|&k| &b[k..k + what.len()] == what)
}

fn blank(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend(bytes.iter().map(|&c| if c == b'\n' { b'\n' } else { b' ' }));
}

/// The production part of a file: the lines before its first `#[cfg(test)]` item, with the
/// `#[cfg(test)] mod x;` declarations on the way blanked (a test file beside it, not an end), and
/// how many lines that is.
fn production(text: &str) -> (String, usize) {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out = String::with_capacity(text.len());
    let mut k = 0;
    while k < lines.len() {
        if lines[k].trim_start().starts_with("#[cfg(test)]") {
            let mut j = k + 1;
            while j < lines.len() && lines[j].trim_start().starts_with("#[") {
                j += 1;
            }
            let decl = lines.get(j).map_or("", |l| l.trim());
            if !((decl.starts_with("mod ") || decl.starts_with("pub mod ")) && decl.ends_with(';')) {
                return (out, k);
            }
            out.extend(std::iter::repeat_n('\n', j + 1 - k));
            k = j + 1;
            continue;
        }
        out.push_str(lines[k]);
        k += 1;
    }
    (out, lines.len())
}

/// The `mod NAME;` declarations of a file's code (inline `mod x { .. }` bodies are part of the file).
fn declared_mods(code: &str) -> Vec<String> {
    let tokens = tokens(code);
    tokens.windows(3).filter(|w| w[0] == "mod" && w[2] == ";").map(|w| w[1].clone()).collect()
}

/// The `#[path = "..."]` of each `mod` declaration, read from the raw text (strings are blanked in code).
fn path_attrs(raw: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut pending: Option<String> = None;
    for line in raw.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("#[path = \"") {
            pending = rest.split('"').next().map(str::to_string);
        } else if let Some(p) = pending.take() {
            let words: Vec<&str> = l.split(|c: char| !ident_char(c)).filter(|w| !w.is_empty()).collect();
            if let Some(k) = words.iter().position(|w| *w == "mod") {
                if let Some(name) = words.get(k + 1) {
                    out.insert(name.to_string(), p);
                }
            } else if l.starts_with("#[") {
                pending = Some(p);
            }
        }
    }
    out
}

fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The code as tokens: identifiers, `::`, and single punctuation.
fn tokens(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if ident_char(c) {
            let start = i;
            while i < chars.len() && ident_char(chars[i]) {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push("::".into());
            i += 2;
        } else if c.is_whitespace() {
            i += 1;
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

/// Reads a crate from its root file (`lib.rs` or `main.rs`): every module file reachable through
/// `mod` declarations outside `#[cfg(test)]`.
fn read_crate(repo: &Path, root: &Path) -> Crate {
    let mut krate = Crate {
        files: Vec::new(),
        by_module: BTreeMap::new(),
        uses: Vec::new(),
        defined: Vec::new(),
        aliases: Vec::new(),
    };
    let mut queue = vec![(root.to_path_buf(), vec!["crate".to_string()])];
    while let Some((file, module)) = queue.pop() {
        let raw =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        let (prod, lines) = production(&raw);
        let code = strip(&prod);
        let documented = raw.starts_with("//!");
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let dir = if ["mod.rs", "lib.rs", "main.rs"].contains(&name.as_str()) {
            file.parent().unwrap().to_path_buf()
        } else {
            file.with_extension("")
        };
        let paths = path_attrs(&prod);
        for child in declared_mods(&code) {
            let found = match paths.get(&child) {
                Some(p) => Some(file.parent().unwrap().join(p)),
                None => [dir.join(format!("{child}.rs")), dir.join(&child).join("mod.rs")]
                    .into_iter()
                    .find(|p| p.exists()),
            };
            let found = found.unwrap_or_else(|| panic!("{}: mod {child} has no file", file.display()));
            let mut m = module.clone();
            m.push(child);
            queue.push((found, m));
        }
        let path = file.strip_prefix(repo).unwrap_or(&file).to_string_lossy().into_owned();
        krate.by_module.insert(module.clone(), krate.files.len());
        krate
            .uses
            .push(use_items(&code).into_iter().map(|(public, tree)| (public, use_paths(&tree))).collect());
        krate.defined.push(defined(&code));
        krate.files.push(File { path, module, code, lines, documented });
    }
    krate.aliases = (0..krate.files.len()).map(|f| krate.scope(f)).collect();
    krate
}

// ---------------------------------------------------------------------------------------------
// Paths.

/// The paths a use tree names, each as segments: `a::{b, c::{d as e, *}}` gives `a::b`, `a::c::d`
/// and `a::c::*`, with the name each brings into scope (`None` for a glob).
fn use_paths(tokens: &[String]) -> Vec<(Vec<String>, Option<String>)> {
    fn walk(t: &[String], i: &mut usize, prefix: &[String], out: &mut Vec<(Vec<String>, Option<String>)>) {
        let mut path = prefix.to_vec();
        loop {
            let Some(tok) = t.get(*i) else { return };
            match tok.as_str() {
                "{" => {
                    *i += 1;
                    loop {
                        walk(t, i, &path, out);
                        match t.get(*i).map(String::as_str) {
                            Some(",") => {
                                *i += 1;
                                if t.get(*i).map(String::as_str) == Some("}") {
                                    *i += 1;
                                    return;
                                }
                            }
                            Some("}") => {
                                *i += 1;
                                return;
                            }
                            _ => return,
                        }
                    }
                }
                "*" => {
                    *i += 1;
                    path.push("*".into());
                    out.push((path, None));
                    return;
                }
                "::" => *i += 1,
                "," | "}" | ";" => {
                    if path.len() > prefix.len() {
                        let name = path.last().cloned();
                        if path.last().map(String::as_str) == Some("self") {
                            path.pop();
                            let name = path.last().cloned();
                            out.push((path, name));
                        } else {
                            out.push((path, name));
                        }
                    }
                    return;
                }
                "as" => {
                    let alias = t.get(*i + 1).cloned();
                    *i += 2;
                    if path.last().map(String::as_str) == Some("self") {
                        path.pop();
                    }
                    out.push((path, alias));
                    return;
                }
                id => {
                    path.push(id.to_string());
                    *i += 1;
                }
            }
        }
    }
    let mut out = Vec::new();
    let mut i = 0;
    walk(tokens, &mut i, &[], &mut out);
    out
}

/// The `use` items of a file's code: (public, tokens of the tree up to and including `;`).
fn use_items(code: &str) -> Vec<(bool, Vec<String>)> {
    let t = tokens(code);
    let mut out = Vec::new();
    let mut k = 0;
    while k < t.len() {
        if t[k] == "use" && (k == 0 || !matches!(t[k - 1].as_str(), "::")) {
            let public = k > 0
                && (t[k - 1] == "pub"
                    || (t[k - 1] == ")" && t[..k].iter().rev().take(6).any(|x| x == "pub")));
            let end = t[k..].iter().position(|x| x == ";").map_or(t.len(), |e| k + e + 1);
            out.push((public, t[k + 1..end].to_vec()));
            k = end;
        } else {
            k += 1;
        }
    }
    out
}

/// Inline paths of a file's code outside `use` items: every `a::b::c` sequence's segments.
fn inline_paths(code: &str) -> Vec<Vec<String>> {
    let t = tokens(code);
    let mut out = Vec::new();
    let mut k = 0;
    while k < t.len() {
        if t[k] == "use" {
            k += t[k..].iter().position(|x| x == ";").unwrap_or(t.len() - k) + 1;
            continue;
        }
        if ident_char(t[k].chars().next().unwrap_or(' ')) && t.get(k + 1).map(String::as_str) == Some("::") {
            let preceded = k > 0 && t[k - 1] == "::";
            let mut path = vec![t[k].clone()];
            let mut j = k + 1;
            while t.get(j).map(String::as_str) == Some("::") {
                match t.get(j + 1) {
                    Some(id) if ident_char(id.chars().next().unwrap_or(' ')) => {
                        path.push(id.clone());
                        j += 2;
                    }
                    _ => break,
                }
            }
            if !preceded {
                out.push(path);
            }
            k = j;
        } else {
            k += 1;
        }
    }
    out
}

impl Crate {
    /// `path` as written in the file of `module`, made absolute (`crate::...`), or `None` for a path
    /// outside the crate (std, a dependency) or one this checker cannot place.
    fn absolute(
        &self,
        module: &[String],
        aliases: &BTreeMap<String, Vec<String>>,
        path: &[String],
    ) -> Option<Vec<String>> {
        let first = path.first()?;
        let mut base: Vec<String> = match first.as_str() {
            "crate" => vec!["crate".into()],
            "self" => module.to_vec(),
            "super" => {
                let mut m = module.to_vec();
                let mut rest = path;
                while rest.first().map(String::as_str) == Some("super") {
                    m.pop();
                    rest = &rest[1..];
                }
                m.extend(rest.iter().cloned());
                return Some(m);
            }
            other => {
                if let Some(a) = aliases.get(other) {
                    a.clone()
                } else {
                    let mut child = module.to_vec();
                    child.push(other.to_string());
                    if self.by_module.contains_key(&child) {
                        child
                    } else {
                        return None;
                    }
                }
            }
        };
        base.extend(path[1..].iter().cloned());
        Some(base)
    }

    /// The file an absolute path reaches: the deepest module file on it, through the `pub use`
    /// re-exports of that file (explicit ones, then globs whose module holds the name).
    fn reach(&self, path: &[String], depth: usize) -> Option<usize> {
        let mut k = path.len();
        let file = loop {
            if k == 0 {
                return None;
            }
            if let Some(&f) = self.by_module.get(&path[..k]) {
                break f;
            }
            k -= 1;
        };
        let Some(item) = path.get(k).filter(|i| *i != "*") else { return Some(file) };
        if depth > 8 {
            return Some(file);
        }
        let f = &self.files[file];
        for (public, paths) in &self.uses[file] {
            if !public {
                continue;
            }
            for (p, name) in paths {
                let Some(abs) = self.absolute(&f.module, &self.aliases[file], p) else { continue };
                if name.as_deref() == Some(item.as_str()) {
                    let mut target = abs;
                    target.extend(path[k + 1..].iter().cloned());
                    return self.reach(&target, depth + 1).or(Some(file));
                }
                if name.is_none() && !self.defined[file].contains(item) {
                    let mut target = abs[..abs.len() - 1].to_vec();
                    if let Some(&g) = self.by_module.get(&target) {
                        if self.defined[g].contains(item) || self.reexports(g, item) {
                            target.push(item.clone());
                            target.extend(path[k + 1..].iter().cloned());
                            return self.reach(&target, depth + 1).or(Some(g));
                        }
                    }
                }
            }
        }
        Some(file)
    }

    /// The names a file's `use` items bring into scope, as absolute paths.
    fn scope(&self, file: usize) -> BTreeMap<String, Vec<String>> {
        let f = &self.files[file];
        let mut out = BTreeMap::new();
        for (_, paths) in &self.uses[file] {
            for (p, name) in paths {
                let (Some(name), Some(abs)) = (name, self.absolute(&f.module, &BTreeMap::new(), p)) else {
                    continue;
                };
                out.insert(name.clone(), abs);
            }
        }
        out
    }

    /// Whether a file's `pub use` items bring `name` into scope.
    fn reexports(&self, file: usize, name: &str) -> bool {
        self.uses[file]
            .iter()
            .filter(|(public, _)| *public)
            .any(|(_, paths)| paths.iter().any(|(_, n)| n.as_deref() == Some(name)))
    }

    /// Every import of one file by another in the crate (a file using an ancestor module's items is
    /// not counted).
    fn imports(&self) -> Vec<Import> {
        let mut out = BTreeSet::new();
        for (from, f) in self.files.iter().enumerate() {
            let aliases = &self.aliases[from];
            let mut paths: Vec<Vec<String>> =
                self.uses[from].iter().flat_map(|(_, ps)| ps.iter().map(|(p, _)| p.clone())).collect();
            paths.extend(inline_paths(&f.code));
            for p in paths {
                let Some(abs) = self.absolute(&f.module, aliases, &p) else { continue };
                let Some(to) = self.reach(&abs, 0) else { continue };
                let target = &self.files[to].module;
                if to == from || f.module.starts_with(target) {
                    continue;
                }
                out.insert(Import { from, to, path: abs.join("::") });
            }
        }
        // One import per pair of files, the first path that shows it.
        let mut seen = BTreeSet::new();
        out.into_iter().filter(|i| seen.insert((i.from, i.to))).collect()
    }
}

/// The items `code` defines (struct, enum, fn, const, static, type, trait, mod, union).
fn defined(code: &str) -> BTreeSet<String> {
    let t = tokens(code);
    t.windows(2)
        .filter(|w| {
            matches!(
                w[0].as_str(),
                "struct" | "enum" | "fn" | "const" | "static" | "type" | "trait" | "mod" | "union"
            )
        })
        .map(|w| w[1].clone())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The rules.

fn under(module: &[String], prefix: &str) -> bool {
    let p: Vec<&str> = prefix.split("::").collect();
    module.len() >= p.len() && module.iter().zip(&p).all(|(a, b)| a == b)
}

/// The loops among a crate's files (Tarjan's strongly connected components of more than one file),
/// each as the imports inside it.
fn loops(krate: &Crate, imports: &[Import]) -> Vec<Vec<Import>> {
    let n = krate.files.len();
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); n];
    for i in imports {
        next[i.from].push(i.to);
    }
    struct T {
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        counter: usize,
        sccs: Vec<Vec<usize>>,
    }
    fn visit(v: usize, next: &[Vec<usize>], t: &mut T) {
        t.index[v] = Some(t.counter);
        t.low[v] = t.counter;
        t.counter += 1;
        t.stack.push(v);
        t.on[v] = true;
        for &w in &next[v] {
            match t.index[w] {
                None => {
                    visit(w, next, t);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(iw) if t.on[w] => t.low[v] = t.low[v].min(iw),
                _ => {}
            }
        }
        if Some(t.low[v]) == t.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on[w] = false;
                scc.push(w);
                if w == v {
                    break;
                }
            }
            t.sccs.push(scc);
        }
    }
    let mut t = T {
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        counter: 0,
        sccs: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            visit(v, &next, &mut t);
        }
    }
    t.sccs
        .into_iter()
        .filter(|s| s.len() > 1)
        .map(|s| imports.iter().filter(|i| s.contains(&i.from) && s.contains(&i.to)).cloned().collect())
        .collect()
}

/// Every breach of the rules in one crate. `product` crates are held to the line and doc rules too.
fn breaches(krate: &Crate, product: bool) -> Vec<String> {
    let mut out = Vec::new();
    let imports = krate.imports();
    let name = |i: usize| krate.files[i].path.as_str();
    for l in loops(krate, &imports) {
        let files: BTreeSet<&str> = l.iter().map(|i| name(i.from)).collect();
        let mut how: Vec<String> =
            l.iter().map(|i| format!("{} imports {} ({})", name(i.from), i.path, name(i.to))).collect();
        how.sort();
        out.push(format!(
            "import loop among {}: {}",
            files.into_iter().collect::<Vec<_>>().join(", "),
            how.join("; ")
        ));
    }
    for i in &imports {
        let (from, to) = (&krate.files[i.from].module, &krate.files[i.to].module);
        if under(from, "crate::reconcile::plan")
            && !under(to, "crate::reconcile::plan")
            && !PLAN_MAY_TAKE.iter().any(|p| under(to, p))
        {
            out.push(format!(
                "plan/ reaches beyond the planner's vocabulary, the model and the config: {} imports {} ({})",
                name(i.from),
                i.path,
                name(i.to)
            ));
        }
        if from.as_slice() == ["crate", "reconcile", "types"] && !TYPES_MAY_TAKE.iter().any(|p| under(to, p))
        {
            out.push(format!(
                "types imports beyond the model and the config: {} imports {} ({})",
                name(i.from),
                i.path,
                name(i.to)
            ));
        }
        for edge in EDGES {
            if !under(from, &format!("crate::reconcile::{edge}")) {
                continue;
            }
            for phase in PHASES {
                if under(to, &format!("crate::reconcile::{phase}")) {
                    out.push(format!(
                        "an edge imports a phase of the pass: {} imports {} ({})",
                        name(i.from),
                        i.path,
                        name(i.to)
                    ));
                }
            }
            for other in EDGES.iter().filter(|o| *o != edge) {
                if under(to, &format!("crate::reconcile::{other}")) {
                    out.push(format!(
                        "an edge imports the other edge: {} imports {} ({})",
                        name(i.from),
                        i.path,
                        name(i.to)
                    ));
                }
            }
        }
    }
    for f in krate.files.iter().filter(|f| under(&f.module, "crate::reconcile::plan")) {
        let t = tokens(&f.code);
        for io in IO {
            let words: Vec<&str> = io.split("::").collect();
            let hit = t.windows(words.len() * 2 - 1).any(|w| {
                w.iter().step_by(2).zip(&words).all(|(a, b)| a == b)
                    && w.iter().skip(1).step_by(2).all(|s| s == "::")
            });
            if hit {
                out.push(format!("plan/ reaches I/O or a clock: {} names {io}", f.path));
            }
        }
    }
    if product {
        for f in &krate.files {
            if f.lines > MAX_LINES {
                out.push(format!("{} has {} production lines (at most {MAX_LINES})", f.path, f.lines));
            }
            if !f.documented {
                out.push(format!("{} does not open with a `//!` line saying its job", f.path));
            }
        }
    }
    out
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_house_keeps_its_rooms() {
    let repo = repo();
    let mut all = Vec::new();
    let mut files = 0;
    for (root, product) in [
        ("src/lib.rs", true),
        ("src/main.rs", true),
        ("crates/gce-sim/src/lib.rs", true),
        ("crates/gce-sim/src/main.rs", true),
        ("crates/devcluster/src/lib.rs", true),
        ("benches/budgets/main.rs", false),
    ] {
        let krate = read_crate(&repo, &repo.join(root));
        files += krate.files.len();
        all.extend(breaches(&krate, product));
    }
    assert!(files > 150, "only {files} files read: the walk of the module tree is broken");
    assert!(all.is_empty(), "the house's rules are broken ({}):\n- {}", all.len(), all.join("\n- "));
}

// ---------------------------------------------------------------------------------------------
// The checker, table-tested on small trees.

/// Writes `files` (path, text) under a fresh directory and reads the crate rooted at `lib.rs`.
fn tree(files: &[(&str, &str)]) -> (tempdir::Dir, Crate) {
    let dir = tempdir::Dir::new();
    for (path, text) in files {
        let p = dir.0.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
    }
    let krate = read_crate(&dir.0, &dir.0.join("lib.rs"));
    (dir, krate)
}

mod tempdir {
    /// A directory removed when dropped.
    pub struct Dir(pub std::path::PathBuf);
    impl Dir {
        pub fn new() -> Dir {
            use std::sync::atomic::{AtomicU32, Ordering};
            static N: AtomicU32 = AtomicU32::new(0);
            let p = std::env::temp_dir().join(format!(
                "slurm-dws-arch-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::SeqCst)
            ));
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

const RECONCILE: &str =
    "//! r\npub mod plan;\npub mod types;\npub mod observe;\npub mod gce_edge;\npub mod slurm_edge;\n";

#[test]
fn the_checker_finds_each_breach_and_names_the_files_and_the_import() {
    let long = format!("//! long\n{}", "fn f() {}\n".repeat(801));
    // (what, the files written over the clean tree, the one breach expected)
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, Option<&'a str>);
    let cases: Vec<Case> = vec![
        ("a clean tree", vec![], None),
        (
            "plan/ takes tokio",
            vec![("reconcile/plan/mod.rs", "//! p\nuse tokio::time::sleep;\n")],
            Some("plan/ reaches I/O or a clock: reconcile/plan/mod.rs names tokio"),
        ),
        (
            "plan/ reads the clock inline",
            vec![("reconcile/plan/mod.rs", "//! p\nfn now() -> u64 { chrono::Utc::now().timestamp() as u64 }\n")],
            Some("names Utc::now"),
        ),
        (
            "plan/ reaches an edge through a re-export",
            vec![
                ("reconcile/plan/mod.rs", "//! p\nuse crate::reconcile::gce_edge::Send;\n"),
                ("reconcile/gce_edge/mod.rs", "//! g\npub mod sends;\npub use sends::Send;\n"),
                ("reconcile/gce_edge/sends.rs", "//! s\npub struct Send;\n"),
            ],
            Some("plan/ reaches beyond the planner's vocabulary, the model and the config: reconcile/plan/mod.rs imports crate::reconcile::gce_edge::Send (reconcile/gce_edge/sends.rs)"),
        ),
        (
            "an edge imports a phase",
            vec![("reconcile/gce_edge/mod.rs", "//! g\npub mod sends;\nfn f() { super::observe::look(); }\n")],
            Some("an edge imports a phase of the pass: reconcile/gce_edge/mod.rs imports crate::reconcile::observe::look (reconcile/observe.rs)"),
        ),
        (
            "types imports an edge",
            vec![("reconcile/types.rs", "//! t\nuse super::slurm_edge::Run;\n")],
            Some("types imports beyond the model and the config: reconcile/types.rs imports crate::reconcile::slurm_edge::Run"),
        ),
        (
            "two files import each other",
            vec![
                ("reconcile/plan/mod.rs", "//! p\nmod other;\nmod rule;\n"),
                ("reconcile/plan/rule.rs", "//! r\nuse super::other::{B as C};\npub struct A;\n"),
                ("reconcile/plan/other.rs", "//! o\npub struct B;\nfn f() -> super::rule::A { super::rule::A }\n"),
            ],
            Some("import loop among reconcile/plan/other.rs, reconcile/plan/rule.rs: reconcile/plan/other.rs imports crate::reconcile::plan::rule::A (reconcile/plan/rule.rs); reconcile/plan/rule.rs imports crate::reconcile::plan::other::B (reconcile/plan/other.rs)"),
        ),
        ("a long file", vec![("reconcile/slurm_edge/mod.rs", long.as_str())], Some("reconcile/slurm_edge/mod.rs has 802 production lines")),
        (
            "a file without its //! line",
            vec![("reconcile/slurm_edge/mod.rs", "pub fn run() {}\n")],
            Some("reconcile/slurm_edge/mod.rs does not open with a `//!` line"),
        ),
    ];
    for (what, files, expected) in cases {
        let mut all: BTreeMap<&str, &str> = [
            ("lib.rs", "//! l\npub mod reconcile;\n"),
            ("reconcile/mod.rs", RECONCILE),
            ("reconcile/plan/mod.rs", "//! p\nuse crate::reconcile::types::A;\nmod rule;\n"),
            ("reconcile/plan/rule.rs", "//! rule\nuse super::*;\n"),
            ("reconcile/types.rs", "//! t\npub struct A;\npub struct B;\n"),
            (
                "reconcile/observe.rs",
                "//! o\nuse super::gce_edge::sends;\npub fn look() {}\n// use tokio; super::plan::x\n",
            ),
            ("reconcile/gce_edge/mod.rs", "//! g\npub mod sends;\n"),
            (
                "reconcile/gce_edge/sends.rs",
                "//! s\nuse crate::reconcile::types::*;\nconst S: &str = \"super::observe\";\n",
            ),
            (
                "reconcile/slurm_edge/mod.rs",
                "//! s\npub fn run() {}\n#[cfg(test)]\nmod tests { use crate::reconcile::observe; }\n",
            ),
        ]
        .into_iter()
        .collect();
        all.extend(files.iter().map(|(p, t)| (*p, *t)));
        let files: Vec<(&str, &str)> = all.into_iter().collect();
        let (_dir, krate) = tree(&files);
        let found = breaches(&krate, true);
        match expected {
            None => assert!(found.is_empty(), "{what}: {found:?}"),
            Some(e) => assert!(
                found.len() == 1 && found[0].contains(e),
                "{what}: expected one breach containing {e:?}, found {found:?}"
            ),
        }
    }
}

#[test]
fn the_checker_reads_use_trees_and_strips_comments_and_strings() {
    let t = tokens("a::{b, c::{d as e, *}, f::{self}};");
    let got: Vec<(String, Option<String>)> =
        use_paths(&t).into_iter().map(|(p, n)| (p.join("::"), n)).collect();
    let want: Vec<(String, Option<String>)> = vec![
        ("a::b".into(), Some("b".into())),
        ("a::c::d".into(), Some("e".into())),
        ("a::c::*".into(), None),
        ("a::f".into(), Some("f".into())),
    ];
    assert_eq!(got, want);
    let s = strip("let a = \"crate::x\"; // crate::y\n/* crate::z /* nested */ */ let c = 'c'; fn f<'a>() {} r#\"crate::w\"#");
    assert!(!s.contains("crate::"), "{s}");
    assert!(s.contains("<'a>"), "a lifetime is code: {s}");
    assert_eq!(s.lines().count(), 2);
    assert_eq!(production("//! x\nfn a() {}\n#[cfg(test)]\nmod tests {}\n").1, 2);
}
