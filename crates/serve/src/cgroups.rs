//! Which cgroups to count: a walk of the cgroup v2 tree (no links followed, bounded depth and
//! count), glob patterns over cgroup paths, and the labels a path carries: its systemd slice
//! and unit, and a Kubernetes pod's uid, QoS class and container id.

use std::path::Path;

/// At most this many cgroups are listed per walk: a machine with more is cut, and the cut is
/// said (the descriptor budget would leave them out anyway).
pub const MAX_LISTED: usize = 100_000;

/// Which cgroups are counted.
#[derive(Debug, Clone, PartialEq)]
pub enum Selection {
    /// None: the host only.
    None,
    /// Every cgroup of the tree (`--for-each-cgroup auto`).
    Auto,
    /// Those whose path matches one of the patterns (`--cgroup`, `--for-each-cgroup a,b`).
    Patterns(Vec<Pattern>),
}

impl Selection {
    /// The cgroups `serve`'s flags select: `--cgroup` patterns (`cgroups`) and
    /// `--for-each-cgroup` (`auto`, or a comma-separated list of patterns). An error names the
    /// flag and says what is wrong.
    pub fn from_flags(
        cgroups: &[String],
        for_each: Option<&str>,
    ) -> Result<Selection, SelectionError> {
        let pattern = |flag: &'static str, text: &str| {
            Pattern::new(text).map_err(|error| SelectionError::Pattern { flag, error })
        };
        let mut patterns = Vec::new();
        for p in cgroups {
            patterns.push(pattern("--cgroup", p)?);
        }
        match for_each.map(str::trim) {
            Some("auto") if !patterns.is_empty() => return Err(SelectionError::AutoWithPatterns),
            Some("auto") => return Ok(Selection::Auto),
            Some(list) => {
                for p in list.split(',').filter(|p| !p.trim().is_empty()) {
                    patterns.push(pattern("--for-each-cgroup", p)?);
                }
            }
            None => {}
        }
        Ok(if patterns.is_empty() { Selection::None } else { Selection::Patterns(patterns) })
    }
}

/// Why `serve`'s cgroup flags select nothing they could count.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SelectionError {
    /// A pattern given to `flag` is not one.
    #[error("{flag}: {error}")]
    Pattern {
        /// `--cgroup` or `--for-each-cgroup`.
        flag: &'static str,
        /// What is wrong with it.
        error: PatternError,
    },
    /// `--for-each-cgroup auto` with `--cgroup` patterns.
    #[error("--for-each-cgroup auto counts every cgroup: give it without --cgroup")]
    AutoWithPatterns,
}

/// Why a cgroup pattern is not one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PatternError {
    /// Nothing but blanks.
    #[error("an empty cgroup pattern: give a path such as `/system.slice/*`")]
    Empty,
    /// A `..` component (the pattern as given, trimmed).
    #[error("cgroup pattern `{0}`: `..` would leave the cgroup tree")]
    LeavesTree(String),
}

/// A glob over cgroup paths (`/system.slice/*.service`, `/kubepods.slice/**`): `*` matches
/// within one path component, `**` any number of components, `?` one character. A pattern
/// without a leading `/` is taken from the root, as perf names cgroups.
#[derive(Debug, Clone, PartialEq)]
pub struct Pattern {
    text: String,
    parts: Vec<String>,
}

impl Pattern {
    /// Parses `text`; a `..` component is refused (it would leave the tree).
    pub fn new(text: &str) -> Result<Pattern, PatternError> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(PatternError::Empty);
        }
        let parts: Vec<String> =
            trimmed.split('/').filter(|p| !p.is_empty()).map(str::to_string).collect();
        if parts.iter().any(|p| p == "..") {
            return Err(PatternError::LeavesTree(trimmed.to_string()));
        }
        Ok(Pattern { text: trimmed.to_string(), parts })
    }

    /// The pattern as given.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether `path` (`/a/b`, `/` the root) matches.
    pub fn matches(&self, path: &str) -> bool {
        // A plain path, compared without collecting: the walk asks every pattern about every
        // directory it meets, so a hundred named cgroups are ten thousand questions.
        if self.is_literal() {
            let comps = path.split('/').filter(|p| !p.is_empty());
            return comps.eq(self.parts.iter().map(String::as_str));
        }
        let comps: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let parts: Vec<&str> = self.parts.iter().map(String::as_str).collect();
        match_parts(&parts, &comps)
    }

    /// Whether a cgroup below `path` (`/a/b`, `/` the root) may match: the walk need not read
    /// a directory under which no pattern can match.
    pub fn may_match_below(&self, path: &str) -> bool {
        if self.is_literal() {
            // `path` must be a proper prefix of the plain path.
            let mut parts = self.parts.iter();
            for c in path.split('/').filter(|p| !p.is_empty()) {
                if parts.next().is_none_or(|p| p != c) {
                    return false;
                }
            }
            return parts.next().is_some();
        }
        let comps: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let parts: Vec<&str> = self.parts.iter().map(String::as_str).collect();
        prefix_matches(&parts, &comps)
    }

    /// Whether the pattern has no wildcard (a plain path).
    pub fn is_literal(&self) -> bool {
        !self.text.contains(['*', '?'])
    }

    /// The path of a literal pattern (`/a/b`).
    pub fn literal_path(&self) -> String {
        format!("/{}", self.parts.join("/"))
    }
}

/// Whether `comps` can be continued, by one component or more, into a path `parts` matches.
fn prefix_matches(parts: &[&str], comps: &[&str]) -> bool {
    match parts.split_first() {
        None => false,
        Some((&"**", _)) => true,
        Some((first, rest)) => match comps.split_first() {
            None => true,
            Some((c, more)) => glob(first.as_bytes(), c.as_bytes()) && prefix_matches(rest, more),
        },
    }
}

fn match_parts(parts: &[&str], comps: &[&str]) -> bool {
    match parts.split_first() {
        None => comps.is_empty(),
        Some((&"**", rest)) => (0..=comps.len()).any(|k| match_parts(rest, &comps[k..])),
        Some((first, rest)) => {
            !comps.is_empty() && glob(first.as_bytes(), comps[0].as_bytes()) && {
                match_parts(rest, &comps[1..])
            }
        }
    }
}

/// `*` and `?` within one component.
fn glob(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some(pi);
            mark = si;
            pi += 1;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

/// What a walk of the cgroup tree found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Found {
    /// The cgroups picked, as paths (`/system.slice/x.service`) with their ids (the inode of
    /// the directory, the kernel's cgroup id on cgroup2), parents before children, siblings
    /// by name.
    pub cgroups: Vec<(String, u64)>,
    /// Directories whose names are not UTF-8 (shown with U+FFFD): perf and tmetric name cgroups
    /// by path text, so they are left out, and said.
    pub unnamed: Vec<String>,
    /// The picked cgroups that have no child cgroup: a parent's counts include its
    /// children's, so summing leaves counts each task once.
    pub leaves: std::collections::BTreeSet<String>,
    /// The walk was cut at [`MAX_LISTED`].
    pub cut: bool,
    /// Directories whose entries were read in this walk; the others' subdirectories were
    /// known from an earlier walk's listing.
    pub read: usize,
}

/// One directory's subdirectories as read, and its stat when read.
#[derive(Debug, Clone)]
struct Listing {
    ino: u64,
    mtime: (i64, i64),
    nlink: u64,
    seen: u64,
    /// Subdirectories by name, with their inodes when read.
    children: Vec<(String, u64)>,
    /// Subdirectories whose names are not UTF-8: as shown, as named, and their inodes.
    unnamed: Vec<(String, std::ffi::OsString, u64)>,
}

/// Walks the cgroup tree again and again, keeping each directory's listing. Reading a
/// cgroup's entries lists every interface file kernfs holds in it (dozens); a stat of the
/// directory and of each subdirectory it had tells as much: a subdirectory made raises the
/// directory's link count (subdirectories plus two), one removed or made again under its name
/// fails its stat or has another inode (the cgroup id). The directory's mtime cannot be
/// relied on: kernfs stamps it only once something has set its attributes.
#[derive(Debug, Default)]
pub struct Walker {
    listings: std::collections::HashMap<String, Listing>,
    walks: u64,
}

/// A directory to visit: its path and, when its parent's check took it, its stat.
type Visit = (String, Option<std::fs::Metadata>);

impl Walker {
    /// The cgroups under `mount` that `selection` picks now. Directories are read as they
    /// are: one that vanishes during the walk is skipped; links are never followed. Each
    /// picked cgroup's id is its directory's inode at this walk's stat.
    pub fn discover(&mut self, mount: &Path, selection: &Selection) -> Found {
        use std::os::unix::fs::MetadataExt;
        let mut found = Found::default();
        if matches!(selection, Selection::None) {
            self.listings.clear();
            return found;
        }
        if let Selection::Patterns(patterns) = selection
            && patterns.iter().all(Pattern::is_literal)
        {
            // Named cgroups only: each is one stat, with no listing of its parents (which is
            // a stat of every sibling of each, every interval).
            self.listings.clear();
            let mut paths: Vec<String> = patterns.iter().map(Pattern::literal_path).collect();
            // Parents before children, siblings by name: the walk's order.
            let key = |p: &String| {
                let comps: Vec<String> =
                    p.split('/').filter(|c| !c.is_empty()).map(str::to_string).collect();
                (comps.len(), comps)
            };
            paths.sort_by_cached_key(key);
            paths.dedup();
            // Each directory on the way is stat'ed without following a link (each once), as
            // the walk refuses links: a cgroup is reached only through directories.
            let mut checked: std::collections::HashMap<String, Option<std::fs::Metadata>> =
                std::collections::HashMap::new();
            for path in paths {
                let mut meta = None;
                let mut prefix = String::new();
                for comp in path.split('/').filter(|c| !c.is_empty()) {
                    prefix.push('/');
                    prefix.push_str(comp);
                    meta = checked
                        .entry(prefix.clone())
                        .or_insert_with(|| {
                            std::fs::symlink_metadata(mount.join(&prefix[1..]))
                                .ok()
                                .filter(std::fs::Metadata::is_dir)
                        })
                        .clone();
                    if meta.is_none() {
                        break;
                    }
                }
                if path == "/" {
                    meta = std::fs::symlink_metadata(mount).ok().filter(std::fs::Metadata::is_dir);
                }
                let Some(meta) = meta else { continue };
                // cgroupfs keeps a directory's link count at 2 plus its subdirectories.
                if meta.nlink() <= 2 {
                    found.leaves.insert(path.clone());
                }
                found.cgroups.push((path, meta.ino()));
            }
            return found;
        }
        self.walks += 1;
        let walk = self.walks;
        // Breadth first, so that when the budget cuts, slices come before their leaves.
        let mut level: Vec<Visit> = vec![("/".to_string(), None)];
        let mut listed = 0usize;
        while !level.is_empty() {
            let mut next = Vec::new();
            for (path, meta) in level {
                let want = wanted(selection, &path);
                // A picked cgroup's subdirectories are walked into when a pattern may match
                // below it; another directory only then (a walk of every service's tree for a
                // few named cgroups was most of an interval's work).
                let below = match selection {
                    Selection::Patterns(patterns) => {
                        patterns.iter().any(|p| p.may_match_below(&path))
                    }
                    _ => true,
                };
                if !want && !below {
                    continue;
                }
                let dir = if path == "/" { mount.to_path_buf() } else { mount.join(&path[1..]) };
                let meta = meta.or_else(|| std::fs::symlink_metadata(&dir).ok());
                let Some(meta) = meta.filter(std::fs::Metadata::is_dir) else {
                    self.listings.remove(&path);
                    continue;
                };
                if want {
                    found.cgroups.push((path.clone(), meta.ino()));
                }
                if !below {
                    // The link count tells a leaf without reading the directory.
                    if meta.nlink() <= 2 {
                        found.leaves.insert(path.clone());
                    }
                    continue;
                }
                let Some(children) = self.children(&path, &dir, &meta, walk, &mut found.read)
                else {
                    continue;
                };
                let unnamed = self.listings.get(&path).map_or(&[][..], |l| &l.unnamed[..]);
                for (shown, _, _) in unnamed {
                    if wanted(selection, shown) || matches!(selection, Selection::Auto) {
                        found.unnamed.push(shown.clone());
                    }
                }
                if children.is_empty() && unnamed.is_empty() && want {
                    found.leaves.insert(path.clone());
                }
                listed += children.len();
                if listed > MAX_LISTED {
                    found.cut = true;
                    break;
                }
                next.extend(children);
            }
            if found.cut {
                break;
            }
            level = next;
        }
        self.listings.retain(|_, l| l.seen == walk);
        found
    }

    /// `path`'s subdirectories, each with its stat when the check took it: the kept listing
    /// while the directory's stat and each subdirectory's say nothing changed, else read now
    /// (counted in `read`). `None` when it cannot be read.
    fn children(
        &mut self,
        path: &str,
        dir: &Path,
        meta: &std::fs::Metadata,
        walk: u64,
        read: &mut usize,
    ) -> Option<Vec<Visit>> {
        use std::os::unix::fs::{DirEntryExt, MetadataExt};
        let mtime = (meta.mtime(), meta.mtime_nsec());
        let mut visits: Vec<Visit> = Vec::new();
        let kept = self
            .listings
            .get(path)
            .filter(|l| l.ino == meta.ino() && l.mtime == mtime && l.nlink == meta.nlink());
        let still = kept.is_some_and(|l| {
            let same = |name: &std::ffi::OsStr, ino: u64| {
                std::fs::symlink_metadata(dir.join(name)).ok().filter(|m| m.ino() == ino)
            };
            for (child, ino) in &l.children {
                let name = child.rsplit_once('/').map_or(child.as_str(), |(_, n)| n);
                match same(name.as_ref(), *ino) {
                    Some(m) => visits.push((child.clone(), Some(m))),
                    None => return false,
                }
            }
            l.unnamed.iter().all(|(_, raw, ino)| same(raw, *ino).is_some())
        });
        if !still {
            visits.clear();
            let Ok(entries) = std::fs::read_dir(dir) else {
                self.listings.remove(path);
                return None;
            };
            *read += 1;
            let child = |name: &str| {
                if path == "/" { format!("/{name}") } else { format!("{path}/{name}") }
            };
            let mut children: Vec<(String, u64)> = Vec::new();
            let mut unnamed = Vec::new();
            for e in entries.filter_map(Result::ok) {
                if !e.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                match e.file_name().into_string() {
                    Ok(name) => children.push((child(&name), e.ino())),
                    Err(raw) => unnamed.push((child(&raw.to_string_lossy()), raw, e.ino())),
                }
            }
            children.sort();
            visits = children.iter().map(|(c, _)| (c.clone(), None)).collect();
            let listing = Listing {
                ino: meta.ino(),
                mtime,
                nlink: meta.nlink(),
                seen: walk,
                children,
                unnamed,
            };
            self.listings.insert(path.to_string(), listing);
        }
        let listing = self.listings.get_mut(path)?;
        listing.seen = walk;
        Some(visits)
    }
}

/// The cgroups under `mount` that `selection` picks, in one walk with nothing kept from an
/// earlier one.
pub fn discover(mount: &Path, selection: &Selection) -> Found {
    Walker::default().discover(mount, selection)
}

fn wanted(selection: &Selection, path: &str) -> bool {
    match selection {
        Selection::None => false,
        // The root is the host, counted apart.
        Selection::Auto => path != "/",
        Selection::Patterns(patterns) => patterns.iter().any(|p| p.matches(path)),
    }
}

/// The labels a cgroup path carries, besides `cgroup` itself: `slice` and `unit` (systemd),
/// `pod_uid`, `qos_class` and `container_id` (Kubernetes, systemd or cgroupfs driver), and
/// `container_runtime` where the scope names one.
pub fn labels_of(path: &str) -> Vec<(&'static str, String)> {
    let comps: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let mut labels: Vec<(&'static str, String)> = Vec::new();
    let set =
        |labels: &mut Vec<(&'static str, String)>, key: &'static str, value: String| match labels
            .iter_mut()
            .find(|(k, _)| *k == key)
        {
            Some(slot) => slot.1 = value,
            None => labels.push((key, value)),
        };
    // The kubelet's tree starts at `kubepods` (cgroupfs driver) or `kubepods.slice` (systemd),
    // at the root or below whatever its --cgroup-root puts above it (kind's nodes have
    // `kubelet.slice/kubelet-kubepods.slice`); nothing above it is a pod's.
    let anchor = comps.iter().position(|c| *c == "kubepods" || c.ends_with("kubepods.slice"));
    for (i, comp) in comps.iter().enumerate() {
        let kube = anchor.is_some_and(|a| i >= a);
        if let Some(slice) = comp.strip_suffix(".slice") {
            set(&mut labels, "slice", (*comp).to_string());
            if kube {
                // kubepods-burstable-pod<uid with _>.slice, kubepods-besteffort.slice
                if let Some(pos) = slice.rfind("-pod") {
                    let uid = slice[pos + 4..].replace('_', "-");
                    if is_uid(&uid) {
                        set(&mut labels, "pod_uid", uid);
                    }
                }
                for qos in ["burstable", "besteffort"] {
                    if slice.split('-').any(|p| p == qos) {
                        set(&mut labels, "qos_class", qos.to_string());
                    }
                }
            }
        } else if comp.ends_with(".service") || comp.ends_with(".scope") {
            set(&mut labels, "unit", (*comp).to_string());
            // cri-containerd-<id>.scope, crio-<id>.scope, docker-<id>.scope
            let stem = comp.trim_end_matches(".scope").trim_end_matches(".service");
            if let Some(pos) = stem.rfind('-') {
                let (runtime, id) = (&stem[..pos], &stem[pos + 1..]);
                if is_container_id(id) {
                    set(&mut labels, "container_id", id.to_string());
                    set(&mut labels, "container_runtime", runtime.to_string());
                }
            }
        } else if kube {
            // cgroupfs driver: /kubepods/burstable/pod<uid>/<container id> (cri-o:
            // crio-<container id>)
            if let Some(uid) = comp.strip_prefix("pod")
                && is_uid(uid)
            {
                set(&mut labels, "pod_uid", uid.to_string());
            } else if anchor.is_some_and(|a| i == a + 1)
                && (*comp == "burstable" || *comp == "besteffort")
            {
                set(&mut labels, "qos_class", (*comp).to_string());
            } else if is_container_id(comp) {
                set(&mut labels, "container_id", (*comp).to_string());
            } else if let Some((runtime, id)) = comp.rsplit_once('-')
                && is_container_id(id)
            {
                set(&mut labels, "container_id", id.to_string());
                set(&mut labels, "container_runtime", runtime.to_string());
            }
        }
    }
    if anchor.is_some()
        && labels.iter().any(|(k, _)| *k == "pod_uid")
        && !labels.iter().any(|(k, _)| *k == "qos_class")
    {
        // Pods directly under kubepods are guaranteed.
        labels.push(("qos_class", "guaranteed".to_string()));
    }
    labels
}

/// A pod uid: 8-4-4-4-12 hexadecimal digits, or 32 without dashes (the kubelet names a static
/// pod by a hash of its manifest).
pub(crate) fn is_uid(text: &str) -> bool {
    let hex = |p: &str| p.bytes().all(|b| b.is_ascii_hexdigit());
    if text.len() == 32 {
        return hex(text);
    }
    let parts: Vec<&str> = text.split('-').collect();
    parts.len() == 5 && parts.iter().zip([8, 4, 4, 4, 12]).all(|(p, n)| p.len() == n && hex(p))
}

/// A container id: 64 hexadecimal digits.
pub(crate) fn is_container_id(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_walk_reads_only_where_a_pattern_may_match_below() {
        let literal = Pattern::new("/a.slice/x.service").unwrap();
        assert!(literal.may_match_below("/"));
        assert!(literal.may_match_below("/a.slice"));
        assert!(!literal.may_match_below("/a.slice/x.service"));
        assert!(!literal.may_match_below("/b.slice"));
        let star = Pattern::new("/*.slice/*").unwrap();
        assert!(star.may_match_below("/user.slice"));
        assert!(!star.may_match_below("/user.slice/x"));
        let deep = Pattern::new("/kubepods.slice/**").unwrap();
        assert!(deep.may_match_below("/kubepods.slice/pod1/c"));
        assert!(!deep.may_match_below("/system.slice"));
        // The walk: nothing under b.slice is read, yet a picked cgroup's children are, so it
        // is known not to be a leaf.
        let dir = tempfile::tempdir().unwrap();
        for p in ["a.slice/x.service/inner", "b.slice/y.service"] {
            std::fs::create_dir_all(dir.path().join(p)).unwrap();
        }
        let selection = Selection::Patterns(vec![literal]);
        let found = discover(dir.path(), &selection);
        let paths: Vec<&str> = found.cgroups.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(paths, ["/a.slice/x.service"]);
        assert!(found.leaves.is_empty(), "{:?}", found.leaves);
    }

    #[test]
    fn flags_select_auto_patterns_or_none() {
        assert_eq!(Selection::from_flags(&[], None), Ok(Selection::None));
        assert_eq!(Selection::from_flags(&[], Some(" auto ")), Ok(Selection::Auto));
        let both = Selection::from_flags(&["/a".into()], Some("auto")).unwrap_err();
        assert_eq!(both, SelectionError::AutoWithPatterns);
        assert_eq!(
            both.to_string(),
            "--for-each-cgroup auto counts every cgroup: give it without --cgroup"
        );
        let Ok(Selection::Patterns(p)) = Selection::from_flags(&["/a".into()], Some("b,,c")) else {
            panic!()
        };
        assert_eq!(p.len(), 3);
        let err = Selection::from_flags(&[], Some("/a/../b")).unwrap_err();
        let leaves = PatternError::LeavesTree("/a/../b".into());
        assert_eq!(err, SelectionError::Pattern { flag: "--for-each-cgroup", error: leaves });
        assert_eq!(
            err.to_string(),
            "--for-each-cgroup: cgroup pattern `/a/../b`: `..` would leave the cgroup tree"
        );
    }

    #[test]
    fn patterns_match_components() {
        let p = Pattern::new("/system.slice/*.service").unwrap();
        assert!(p.matches("/system.slice/ssh.service"));
        assert!(!p.matches("/system.slice/ssh.socket"));
        assert!(!p.matches("/system.slice/a/b.service"));
        let deep = Pattern::new("kubepods.slice/**").unwrap();
        assert!(deep.matches("/kubepods.slice"));
        assert!(deep.matches("/kubepods.slice/a/b/c"));
        assert!(!deep.matches("/user.slice"));
        assert!(Pattern::new("/a/../b").is_err());
        assert!(Pattern::new(" ").is_err());
        assert!(Pattern::new("/x/y").unwrap().is_literal());
        let plain = Pattern::new("/x/y").unwrap();
        assert!(plain.matches("/x/y") && plain.matches("x//y/"));
        assert!(!plain.matches("/x") && !plain.matches("/x/y/z") && !plain.matches("/x/yz"));
        assert!(plain.may_match_below("/x") && !plain.may_match_below("/y"));
        assert_eq!(Pattern::new("x/y").unwrap().literal_path(), "/x/y");
        assert!(Pattern::new("/t?st*").unwrap().matches("/test-1"));
    }

    #[test]
    fn kubernetes_and_systemd_labels_come_from_the_path() {
        let id = "a".repeat(64);
        let systemd = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod12345678_1234_1234_1234_123456789abc.slice/cri-containerd-{id}.scope"
        );
        let labels = labels_of(&systemd);
        let get = |l: &[(&str, String)], k: &str| {
            l.iter().find(|(key, _)| *key == k).map(|(_, v)| v.clone())
        };
        assert_eq!(
            get(&labels, "pod_uid").as_deref(),
            Some("12345678-1234-1234-1234-123456789abc")
        );
        assert_eq!(get(&labels, "qos_class").as_deref(), Some("burstable"));
        assert_eq!(get(&labels, "container_id"), Some(id.clone()));
        assert_eq!(get(&labels, "container_runtime").as_deref(), Some("cri-containerd"));
        let cgroupfs = format!("/kubepods/pod12345678-1234-1234-1234-123456789abc/{id}");
        let labels = labels_of(&cgroupfs);
        assert_eq!(get(&labels, "qos_class").as_deref(), Some("guaranteed"));
        assert_eq!(get(&labels, "container_id"), Some(id));
        let unit = labels_of("/system.slice/ssh.service");
        assert_eq!(get(&unit, "slice").as_deref(), Some("system.slice"));
        assert_eq!(get(&unit, "unit").as_deref(), Some("ssh.service"));
        assert!(labels_of("/plain/dir").is_empty());
        // Below a --cgroup-root (kind's nodes), a static pod's hash for a uid, cri-o under
        // the cgroupfs driver; nothing above the kubelet's tree is read as a pod's.
        let nested = format!(
            "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod0123456789abcdef0123456789abcdef.slice/crio-{}.scope",
            "b".repeat(64)
        );
        let labels = labels_of(&nested);
        assert_eq!(get(&labels, "pod_uid").as_deref(), Some("0123456789abcdef0123456789abcdef"));
        assert_eq!(get(&labels, "qos_class").as_deref(), Some("besteffort"));
        assert_eq!(get(&labels, "container_runtime").as_deref(), Some("crio"));
        let crio = format!(
            "/k8s/kubepods/besteffort/pod12345678-1234-1234-1234-123456789abc/crio-{}",
            "c".repeat(64)
        );
        let labels = labels_of(&crio);
        assert_eq!(get(&labels, "qos_class").as_deref(), Some("besteffort"));
        assert_eq!(get(&labels, "container_id"), Some("c".repeat(64)));
        assert_eq!(get(&labels, "container_runtime").as_deref(), Some("crio"));
        let above = labels_of("/pod12345678-1234-1234-1234-123456789abc/x/kubepods");
        assert_eq!(get(&above, "pod_uid"), None);
    }

    #[test]
    fn discovery_walks_parents_first_and_skips_links() {
        let dir = tempfile::tempdir().unwrap();
        for p in ["a.slice/x.service", "a.slice/y.service", "b"] {
            std::fs::create_dir_all(dir.path().join(p)).unwrap();
        }
        std::os::unix::fs::symlink(dir.path().join("b"), dir.path().join("link")).unwrap();
        let paths = |f: Found| f.cgroups.into_iter().map(|c| c.0).collect::<Vec<_>>();
        let all = discover(dir.path(), &Selection::Auto);
        assert!(!all.cut);
        assert_eq!(paths(all), ["/a.slice", "/b", "/a.slice/x.service", "/a.slice/y.service"]);
        let some = Selection::Patterns(vec![Pattern::new("/a.slice/*").unwrap()]);
        assert_eq!(
            paths(discover(dir.path(), &some)),
            ["/a.slice/x.service", "/a.slice/y.service"]
        );
        assert!(discover(dir.path(), &Selection::None).cgroups.is_empty());
    }

    #[test]
    fn named_cgroups_are_found_without_a_walk_and_never_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        for p in ["a.slice/x.service/inner", "a.slice/y.service", "b"] {
            std::fs::create_dir_all(dir.path().join(p)).unwrap();
        }
        std::os::unix::fs::symlink(dir.path().join("a.slice"), dir.path().join("link")).unwrap();
        let named = |names: &[&str]| {
            Selection::Patterns(names.iter().map(|n| Pattern::new(n).unwrap()).collect())
        };
        let wanted =
            named(&["b", "/a.slice/y.service", "link/y.service", "a.slice/x.service", "gone"]);
        let mut walker = Walker::default();
        let found = walker.discover(dir.path(), &wanted);
        let paths: Vec<&str> = found.cgroups.iter().map(|c| c.0.as_str()).collect();
        // Parents before children, siblings by name; the link and the missing one are not there.
        assert_eq!(paths, ["/b", "/a.slice/x.service", "/a.slice/y.service"]);
        let leaves: Vec<&str> = found.leaves.iter().map(String::as_str).collect();
        assert_eq!(leaves, ["/a.slice/y.service", "/b"]);
        assert_eq!(found.read, 0, "no directory is listed");
        // The ids are the directories' inodes, as the walk gives them.
        use std::os::unix::fs::MetadataExt;
        let ino = std::fs::metadata(dir.path().join("b")).unwrap().ino();
        assert_eq!(found.cgroups[0].1, ino);
        // The same answer as a walk that finds them by pattern.
        let walked = walker.discover(dir.path(), &named(&["b", "a.slice/*.service"]));
        assert_eq!(walked.cgroups, found.cgroups);
        assert_eq!(walked.leaves, found.leaves);
    }

    /// Sets `dir`'s mtime back to `to`, as a kernel that does not stamp a parent leaves it.
    fn set_mtime(dir: &Path, to: std::time::SystemTime) {
        std::fs::File::open(dir).unwrap().set_modified(to).unwrap();
    }

    #[test]
    fn a_walker_reads_a_directory_again_only_when_its_stat_changed() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        for p in ["p/x", "p/y", "q"] {
            std::fs::create_dir_all(dir.path().join(p)).unwrap();
        }
        let mut walker = Walker::default();
        let paths = |f: &Found| f.cgroups.iter().map(|c| c.0.clone()).collect::<Vec<_>>();
        let first = walker.discover(dir.path(), &Selection::Auto);
        assert_eq!(paths(&first), ["/p", "/q", "/p/x", "/p/y"]);
        // The root and every cgroup (leaves included, for their leafness) were read.
        assert_eq!(first.read, 5);
        let leaves: Vec<&str> = first.leaves.iter().map(String::as_str).collect();
        assert_eq!(leaves, ["/p/x", "/p/y", "/q"]);
        // Nothing changed: nothing is read, and the walk finds the same.
        let second = walker.discover(dir.path(), &Selection::Auto);
        assert_eq!(second.read, 0);
        assert_eq!(second, Found { read: 0, ..first.clone() });
        // A new cgroup raises its parent's link count: the parent alone is read again (and
        // the new one, never read before), and /p/y is no longer a leaf.
        std::fs::create_dir(dir.path().join("p/y/z")).unwrap();
        let third = walker.discover(dir.path(), &Selection::Auto);
        assert_eq!(paths(&third), ["/p", "/q", "/p/x", "/p/y", "/p/y/z"]);
        assert_eq!(third.read, 2);
        assert!(!third.leaves.contains("/p/y") && third.leaves.contains("/p/y/z"));
        // A cgroup made again under its path while its parent's stat is as it was (its mtime
        // set back and its link count the same, as kernfs leaves a parent): its stat has
        // another inode, so the parent is read again and the new id is found.
        let _ = walker.discover(dir.path(), &Selection::Auto);
        let p = dir.path().join("p");
        let before = std::fs::symlink_metadata(&p).unwrap().modified().unwrap();
        let old_id = third.cgroups.iter().find(|c| c.0 == "/p/x").unwrap().1;
        let aside = tempfile::tempdir().unwrap();
        std::fs::create_dir(aside.path().join("made")).unwrap();
        // The old one moved out stays alive, so the new one cannot be handed its inode.
        std::fs::rename(p.join("x"), aside.path().join("old")).unwrap();
        std::fs::rename(aside.path().join("made"), p.join("x")).unwrap();
        set_mtime(&p, before);
        let fourth = walker.discover(dir.path(), &Selection::Auto);
        assert_eq!(fourth.read, 2, "/p and the new /p/x");
        let new_id = std::fs::symlink_metadata(p.join("x")).unwrap().ino();
        assert_ne!(old_id, new_id);
        assert_eq!(fourth.cgroups.iter().find(|c| c.0 == "/p/x").unwrap().1, new_id);
        // A sibling gone and another made while the parent's stat stays: the vanished one's
        // stat fails, so the parent is read again and the new one found in the same walk.
        let _ = walker.discover(dir.path(), &Selection::Auto);
        let before = std::fs::symlink_metadata(&p).unwrap().modified().unwrap();
        std::fs::remove_dir(p.join("y/z")).unwrap();
        std::fs::remove_dir(p.join("y")).unwrap();
        std::fs::create_dir(p.join("w")).unwrap();
        set_mtime(&p, before);
        let fifth = walker.discover(dir.path(), &Selection::Auto);
        assert_eq!(paths(&fifth), ["/p", "/q", "/p/w", "/p/x"]);
        assert_eq!(fifth.read, 2, "/p and the new /p/w");
        // A picked cgroup no pattern looks below is told a leaf by its link count, unread;
        // named alone, not even its parents are listed.
        let literal = Selection::Patterns(vec![Pattern::new("/p/x").unwrap()]);
        let mut walker = Walker::default();
        let found = walker.discover(dir.path(), &literal);
        assert_eq!(paths(&found), ["/p/x"]);
        assert!(found.leaves.contains("/p/x"));
        assert_eq!(found.read, 0, "nothing listed");
        let beside =
            Selection::Patterns(vec![Pattern::new("/p/x").unwrap(), Pattern::new("/q*").unwrap()]);
        let found = walker.discover(dir.path(), &beside);
        assert_eq!(paths(&found), ["/q", "/p/x"]);
        assert!(found.leaves.contains("/p/x"));
        assert_eq!(found.read, 2, "the root and /p, not /p/x");
    }

    #[test]
    fn a_directory_made_again_has_a_new_id_and_non_utf8_names_are_listed() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("svc")).unwrap();
        let first = discover(dir.path(), &Selection::Auto);
        // The old directory moved aside keeps its inode alive, so the one made again under its
        // name cannot be handed the same number (a removed one's may be, on ext4 and tmpfs,
        // as cgroupfs never does).
        std::fs::rename(dir.path().join("svc"), dir.path().join("old")).unwrap();
        std::fs::create_dir(dir.path().join("svc")).unwrap();
        let second = discover(dir.path(), &Selection::Auto);
        let id = |f: &Found| f.cgroups.iter().find(|c| c.0 == "/svc").unwrap().1;
        assert_ne!(id(&first), id(&second));
        std::fs::create_dir(dir.path().join(std::ffi::OsStr::from_bytes(b"bad\xff"))).unwrap();
        let third = discover(dir.path(), &Selection::Auto);
        assert_eq!(third.unnamed, ["/bad\u{fffd}"]);
        assert!(third.cgroups.iter().all(|c| !c.0.starts_with("/bad")));
    }
}
